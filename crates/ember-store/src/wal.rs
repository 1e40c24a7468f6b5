//! Write-ahead log with group commit.
//!
//! Owns the on-disk log under `<data-dir>/wal/`: numbered segment files of framed records
//! (`u32 length LE`, `u32 crc32 LE`, payload). One writer thread takes every append queued
//! so far and writes them together; a small pool of sync threads fsyncs and then
//! acknowledges them: concurrent ingests share one `fsync` instead of paying one each.
//!
//! Up to [`SYNCERS`] fsyncs run at once. A batch written while an earlier fsync is still
//! running gets its own fsync right away instead of waiting for that one to finish (the
//! disk overlaps concurrent flushes), so with few clients an append waits about one fsync,
//! not one and a half. An acknowledgement always follows an fsync that started after the
//! record's write returned; a sync thread that finds several batches queued covers them all
//! with one fsync.
//!
//! Replay reads segments in order and stops a segment at its first torn or corrupt record
//! (a crash mid-write leaves at most the unacknowledged tail damaged).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::StoreError;

/// fsyncs of the log that may run at the same time.
pub const SYNCERS: usize = 2;

/// Largest accepted record; anything bigger in a segment is treated as corruption.
const MAX_RECORD: u32 = 1 << 30;

/// Callback run on a log thread once a record is durable (or failed to be); `Ok` carries the
/// number of the segment the record is in, which tells the store whether a flush that cut the
/// log at some segment already holds the record.
pub type Ack = Box<dyn FnOnce(Result<u64, StoreError>) + Send>;

enum Job {
    Append(Vec<u8>, Ack),
    /// Close the current segment and start the next; replies with the closed segment's number.
    Rotate(Sender<Result<u64, StoreError>>),
    Stop,
}

/// Counters the writer updates, for metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct WalStats {
    /// Records written.
    pub records: u64,
    /// Bytes written (payload and framing).
    pub bytes: u64,
    /// `fsync` calls made.
    pub fsyncs: u64,
    /// Total time spent in write + fsync, in microseconds.
    pub sync_micros: u64,
}

/// The write-ahead log: a handle to the writer thread.
pub struct Wal {
    tx: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    stats: std::sync::Arc<Mutex<WalStats>>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

fn segment_name(n: u64) -> String {
    format!("{n:010}.wal")
}

fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))? {
        let entry = entry.map_err(|e| StoreError::io(dir, e))?;
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_suffix(".wal"))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((n, entry.path()));
    }
    out.sort();
    Ok(out)
}

/// What replay found.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReplayStats {
    /// Segments read.
    pub segments: usize,
    /// Intact records handed to the callback.
    pub records: usize,
    /// Segments that ended in a torn or corrupt record.
    pub torn_segments: usize,
}

