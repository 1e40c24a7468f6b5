//! The log's threads: one writer that takes every queued append and writes them together,
//! and a small pool of sync threads that fsync and then acknowledge.
//!
//! A write that fails (a full disk, an I/O error) is rolled back: the segment is truncated
//! to the end of the last good write, so the next records follow intact ones and never sit
//! behind a torn record. Should the truncation fail too, or an fsync fail (after which the
//! kernel may have dropped the unwritten pages, so what the file holds is unknown), the
//! segment is sealed and the next write starts a new one; replay skips a torn tail. (The
//! records of a batch whose fsync failed, or that a failed truncation left behind, may
//! still be replayed after a restart although they were refused: a client's retry can then
//! store them twice. Nothing acknowledged is lost either way.)

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use super::format::{SEGMENT_MAGIC, put_record};
use super::{Ack, WalStats, segment_name};
use crate::StoreError;

/// fsyncs of the log that may run at the same time.
pub const SYNCERS: usize = 2;

pub(super) enum Job {
    Append(Vec<u8>, Ack),
    /// Close the current segment and start the next; replies with the closed segment's number.
    Rotate(Sender<Result<u64, StoreError>>),
    Stop,
}

/// What the writer, the sync threads and the handle share.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) stats: Mutex<WalStats>,
    /// The last write failed for lack of space (cleared by the next write that succeeds).
    pub(super) full: AtomicBool,
    /// An fsync failed: the next write starts a new segment.
    seal: AtomicBool,
}

impl Shared {
    /// Notes a failed write or fsync: a full disk sets `full`.
    fn failed(&self, e: &StoreError) {
        if matches!(e, StoreError::NoSpace { .. }) {
            self.full.store(true, Ordering::SeqCst);
        }
    }
}

