//! The driver: streams input in large chunks cut at sample boundaries and folds them on worker
//! threads into one shared (sharded) stack map, then merges the per-chunk warnings.
//!
//! Why this is equivalent to one sequential pass: a blank line resets every piece of
//! [`Folder`] state except the event-type filter. So the first chunk(s) are folded on the
//! calling thread until the filter is known (normally after the very first sample), and from
//! then on every chunk starts in the same state a sequential pass would be in. Memory stays
//! bounded by roughly `(2 × threads + 2) × chunk size` plus the map of distinct stacks, where
//! the chunk size grows [`CHUNK_GROWTH`]-fold once [`GROW_AFTER_BYTES`] have been read; only a
//! single stretch of input without any blank line larger than the chunk size forces a bigger
//! buffer.

use std::io::{self, Read};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::fold::{Folder, LocalWarning};
use crate::table::{SharedMap, Sink, StackMap};
use crate::{CollapseError, CollapseOptions, Warning};

/// What the folding produced before sorting.
pub(crate) struct Outcome {
    /// Disjoint maps (a stack appears in at most one).
    pub(crate) maps: Vec<StackMap>,
    pub(crate) warnings: Vec<Warning>,
    pub(crate) event: Option<String>,
}

/// Per-unit bookkeeping used to turn unit-relative line numbers into absolute ones.
struct UnitMeta {
    seq: u64,
    lines: u64,
    warnings: Vec<LocalWarning>,
}

/// Folds one whole unit of input (it ends on a sample boundary) and returns what the merge
/// step needs to know of it; used by the workers and by the reader when the queue is full.
fn fold_unit(folder: &mut Folder, seq: u64, unit: &[u8], map: &mut impl Sink) -> UnitMeta {
    folder.fold(unit, map, false);
    folder.finish(map);
    UnitMeta {
        seq,
        lines: std::mem::take(&mut folder.lines),
        warnings: std::mem::take(&mut folder.warnings),
    }
}

/// Input read with the configured chunk size before chunks grow: small inputs keep small
/// buffers (peak memory), large ones get fewer hand-offs between threads.
const GROW_AFTER_BYTES: u64 = 32 << 20;

/// How much larger chunks get after [`GROW_AFTER_BYTES`]. With 64 KiB chunks, 2 threads and
/// the 243 MB benchmark input, 512 KiB chunks cut context switches ~5x and CPU time ~12 %.
const CHUNK_GROWTH: usize = 8;

/// Cuts the input into units that end right after a blank line (or at end of input).
struct Chunker<R> {
    reader: R,
    carry: Vec<u8>,
    chunk: usize,
    /// Bytes read so far.
    read: u64,
    /// Chunks grow once this many bytes were read ([`GROW_AFTER_BYTES`] outside tests).
    grow_after: u64,
    eof: bool,
}

