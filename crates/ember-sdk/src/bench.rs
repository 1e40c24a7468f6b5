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

/// Sends `n` `SIGPROF`s to the calling thread with the handler active or not (no timer),
/// draining the ring as it fills; returns the time taken (kernel delivery plus the handler).
pub fn raise_signals(n: u32, active: bool) -> std::time::Duration {
    signal::install().expect("installing the handler");
    signal::set_active(active);
    let t = std::time::Instant::now();
    for i in 0..n {
        signal::raise_here();
        if i % 512 == 511 {
            signal::drain(|_| {});
        }
    }
    let took = t.elapsed();
    signal::set_active(false);
    signal::drain(|_| {});
    took
}

/// Symbolizes `offsets` of the ELF file at `path` into the SDK's compact cache, the way
/// profiles do (tables and DWARF built per chunk of addresses and dropped); returns how many
/// offsets the cache now answers with a name.
pub fn symbolize_file(path: &std::path::Path, offsets: &[u64]) -> usize {
    crate::symbols::fill_for_bench(&path.display().to_string(), offsets)
}

/// Builds and gzips a CPU-style profile over `addrs` of this process (each its own sample):
/// symbolization and encoding as a push cut does them; returns the encoded size.
pub fn build_and_encode(addrs: &[u64]) -> usize {
    let mut b = ember_pprof::ProfileBuilder::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
    let resolved = crate::symbols::resolve(&mut b, addrs);
    for a in addrs {
        if let Some(r) = resolved.get(a) {
            b.add_sample(&[r.location], &[1, 10_101_010], &[]);
        }
    }
    ember_pprof::encode_gzip(&b.build()).len()
}
