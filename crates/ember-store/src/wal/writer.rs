//! Writing the log: an append writes its framed record into the current segment on the
//! caller's own thread, under the log's lock, and a small pool of sync threads fsyncs and
//! then acknowledges every record written so far.
//!
//! Why no writer thread: a queue in front of a thread that only copies bytes into the page
//! cache cost two wake-ups per profile (the appender waking the writer, the writer waking a
//! sync thread), while the write itself is a `pwrite` of one record that the appender can
//! do in microseconds. Now an append wakes a sync thread only when one is idle: while an
//! fsync runs, records written meanwhile wait in the queue and the next fsync covers them
//! all (group commit without a hand-off per record).
//!
//! Guarantees: an acknowledgement always follows an fsync that started after the record's
//! write returned (a record joins the queue only once written, and a sync thread takes the
//! queue before it starts its fsync). Rotation and close report a segment closed only
//! once every record written to it has been acknowledged.
//!
//! A write that fails (a full disk, an I/O error) is rolled back: the segment is truncated
//! to the end of the last good write, so the next records follow intact ones and never sit
//! behind a torn record. Should the truncation fail too, or an fsync fail (after which the
//! kernel may have dropped the unwritten pages, so what the file holds is unknown), the
//! segment is sealed and the next write starts a new one; replay skips a torn tail. (The
//! records of a batch whose fsync failed, or that a failed truncation left behind, may
//! still be replayed after a restart although they were refused: a client's retry can then
//! store them twice. Nothing acknowledged is lost either way.)

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::format::{HEADER, MAX_RECORD, SEGMENT_MAGIC, frame};
use super::{Ack, WalStats, segment_name};
use crate::StoreError;

/// Sync threads of the log: fsyncs that may run at the same time.
pub const SYNCERS: usize = 2;

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

/// One segment file, shared by the records written to it until their fsync.
#[derive(Debug)]
struct Segment {
    file: File,
    path: PathBuf,
    number: u64,
}

/// A record written to its segment and waiting for an fsync before its ack runs.
struct Written {
    segment: Arc<Segment>,
    ack: Ack,
}

/// The segment being written.
struct Current {
    segment: Arc<Segment>,
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
            segment: Arc::new(Segment {
                file,
                path: dir.join(segment_name(number)),
                number,
            }),
            offset: SEGMENT_MAGIC.len() as u64,
            sealed: false,
        }
    }

    /// Moves on to segment `number + 1` (left as it is when that cannot be created).
    fn next(&mut self, dir: &Path) -> Result<(), StoreError> {
        let number = self.segment.number + 1;
        let file = create_segment(dir, number)?;
        *self = Current::open(dir, number, file);
        Ok(())
    }

    /// Writes `buf` at the end of the good records; on failure truncates the partial write
    /// away (or seals the segment when that fails too).
    fn write(&mut self, dir: &Path, buf: &[u8]) -> Result<(), StoreError> {
        if self.sealed {
            self.next(dir)?;
        }
        let segment = &self.segment;
        match segment.file.write_all_at(buf, self.offset) {
            Ok(()) => {
                self.offset += buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                let err = StoreError::io(&segment.path, e);
                if let Err(t) = segment.file.set_len(self.offset) {
                    tracing::error!(segment = segment.number, error = %t, "could not truncate a failed write-ahead log write; sealing the segment");
                    self.sealed = true;
                }
                Err(err)
            }
        }
    }
}

/// What the appenders, the sync threads, rotation and close share, under [`Log::state`].
struct State {
    current: Current,
    /// Written records waiting for an fsync, in write order.
    unsynced: Vec<Written>,
    /// Written records whose ack has not run yet, by segment: rotation and close wait for
    /// the segments they close to empty.
    unacked: BTreeMap<u64, usize>,
    /// Sync threads waiting for records (an append wakes one only then).
    idle_syncers: usize,
    /// Rotations or a close waiting for acks (the sync threads signal only then).
    ack_waiters: usize,
    /// Appends are refused.
    closed: bool,
    /// The sync threads end once the queue is empty.
    stopping: bool,
    stats: WalStats,
}

/// The log's shared half: the handle ([`super::Wal`]) and every sync thread hold it.
pub(super) struct Log {
    dir: PathBuf,
    segment_bytes: u64,
    state: Mutex<State>,
    /// Sync threads wait here for written records.
    work: Condvar,
    /// Rotation and close wait here for acknowledgements.
    acked: Condvar,
    /// The last write failed for lack of space (cleared by the next write that succeeds).
    pub(super) full: AtomicBool,
    /// An fsync failed: the next write starts a new segment.
    seal: AtomicBool,
}

