//! Hooks for the benchmark of one stack capture (not a stable API).

use crate::signal;

/// Captures the calling thread's stack the way the `SIGPROF` handler does (validated
/// frame-pointer walk, thread identity, label copy) into a reused buffer; returns the depth.
pub fn capture_once(buf: &mut CaptureBuffer) -> usize {
    signal::capture_here(buf.bounds, &mut buf.sample)
}

/// Reusable buffer and stack bounds for [`capture_once`].
pub struct CaptureBuffer {
    sample: Box<signal::RawSample>,
    bounds: (usize, usize),
}

impl std::fmt::Debug for CaptureBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureBuffer").finish_non_exhaustive()
    }
}

impl CaptureBuffer {
    /// A buffer for the calling thread.
    pub fn new() -> CaptureBuffer {
        CaptureBuffer {
            sample: signal::empty_sample(),
            bounds: signal::own_stack_bounds().unwrap_or((0, 1)),
        }
    }
}

impl Default for CaptureBuffer {
    fn default() -> Self {
        CaptureBuffer::new()
    }
}

/// Walks a frame chain laid out in `memory` (for tests of bad chains): starts at `fp`,
/// bounds `[lo, hi)` must lie inside `memory`. Returns the return addresses found.
pub fn walk_in(memory: &[usize], fp: usize, lo: usize, hi: usize) -> Vec<u64> {
    let start = memory.as_ptr() as usize;
    let end = start + std::mem::size_of_val(memory);
    assert!(
        lo >= start && hi <= end,
        "bounds must lie inside the given memory"
    );
    let mut out = vec![0u64; 64];
    let n = signal::walk(fp, lo, hi, &mut out);
    out.truncate(n);
    out
}