impl Wal {
    /// Opens the log in `dir` (created if missing), calls `apply` with the segment number and
    /// payload of every intact record of the existing segments in order, then starts a fresh
    /// segment and the writer thread.
    pub fn open(
        dir: &Path,
        skip_through: u64,
        mut apply: impl FnMut(u64, &[u8]),
    ) -> Result<(Wal, ReplayStats), StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        let existing = segments(dir)?;
        let mut stats = ReplayStats::default();
        for (n, path) in &existing {
            // Already folded into a block (a crash between writing the block and deleting
            // its segments leaves them behind).
            if *n <= skip_through {
                let _ = fs::remove_file(path);
                continue;
            }
            stats.segments += 1;
            let mut bytes = Vec::new();
            File::open(path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| StoreError::io(path, e))?;
            let mut pos = 0usize;
            while pos < bytes.len() {
                let Some(header) = bytes.get(pos..pos + 8) else {
                    stats.torn_segments += 1;
                    break;
                };
                let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
                let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
                let end = pos + 8 + len as usize;
                let payload = match bytes.get(pos + 8..end) {
                    Some(p) if len <= MAX_RECORD && crc32fast::hash(p) == crc => p,
                    _ => {
                        stats.torn_segments += 1;
                        break;
                    }
                };
                apply(*n, payload);
                stats.records += 1;
                pos = end;
            }
        }
        let next = existing
            .last()
            .map(|(n, _)| n + 1)
            .unwrap_or(1)
            .max(skip_through + 1);
        let path = dir.join(segment_name(next));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        // Make the new segment's directory entry durable, so acknowledged records in it survive.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        let dir_owned = dir.to_path_buf();
        let (tx, rx) = mpsc::channel();
        let wal_stats = std::sync::Arc::new(Mutex::new(WalStats::default()));
        let thread_stats = wal_stats.clone();
        let thread = std::thread::Builder::new()
            .name("ember-wal".into())
            .spawn(move || writer(file, next, dir_owned, rx, thread_stats))
            .map_err(|e| StoreError::io(dir, e))?;
        Ok((
            Wal {
                tx: Mutex::new(Some(tx)),
                thread: Mutex::new(Some(thread)),
                stats: wal_stats,
            },
            stats,
        ))
    }

    /// Queues a record; `ack` runs once it is written and fsync'd (or with the error).
    pub fn append(&self, payload: Vec<u8>, ack: Ack) {
        let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref() {
            Some(tx) => {
                if let Err(mpsc::SendError(Job::Append(_, ack))) =
                    tx.send(Job::Append(payload, ack))
                {
                    ack(Err(StoreError::Closed));
                }
            }
            None => ack(Err(StoreError::Closed)),
        }
    }

    /// [`Wal::append`], blocking until the record is durable; returns its segment number.
    pub fn append_blocking(&self, payload: Vec<u8>) -> Result<u64, StoreError> {
        let (tx, rx) = mpsc::channel();
        self.append(
            payload,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or(Err(StoreError::Closed))
    }

    /// Closes the current segment (everything queued before is written and fsync'd) and
    /// starts a new one. Returns the closed segment's number: every record acknowledged
    /// before this call is in a segment numbered at most that.
    pub fn rotate(&self) -> Result<u64, StoreError> {
        let (tx, rx) = mpsc::channel();
        {
            let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
            let Some(sender) = guard.as_ref() else {
                return Err(StoreError::Closed);
            };
            sender
                .send(Job::Rotate(tx))
                .map_err(|_| StoreError::Closed)?;
        }
        rx.recv().unwrap_or(Err(StoreError::Closed))
    }

    /// Counters so far.
    pub fn stats(&self) -> WalStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes and fsyncs everything queued, then stops the writer. Later appends fail with
    /// [`StoreError::Closed`].
    pub fn close(&self) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(tx) = tx {
            let _ = tx.send(Job::Stop);
        }
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.close();
    }
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
fn syncer(
    rx: Arc<Mutex<Receiver<Written>>>,
    in_flight: Arc<InFlight>,
    stats: Arc<Mutex<WalStats>>,
) {
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
                b.file.sync_data().map_err(|e| StoreError::io(&b.path, e))
            });
            results.push(result);
        }
        let n = batches.len();
        {
            let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
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

fn writer(
    file: File,
    mut number: u64,
    dir: PathBuf,
    rx: Receiver<Job>,
    stats: std::sync::Arc<Mutex<WalStats>>,
) {
    let mut file = Arc::new(file);
    let mut path = dir.join(segment_name(number));
    let in_flight = Arc::new(InFlight::default());
    let (sync_tx, sync_rx) = mpsc::channel::<Written>();
    let sync_rx = Arc::new(Mutex::new(sync_rx));
    let syncers: Vec<JoinHandle<()>> = (0..SYNCERS)
        .filter_map(|_| {
            let (rx, in_flight, stats) = (sync_rx.clone(), in_flight.clone(), stats.clone());
            std::thread::Builder::new()
                .name("ember-wal-sync".into())
                .spawn(move || syncer(rx, in_flight, stats))
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
                    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
                    buf.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
                    buf.extend_from_slice(&payload);
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
            let written = (&*file).write_all(&buf);
            {
                let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
                s.records += acks.len() as u64;
                s.bytes += buf.len() as u64;
            }
            buf.clear();
            let batch = Written {
                file: file.clone(),
                path: path.clone(),
                acks: std::mem::take(&mut acks),
                segment: number,
                started,
            };
            match written {
                Err(e) => {
                    let err = StoreError::io(&path, e);
                    for ack in batch.acks {
                        ack(Err(err.clone()));
                    }
                }
                Ok(()) if syncers.is_empty() => {
                    // No sync thread could be started: fsync here.
                    let result = file.sync_data().map_err(|e| StoreError::io(&path, e));
                    stats.lock().unwrap_or_else(|e| e.into_inner()).fsyncs += 1;
                    for ack in batch.acks {
                        ack(result.clone().map(|()| number));
                    }
                }
                Ok(()) => {
                    in_flight.add();
                    if let Err(mpsc::SendError(batch)) = sync_tx.send(batch) {
                        in_flight.done(1);
                        for ack in batch.acks {
                            ack(Err(StoreError::Closed));
                        }
                    }
                }
            }
        }
        if let Some(reply) = rotate {
            // Everything written to the closing segment is durable before it is reported closed.
            in_flight.wait_idle();
            let next_path = dir.join(segment_name(number + 1));
            let opened = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&next_path)
                .map_err(|e| StoreError::io(&next_path, e));
            match opened {
                Ok(f) => {
                    if let Ok(d) = File::open(&dir) {
                        let _ = d.sync_all();
                    }
                    file = Arc::new(f);
                    path = next_path;
                    let _ = reply.send(Ok(number));
                    number += 1;
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
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

/// Reads every intact record of segments numbered at most `through` (for building a block).
pub fn read_segments(
    dir: &Path,
    through: u64,
    mut f: impl FnMut(&[u8]),
) -> Result<Vec<PathBuf>, StoreError> {
    let mut used = Vec::new();
    for (n, path) in segments(dir)? {
        if n > through {
            continue;
        }
        let bytes = fs::read(&path).map_err(|e| StoreError::io(&path, e))?;
        let mut pos = 0usize;
        while let Some(header) = bytes.get(pos..pos + 8) {
            let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
            let end = pos + 8 + len as usize;
            match bytes.get(pos + 8..end) {
                Some(p) if len <= MAX_RECORD && crc32fast::hash(p) == crc => f(p),
                _ => break,
            }
            pos = end;
        }
        used.push(path);
    }
    Ok(used)
}

/// Deletes the segments numbered at most `through` (a block now holds them); returns the
/// bytes they held. A segment that cannot be deleted is left for the next start, which skips
/// it as covered by a block.
pub fn delete_segments(dir: &Path, through: u64) -> u64 {
    let mut freed = 0;
    for (n, path) in segments(dir).unwrap_or_default() {
        if n <= through {
            let len = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if fs::remove_file(&path).is_ok() {
                freed += len;
            }
        }
    }
    freed
}