impl<R: Read> Chunker<R> {
    /// Fills `buf` (a recycled buffer) with the next unit; returns it with the unit's length.
    ///
    /// Buffers are kept fully initialised and reused, and data is read straight into them:
    /// `read_to_end` through our wrapping readers would zero the spare capacity on every call.
    fn next_unit(&mut self, mut buf: Vec<u8>) -> io::Result<Option<(Vec<u8>, usize)>> {
        let mut filled = self.carry.len();
        let chunk = if self.read >= self.grow_after {
            self.chunk.saturating_mul(CHUNK_GROWTH)
        } else {
            self.chunk
        };
        let mut target = chunk.max(filled + chunk / 2);
        if buf.len() < target {
            buf.resize(target, 0);
        }
        buf[..filled].copy_from_slice(&self.carry);
        self.carry.clear();
        loop {
            while !self.eof && filled < target {
                match self.reader.read(&mut buf[filled..target]) {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        filled += n.min(target - filled);
                        self.read += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if self.eof {
                return Ok((filled > 0).then_some((buf, filled)));
            }
            if let Some(cut) = last_boundary(&buf[..filled]) {
                self.carry.extend_from_slice(&buf[cut..filled]);
                return Ok(Some((buf, cut)));
            }
            // One sample group longer than the chunk: keep reading until it ends.
            target = target.saturating_mul(2);
            if buf.len() < target {
                buf.resize(target, 0);
            }
        }
    }
}

/// Offset just past the last blank line in `buf`, if any.
fn last_boundary(buf: &[u8]) -> Option<usize> {
    // `end` is the index of the `\n` terminating the line under inspection.
    let mut end = memchr::memrchr(b'\n', buf)?;
    loop {
        let start = memchr::memrchr(b'\n', &buf[..end]).map_or(0, |i| i + 1);
        if is_blank(&buf[start..end]) {
            return Some(end + 1);
        }
        if start == 0 {
            return None;
        }
        end = start - 1;
    }
}

/// Whether a line (without `\n`) is empty once trailing whitespace is trimmed, using the same
/// rule as the folder (Unicode whitespace after lossy UTF-8 decoding).
fn is_blank(line: &[u8]) -> bool {
    for &b in line {
        if !b.is_ascii() {
            return String::from_utf8_lossy(line).trim_end().is_empty();
        }
        if !matches!(b, b' ' | b'\t' | b'\r' | 0x0b | 0x0c) {
            return false;
        }
    }
    true
}

/// Most worker threads we start; more cannot help a line-parsing workload and would only
/// risk exhausting the system's thread limit.
pub(crate) const MAX_THREADS: usize = 256;

fn resolve_threads(requested: usize) -> usize {
    let n = if requested == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        requested
    };
    n.min(MAX_THREADS)
}

/// Folds everything `reader` yields.
pub(crate) fn run<R: Read>(reader: R, options: &CollapseOptions) -> Result<Outcome, CollapseError> {
    let threads = resolve_threads(options.threads);
    let mut chunker = Chunker {
        reader,
        carry: Vec::new(),
        chunk: options.chunk_bytes.max(1),
        read: 0,
        grow_after: GROW_AFTER_BYTES,
        eof: false,
    };
    let mut main = Folder::new(options, options.event_filter.clone());
    let mut map = StackMap::default();
    let mut metas = Vec::new();
    let mut seq = 0u64;
    let mut record = |folder: &mut Folder<'_>, metas: &mut Vec<UnitMeta>| {
        metas.push(UnitMeta {
            seq,
            lines: std::mem::take(&mut folder.lines),
            warnings: std::mem::take(&mut folder.warnings),
        });
        seq += 1;
    };

    // Sequential phase: everything when single-threaded, otherwise until the filter is known.
    let mut leftover: Option<(Vec<u8>, usize, usize)> = None;
    let mut spare = Vec::new();
    while let Some((buf, end)) = chunker.next_unit(std::mem::take(&mut spare))? {
        if threads > 1 && main.event_filter.is_some() {
            leftover = Some((buf, 0, end));
            break;
        }
        let consumed = main.fold(&buf[..end], &mut map, threads > 1);
        main.finish(&mut map);
        record(&mut main, &mut metas);
        if consumed < end {
            leftover = Some((buf, consumed, end));
            break;
        }
        spare = buf;
    }

