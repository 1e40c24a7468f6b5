//! Write-ahead log with group commit.
//!
//! Owns the on-disk log under `<data-dir>/wal/`: numbered segment files of framed records
//! (the format, and reading it back past damage, is [`format`]'s). An append writes its
//! record on the caller's thread; a small pool of sync threads fsyncs and then acknowledges
//! every record written so far: concurrent ingests share one `fsync` instead of paying one
//! each (`writer` says why there is no writer thread).
//!
//! Up to [`SYNCERS`] fsyncs run at once: a record written while an fsync runs is taken by
//! an idle sync thread at once (the disk overlaps concurrent flushes), and records written
//! while every sync thread is busy share the next fsync. An acknowledgement always follows
//! an fsync that started after the record's write returned.
//!
//! A write that fails (a full disk above all) is refused and rolled back, so the records
//! after it follow intact ones; while the disk is full [`Wal::has_space`] says so. Segments
//! are closed at [`WalOptions::segment_bytes`] as well as by a flush, so replay can flush
//! into blocks at segment boundaries with bounded memory.
//!
//! Replay reads segments in order and skips what is torn or corrupt, going on with the next
//! intact record; every skipped run is logged (segment and offset) and counted.

pub(crate) mod format;
mod writer;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use crate::StoreError;
use writer::Log;
pub use writer::SYNCERS;

/// Callback run on a log thread once a record is durable (or failed to be); `Ok` carries the
/// number of the segment the record is in, which tells the store whether a flush that cut the
/// log at some segment already holds the record.
pub type Ack = Box<dyn FnOnce(Result<u64, StoreError>) + Send>;

/// Counters the writer updates, for metrics.
#[derive(Debug, Default, Clone, Copy)]
pub struct WalStats {
    /// Records written.
    pub records: u64,
    /// Bytes written (payload and framing).
    pub bytes: u64,
    /// `fsync` calls made.
    pub fsyncs: u64,
    /// Total time spent in writes and fsyncs, in microseconds.
    pub sync_micros: u64,
}

/// Settings of the log.
#[derive(Debug, Clone, Copy)]
pub struct WalOptions {
    /// A segment is closed, and the next one started, once it holds this many bytes.
    pub segment_bytes: u64,
}

impl Default for WalOptions {
    /// Segments of 64 MiB.
    fn default() -> Self {
        WalOptions {
            segment_bytes: 64 << 20,
        }
    }
}

/// The write-ahead log: its current segment and its sync threads.
pub struct Wal {
    dir: PathBuf,
    log: Arc<Log>,
    syncers: Mutex<Vec<JoinHandle<()>>>,
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
    /// Segments that held a torn or corrupt record.
    pub torn_segments: usize,
    /// Torn or corrupt records skipped (as far as their headers tell; a damaged run counts
    /// at least one).
    pub skipped_records: usize,
    /// Bytes skipped with them.
    pub skipped_bytes: u64,
}

/// One step of a replay, in log order.
#[derive(Debug)]
pub enum Replayed<'a> {
    /// An intact record of segment `segment`.
    Record {
        /// Its segment.
        segment: u64,
        /// Its payload.
        payload: &'a [u8],
    },
    /// Every record of `segment` was handed over.
    SegmentDone {
        /// The segment.
        segment: u64,
        /// Whether intact records followed damage in it (the segment held more than a torn
        /// tail: bytes flipped on disk, or a failed write that could not be rolled back).
        damaged: bool,
        /// Size of the next segment to replay, in bytes (0 after the last).
        next_bytes: u64,
    },
}

impl Wal {
    /// Opens the log in `dir` (created if missing), calls `apply` with the segment number and
    /// payload of every intact record of the existing segments in order, then starts a fresh
    /// segment and the sync threads. Segments numbered at most `skip_through` are deleted
    /// unread (a block holds them).
    pub fn open(
        dir: &Path,
        skip_through: u64,
        mut apply: impl FnMut(u64, &[u8]),
    ) -> Result<(Wal, ReplayStats), StoreError> {
        Wal::open_with(dir, skip_through, WalOptions::default(), |step| {
            if let Replayed::Record { segment, payload } = step {
                apply(segment, payload);
            }
        })
    }