/// Creates segment `n` in `dir` with its header and makes its directory entry durable, so
/// acknowledged records in it survive a crash.
pub(super) fn create_segment(dir: &Path, n: u64) -> Result<File, StoreError> {
    let path = dir.join(segment_name(n));
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    if let Err(e) = file.write_all_at(&SEGMENT_MAGIC, 0) {
        drop(file);
        let _ = std::fs::remove_file(&path);
        return Err(StoreError::io(&path, e));
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(file)
}

/// Records written to a segment and waiting for an fsync before their acks run.
struct Written {
    file: Arc<File>,
    path: PathBuf,
    segment: u64,
    acks: Vec<Ack>,
    started: Instant,
}

/// Number of written batches not yet acknowledged; rotation and stop wait for zero.
#[derive(Default)]
struct InFlight {
    count: Mutex<usize>,
    idle: Condvar,
}

impl InFlight {
    fn add(&self) {
        *self.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }

    fn done(&self, n: usize) {
        let mut c = self.count.lock().unwrap_or_else(|e| e.into_inner());
        *c = c.saturating_sub(n);
        if *c == 0 {
            self.idle.notify_all();
        }
    }

    fn wait_idle(&self) {
        let mut c = self.count.lock().unwrap_or_else(|e| e.into_inner());
        while *c > 0 {
            c = self.idle.wait(c).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A sync thread: takes every written batch queued, fsyncs, acknowledges.
fn syncer(rx: Arc<Mutex<Receiver<Written>>>, in_flight: Arc<InFlight>, shared: Arc<Shared>) {
    loop {
        let batches: Vec<Written> = {
            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
            let Ok(first) = rx.recv() else { return };
            std::iter::once(first).chain(rx.try_iter()).collect()
        };
        // Every batch was written before this fsync starts, so one fsync per file covers
        // them all (rotation waits for idle, so they normally share one file).
        let mut results: Vec<Result<(), StoreError>> = Vec::with_capacity(batches.len());
        let mut fsyncs = 0;
        for (i, b) in batches.iter().enumerate() {
            let earlier = batches[..i]
                .iter()
                .position(|e| Arc::ptr_eq(&e.file, &b.file))
                .and_then(|j| results.get(j).cloned());
            let result = earlier.unwrap_or_else(|| {
                fsyncs += 1;
                let r = b.file.sync_data().map_err(|e| StoreError::io(&b.path, e));
                if let Err(e) = &r {
                    shared.failed(e);
                    shared.seal.store(true, Ordering::SeqCst);
                    tracing::error!(error = %e, "fsync of the write-ahead log failed; its records are refused and the segment is sealed");
                }
                r
            });
            results.push(result);
        }
        let n = batches.len();
        {
            let mut s = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
            s.fsyncs += fsyncs;
            for b in &batches {
                s.sync_micros += b.started.elapsed().as_micros() as u64;
            }
        }
        for (b, result) in batches.into_iter().zip(results) {
            for ack in b.acks {
                ack(result.clone().map(|()| b.segment));
            }
        }
        in_flight.done(n);
    }
}

/// The segment being written.
struct Current {
    file: Arc<File>,
    path: PathBuf,
    number: u64,
    /// End of the last good write: where the next one goes, and what a failed one is
    /// truncated back to.
    offset: u64,
    /// Written records may be damaged (a failed rollback or fsync): start a new segment
    /// before the next write.
    sealed: bool,
}

impl Current {
    fn open(dir: &Path, number: u64, file: File) -> Current {
        Current {
            file: Arc::new(file),
            path: dir.join(segment_name(number)),
            number,
            offset: SEGMENT_MAGIC.len() as u64,
            sealed: false,
        }
    }

    /// Moves on to segment `number + 1`.
    fn next(&mut self, dir: &Path) -> Result<(), StoreError> {
        let file = create_segment(dir, self.number + 1)?;
        *self = Current::open(dir, self.number + 1, file);
        Ok(())
    }

    /// Writes `buf` at the end of the good records; on failure truncates the partial write
    /// away (or seals the segment when that fails too).
    fn write(&mut self, dir: &Path, buf: &[u8]) -> Result<(), StoreError> {
        if self.sealed {
            self.next(dir)?;
        }
        match self.file.write_all_at(buf, self.offset) {
            Ok(()) => {
                self.offset += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                let err = StoreError::io(&self.path, e);
                if let Err(t) = self.file.set_len(self.offset) {
                    tracing::error!(segment = self.number, error = %t, "could not truncate a failed write-ahead log write; sealing the segment");
                    self.sealed = true;
                }
                Err(err)
            }
        }
    }
}

pub(super) fn writer(
    file: File,
    number: u64,
    dir: PathBuf,
    segment_bytes: u64,
    rx: Receiver<Job>,
    shared: Arc<Shared>,
) {
    let mut current = Current::open(&dir, number, file);
    let in_flight = Arc::new(InFlight::default());
    let (sync_tx, sync_rx) = mpsc::channel::<Written>();
    let sync_rx = Arc::new(Mutex::new(sync_rx));
    let syncers: Vec<JoinHandle<()>> = (0..SYNCERS)
        .filter_map(|_| {
            let (rx, in_flight, shared) = (sync_rx.clone(), in_flight.clone(), shared.clone());
            std::thread::Builder::new()
                .name("ember-wal-sync".into())
                .spawn(move || syncer(rx, in_flight, shared))
                .ok()
        })
        .collect();
    let mut buf = Vec::new();
    let mut acks: Vec<Ack> = Vec::new();
    let mut stop = false;
    while !stop {
        let Ok(first) = rx.recv() else { break };
        let mut job = Some(first);
        let mut rotate = None;
        // Group commit: take everything already queued (bounded, so one huge burst does not
        // delay the first acks indefinitely).
        while let Some(j) = job.take() {
            match j {
                Job::Append(payload, ack) => {
                    put_record(&mut buf, &payload);
                    acks.push(ack);
                }
                Job::Rotate(reply) => rotate = Some(reply),
                Job::Stop => stop = true,
            }
            if stop || rotate.is_some() || buf.len() > 64 << 20 {
                break;
            }
            job = rx.try_recv().ok();
        }
        if !acks.is_empty() {
            let started = Instant::now();
            if shared.seal.swap(false, Ordering::SeqCst) {
                current.sealed = true;
            }
            let written = current.write(&dir, &buf);
            let batch = Written {
                file: current.file.clone(),
                path: current.path.clone(),
                acks: std::mem::take(&mut acks),
                segment: current.number,
                started,
            };
            match written {
                Err(err) => {
                    shared.failed(&err);
                    for ack in batch.acks {
                        ack(Err(err.clone()));
                    }
                }
                Ok(()) => {
                    shared.full.store(false, Ordering::SeqCst);
                    {
                        let mut s = shared.stats.lock().unwrap_or_else(|e| e.into_inner());
                        s.records += batch.acks.len() as u64;
                        s.bytes += buf.len() as u64;
                    }
                    if syncers.is_empty() {
                        // No sync thread could be started: fsync here.
                        let result = current
                            .file
                            .sync_data()
                            .map_err(|e| StoreError::io(&current.path, e));
                        shared
                            .stats
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .fsyncs += 1;
                        for ack in batch.acks {
                            ack(result.clone().map(|()| batch.segment));
                        }
                    } else {
                        in_flight.add();
                        if let Err(mpsc::SendError(batch)) = sync_tx.send(batch) {
                            in_flight.done(1);
                            for ack in batch.acks {
                                ack(Err(StoreError::Closed));
                            }
                        }
                    }
                    // A full segment: the next write starts a new one (if that cannot be
                    // created yet, this one keeps growing and the next write tries again).
                    if current.offset >= segment_bytes && rotate.is_none() {
                        let _ = current.next(&dir);
                    }
                }
            }
            buf.clear();
        }
        if let Some(reply) = rotate {
            // Everything written to the closing segment is durable before it is reported closed.
            in_flight.wait_idle();
            let closed = current.number;
            let _ = reply.send(current.next(&dir).map(|()| closed));
        }
    }
    // Stop: every written batch is acknowledged before the writer reports closed.
    in_flight.wait_idle();
    drop(sync_tx);
    for t in syncers {
        let _ = t.join();
    }
    // Anything queued after Stop is refused.
    while let Ok(job) = rx.try_recv() {
        match job {
            Job::Append(_, ack) => ack(Err(StoreError::Closed)),
            Job::Rotate(reply) => {
                let _ = reply.send(Err(StoreError::Closed));
            }
            Job::Stop => {}
        }
    }
}