    if let Some(first) = leftover {
        let event_filter = main.event_filter.clone();
        let shared = SharedMap::new();
        let (work_tx, work_rx) = mpsc::sync_channel::<(u64, Vec<u8>, usize, usize)>(threads);
        // Each worker owns a handle: if every worker were gone, the queue closes and the
        // producer's `send` fails instead of blocking forever.
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
        // The calling thread reads the input and also folds whenever the queue is full, so it
        // counts as one of the `threads`: a reader that only waited on a full queue would add
        // a thread (and its context switches) without adding folding capacity.
        let worker_results = std::thread::scope(|scope| {
            let spawned: io::Result<Vec<_>> = (1..threads)
                .map(|_| {
                    let work_rx = Arc::clone(&work_rx);
                    let free_tx = free_tx.clone();
                    let event_filter = event_filter.clone();
                    let shared = &shared;
                    std::thread::Builder::new().spawn_scoped(scope, move || {
                        let mut folder = Folder::new(options, event_filter);
                        let mut map = shared;
                        let mut metas = Vec::new();
                        loop {
                            let item = {
                                let guard = work_rx.lock().unwrap_or_else(|e| e.into_inner());
                                guard.recv()
                            };
                            let Ok((seq, buf, start, end)) = item else {
                                break;
                            };
                            metas.push(fold_unit(&mut folder, seq, &buf[start..end], &mut map));
                            // The producer may be gone already; then the buffer is just freed.
                            let _ = free_tx.send(buf);
                        }
                        metas
                    })
                })
                .collect();
            drop(free_tx);
            drop(work_rx);
            let handles = match spawned {
                Ok(handles) => handles,
                Err(e) => {
                    // Closing the queue lets the workers that did start exit, so the scope ends.
                    drop(work_tx);
                    return Err(CollapseError::Io(e));
                }
            };

            let produce = || -> Result<Vec<UnitMeta>, CollapseError> {
                let mut folder = Folder::new(options, event_filter.clone());
                let mut map = &shared;
                let mut metas = Vec::new();
                let mut next = Some(first);
                let mut next_seq = seq;
                let mut spare = Vec::new();
                while let Some((buf, start, end)) = next.take() {
                    match work_tx.try_send((next_seq, buf, start, end)) {
                        Ok(()) => {}
                        Err(mpsc::TrySendError::Full((seq, buf, start, end))) => {
                            metas.push(fold_unit(&mut folder, seq, &buf[start..end], &mut map));
                            spare = buf;
                        }
                        Err(mpsc::TrySendError::Disconnected(_)) => {
                            return Err(CollapseError::WorkerFailed);
                        }
                    }
                    next_seq += 1;
                    let recycled = match free_rx.try_recv() {
                        Ok(buf) => buf,
                        Err(_) => std::mem::take(&mut spare),
                    };
                    next = chunker.next_unit(recycled)?.map(|(buf, end)| (buf, 0, end));
                }
                Ok(metas)
            };
            let produced = produce();
            drop(work_tx);
            let mut results = Vec::with_capacity(threads);
            let mut failed = false;
            for handle in handles {
                match handle.join() {
                    Ok(result) => results.push(result),
                    Err(_) => failed = true,
                }
            }
            results.push(produced?);
            if failed {
                return Err(CollapseError::WorkerFailed);
            }
            Ok(results)
        })?;
        for worker_metas in worker_results {
            metas.extend(worker_metas);
        }
        shared.absorb(map);
        return Ok(Outcome {
            maps: shared.into_maps().collect(),
            warnings: absolute_warnings(metas),
            event: main.event_filter,
        });
    }

    Ok(Outcome {
        maps: vec![map],
        warnings: absolute_warnings(metas),
        event: main.event_filter,
    })
}

/// One warning per kind: the first occurrence in input order, with the total count.
fn absolute_warnings(mut metas: Vec<UnitMeta>) -> Vec<Warning> {
    metas.sort_by_key(|m| m.seq);
    let mut offset = 0u64;
    let mut out: Vec<Warning> = Vec::new();
    for meta in metas {
        for w in meta.warnings {
            match out.iter_mut().find(|o| o.kind == w.kind) {
                Some(existing) => existing.count += w.count,
                None => out.push(Warning {
                    kind: w.kind,
                    line: offset + w.first_line,
                    text: w.first_text,
                    count: w.count,
                }),
            }
        }
        offset += meta.lines;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_grow_and_stay_on_sample_boundaries() {
        let mut input = Vec::new();
        for i in 0..400 {
            input.extend_from_slice(format!("p {i} 1.0: 1 c:\n\t1 f (m)\n\n").as_bytes());
        }
        let mut chunker = Chunker {
            reader: &input[..],
            carry: Vec::new(),
            chunk: 64,
            read: 0,
            grow_after: 2000,
            eof: false,
        };
        let mut joined = Vec::new();
        let mut sizes = Vec::new();
        while let Some((buf, end)) = chunker.next_unit(Vec::new()).unwrap() {
            let unit = &buf[..end];
            assert!(unit.ends_with(b"\n\n") || joined.len() + end == input.len());
            joined.extend_from_slice(unit);
            sizes.push(end);
        }
        assert_eq!(joined, input);
        // Before the threshold units are about one chunk, after it about eight.
        assert!(sizes[0] <= 96, "{sizes:?}");
        assert!(sizes[sizes.len() - 2] > 8 * 64 / 2, "{sizes:?}");
    }

    #[test]
    fn boundaries_are_found_after_blank_lines() {
        assert_eq!(last_boundary(b"a\n\nb\n"), Some(3));
        assert_eq!(last_boundary(b"a\n \t\nb"), Some(5));
        assert_eq!(last_boundary(b"\nb\n"), Some(1));
        assert_eq!(last_boundary(b"a\nb\n"), None);
        assert_eq!(last_boundary(b"abc"), None);
        assert_eq!(last_boundary(b"a\n\xe3\x80\x80\nb\n"), Some(6));
    }
}