    /// [`Wal::open`] with options, telling `replay` also where each segment ends (the store
    /// flushes there).
    pub fn open_with(
        dir: &Path,
        skip_through: u64,
        options: WalOptions,
        mut replay: impl FnMut(Replayed<'_>),
    ) -> Result<(Wal, ReplayStats), StoreError> {
        fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        let existing = segments(dir)?;
        let mut stats = ReplayStats::default();
        for (i, (n, path)) in existing.iter().enumerate() {
            // Already folded into a block (a crash between writing the block and deleting
            // its segments leaves them behind).
            if *n <= skip_through {
                let _ = fs::remove_file(path);
                continue;
            }
            stats.segments += 1;
            let bytes = fs::read(path).map_err(|e| StoreError::io(path, e))?;
            let damage = format::scan(&bytes, |_, payload| {
                stats.records += 1;
                replay(Replayed::Record {
                    segment: *n,
                    payload,
                });
            });
            // Only the file's bytes are held, one segment at a time.
            drop(bytes);
            for d in &damage {
                tracing::warn!(
                    segment = %path.display(),
                    offset = d.offset,
                    bytes = d.len,
                    records = d.records,
                    torn_tail = d.tail,
                    "write-ahead log: skipped a torn or corrupt record; replay goes on with the next intact one"
                );
                stats.skipped_records += d.records;
                stats.skipped_bytes += d.len as u64;
            }
            stats.torn_segments += usize::from(!damage.is_empty());
            let next_bytes = existing
                .get(i + 1)
                .and_then(|(_, p)| fs::metadata(p).ok())
                .map_or(0, |m| m.len());
            replay(Replayed::SegmentDone {
                segment: *n,
                damaged: damage.iter().any(|d| !d.tail),
                next_bytes,
            });
        }
        let next = existing
            .last()
            .map(|(n, _)| n + 1)
            .unwrap_or(1)
            .max(skip_through + 1);
        let file = writer::create_segment(dir, next)?;
        let wal = Wal {
            dir: dir.to_path_buf(),
            log: Arc::new(Log::new(dir, next, file, options.segment_bytes)),
            syncers: Mutex::new(Vec::with_capacity(SYNCERS)),
        };
        for _ in 0..SYNCERS {
            let log = wal.log.clone();
            let thread = std::thread::Builder::new()
                .name("ember-wal-sync".into())
                .spawn(move || writer::syncer(log))
                // Dropping `wal` stops the threads already started.
                .map_err(|e| StoreError::io(dir, e))?;
            wal.syncers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(thread);
        }
        Ok((wal, stats))
    }

    /// Writes a record to the log on the calling thread; `ack` runs on a log thread once
    /// the record is fsync'd (or at once with the error, if the write fails or the log is
    /// closed). The write is a copy into the page cache, microseconds for a usual record.
    pub fn append(&self, payload: Vec<u8>, ack: Ack) {
        let mut record = Vec::with_capacity(format::HEADER + payload.len());
        record.resize(format::HEADER, 0);
        record.extend_from_slice(&payload);
        self.log.append(record, ack);
    }

    /// [`Wal::append`] of a record built by the caller in a buffer that starts with
    /// [`format::HEADER`] reserved bytes (see [`record_buffer`]): framed in place, without
    /// copying the payload.
    pub(crate) fn append_record(&self, record: Vec<u8>, ack: Ack) {
        self.log.append(record, ack);
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
        self.log.rotate(|_| {})
    }

    /// [`Wal::rotate`], calling `on_cut` with the closed segment's number as soon as the
    /// next segment exists, before any record can be written to it: a caller that must
    /// route records by segment learns of the cut before the first record after it.
    pub fn rotate_with(&self, on_cut: impl FnOnce(u64)) -> Result<u64, StoreError> {
        self.log.rotate(on_cut)
    }

    /// Counters so far.
    pub fn stats(&self) -> WalStats {
        self.log.stats()
    }

    /// `false` while the disk is full: the last write failed for lack of space and a probe
    /// (writing and removing 256 KiB beside the segments) still fails. `true` otherwise,
    /// without touching the disk when no write has failed.
    pub fn has_space(&self) -> bool {
        if !self.log.full.load(Ordering::SeqCst) {
            return true;
        }
        let probe = self.dir.join("space-probe");
        let ok = fs::write(&probe, vec![0u8; 256 << 10]).is_ok();
        let _ = fs::remove_file(&probe);
        if ok {
            self.log.full.store(false, Ordering::SeqCst);
        }
        ok
    }

    /// Waits until every record written so far is fsync'd and acknowledged, then stops the
    /// sync threads. Later appends fail with [`StoreError::Closed`].
    pub fn close(&self) {
        let threads = std::mem::take(&mut *self.syncers.lock().unwrap_or_else(|e| e.into_inner()));
        self.log.close();
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.close();
    }
}

/// A buffer for a record of up to `payload` bytes for [`Wal::append_record`]: the header's
/// bytes reserved, the payload to be appended after them.
pub(crate) fn record_buffer(payload: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(format::HEADER + payload);
    buf.resize(format::HEADER, 0);
    buf
}

/// Deletes the segments numbered at most `through` (a block now holds them); returns the
/// bytes they held. Segments in `keep` (whose replay skipped damage with intact records
/// after it, or could not apply a record) are renamed `<n>.wal.corrupt` instead, for
/// inspection: a flush never destroys bytes the store could not read. A segment that
/// cannot be deleted is left for the next start, which skips it as covered by a block.
pub fn delete_segments(dir: &Path, through: u64, keep: &std::collections::BTreeSet<u64>) -> u64 {
    let mut freed = 0;
    for (n, path) in segments(dir).unwrap_or_default() {
        if n > through {
            continue;
        }
        if keep.contains(&n) {
            let to = path.with_extension("wal.corrupt");
            match fs::rename(&path, &to) {
                Ok(()) => tracing::warn!(
                    segment = %path.display(),
                    kept_as = %to.display(),
                    "a write-ahead log segment with unreadable records is kept for inspection"
                ),
                Err(e) => {
                    tracing::error!(segment = %path.display(), error = %e, "could not set aside a damaged segment")
                }
            }
            continue;
        }
        let len = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if fs::remove_file(&path).is_ok() {
            freed += len;
        }
    }
    freed
}