impl Log {
    /// The log writing segment `number` (already created as `file`) of `dir`, closing
    /// segments at `segment_bytes`.
    pub(super) fn new(dir: &Path, number: u64, file: File, segment_bytes: u64) -> Log {
        Log {
            dir: dir.to_path_buf(),
            segment_bytes: segment_bytes.max(1),
            state: Mutex::new(State {
                current: Current::open(dir, number, file),
                unsynced: Vec::new(),
                unacked: BTreeMap::new(),
                idle_syncers: 0,
                ack_waiters: 0,
                closed: false,
                stopping: false,
                stats: WalStats::default(),
            }),
            work: Condvar::new(),
            acked: Condvar::new(),
            full: AtomicBool::new(false),
            seal: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a failed write or fsync: a full disk sets `full`.
    fn failed(&self, e: &StoreError) {
        if matches!(e, StoreError::NoSpace { .. }) {
            self.full.store(true, Ordering::SeqCst);
        }
    }

    /// Writes `record` (its first [`HEADER`] bytes reserved for the frame's header) to the
    /// current segment on the calling thread and queues `ack` for the next fsync. A failed
    /// write is answered at once.
    pub(super) fn append(&self, mut record: Vec<u8>, ack: Ack) {
        debug_assert!(record.len() >= HEADER);
        if record.len() - HEADER > MAX_RECORD as usize {
            let path = self.lock().current.segment.path.clone();
            ack(Err(StoreError::Io {
                path: path.display().to_string(),
                message: format!(
                    "a record of {} bytes is over the log's limit of {MAX_RECORD} bytes",
                    record.len() - HEADER
                ),
            }));
            return;
        }
        // The checksums are computed before the lock is taken.
        frame(&mut record);
        let mut st = self.lock();
        if st.closed {
            drop(st);
            ack(Err(StoreError::Closed));
            return;
        }
        if self.seal.swap(false, Ordering::SeqCst) {
            st.current.sealed = true;
        }
        let started = Instant::now();
        if let Err(e) = st.current.write(&self.dir, &record) {
            drop(st);
            self.failed(&e);
            ack(Err(e));
            return;
        }
        self.full.store(false, Ordering::Relaxed);
        let segment = st.current.segment.clone();
        st.stats.records += 1;
        st.stats.bytes += record.len() as u64;
        st.stats.sync_micros += started.elapsed().as_micros() as u64;
        *st.unacked.entry(segment.number).or_default() += 1;
        st.unsynced.push(Written { segment, ack });
        // A full segment: the next write starts a new one (if that cannot be created yet,
        // this one keeps growing and the next append tries again).
        if st.current.offset >= self.segment_bytes {
            let _ = st.current.next(&self.dir);
        }
        let wake = st.idle_syncers > 0;
        drop(st);
        if wake {
            self.work.notify_one();
        }
    }

    /// Closes the current segment and starts the next; returns the closed segment's number
    /// once every record written to it (or to an earlier one) has been acknowledged.
    /// `on_cut` runs with that number under the log's lock, right after the next segment is
    /// created: no record is in the next segment yet.
    pub(super) fn rotate(&self, on_cut: impl FnOnce(u64)) -> Result<u64, StoreError> {
        let mut st = self.lock();
        if st.closed {
            return Err(StoreError::Closed);
        }
        let closed = st.current.segment.number;
        st.current.next(&self.dir)?;
        on_cut(closed);
        st = self.wait_acked(st, closed);
        drop(st);
        Ok(closed)
    }

    /// Waits until no record of a segment up to `through` is waiting for its ack.
    fn wait_acked<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        through: u64,
    ) -> MutexGuard<'a, State> {
        st.ack_waiters += 1;
        while st.unacked.range(..=through).next().is_some() {
            st = self.acked.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.ack_waiters -= 1;
        st
    }

    /// Refuses further appends, waits until every written record is acknowledged, and
    /// tells the sync threads to end.
    pub(super) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        st = self.wait_acked(st, u64::MAX);
        st.stopping = true;
        drop(st);
        self.work.notify_all();
    }

    /// Counters so far.
    pub(super) fn stats(&self) -> WalStats {
        self.lock().stats
    }
}

/// A sync thread: takes every written record queued, fsyncs their segments, acknowledges.
pub(super) fn syncer(log: Arc<Log>) {
    let mut batch: Vec<Written> = Vec::new();
    let mut st = log.lock();
    loop {
        if st.unsynced.is_empty() {
            if st.stopping {
                return;
            }
            st.idle_syncers += 1;
            st = log.work.wait(st).unwrap_or_else(|e| e.into_inner());
            st.idle_syncers -= 1;
            continue;
        }
        // Take the queue, leaving this thread's empty buffer in its place.
        std::mem::swap(&mut st.unsynced, &mut batch);
        drop(st);
        let started = Instant::now();
        // Every record was written before this fsync starts, so one fsync per segment
        // covers them all (usually one segment).
        let mut synced: Vec<(Arc<Segment>, Result<(), StoreError>)> = Vec::with_capacity(1);
        for w in &batch {
            if synced.iter().any(|(s, _)| Arc::ptr_eq(s, &w.segment)) {
                continue;
            }
            let s = &w.segment;
            let r = s.file.sync_data().map_err(|e| StoreError::io(&s.path, e));
            if let Err(e) = &r {
                log.failed(e);
                log.seal.store(true, Ordering::SeqCst);
                tracing::error!(error = %e, "fsync of the write-ahead log failed; its records are refused and the segment is sealed");
            }
            synced.push((s.clone(), r));
        }
        let micros = started.elapsed().as_micros() as u64;
        let mut acked: Vec<(u64, usize)> = Vec::with_capacity(synced.len());
        for w in batch.drain(..) {
            let number = w.segment.number;
            let result = synced
                .iter()
                .find(|(s, _)| Arc::ptr_eq(s, &w.segment))
                .map_or(Err(StoreError::Closed), |(_, r)| r.clone());
            (w.ack)(result.map(|()| number));
            match acked.iter_mut().find(|(n, _)| *n == number) {
                Some((_, c)) => *c += 1,
                None => acked.push((number, 1)),
            }
        }
        st = log.lock();
        st.stats.fsyncs += synced.len() as u64;
        st.stats.sync_micros += micros;
        for (number, n) in acked {
            if let Some(c) = st.unacked.get_mut(&number) {
                *c = c.saturating_sub(n);
                if *c == 0 {
                    st.unacked.remove(&number);
                }
            }
        }
        if st.ack_waiters > 0 {
            log.acked.notify_all();
        }
    }
}
