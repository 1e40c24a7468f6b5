//! Measurements for BENCHMARKS.md (ignored by default; run them with frame pointers):
//!
//! ```text
//! RUSTFLAGS="-C force-frame-pointers=yes" cargo test -p ember-sdk --release \
//!     --test bench --test bench_heap_wrapped -- --ignored --nocapture --test-threads 1
//! ```
//!
//! (The figures in BENCHMARKS.md come from the dev profile with
//! `--config 'profile.dev.package.ember-sdk.opt-level=3'`: dependencies are optimised there
//! already, and a release build of the dev-dependencies did not fit the session.)

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::time::{Duration, Instant};

use object::{Object, ObjectSymbol};

fn rss_kib() -> u64 {
    status_kib("VmRSS:")
}

fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Recurses `depth` frames, then runs `f` at the bottom.
#[inline(never)]
fn at_depth(depth: usize, f: &mut dyn FnMut()) {
    if depth == 0 {
        f();
    } else {
        at_depth(std::hint::black_box(depth - 1), f);
    }
    std::hint::black_box(depth);
}

#[test]
#[ignore]
fn capture_cost_of_a_40_frame_stack() {
    let mut buf = ember_sdk::bench::CaptureBuffer::new();
    let labels = ember_sdk::Labels::new([("span_id", "0123456789abcdef"), ("tenant", "a")]);
    let _scope = labels.enter();
    let mut result = (0, Duration::ZERO);
    // ~38 frames of recursion plus the test harness and thread start below it.
    at_depth(36, &mut || {
        let depth = ember_sdk::bench::capture_once(&mut buf);
        let n = 1_000_000;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(ember_sdk::bench::capture_once(&mut buf));
        }
        result = (depth, t.elapsed() / n);
    });
    eprintln!(
        "capture: {} frames in {:?} per capture (frame pointers: {})",
        result.0,
        result.1,
        ember_sdk::FRAME_POINTERS
    );
    let n = 200_000;
    let idle = ember_sdk::bench::raise_signals(n, false);
    eprintln!(
        "raise(SIGPROF), handler inactive: {:?} per signal",
        idle / n
    );
    let took = ember_sdk::bench::raise_signals(n, true);
    eprintln!("raise(SIGPROF) + handler: {:?} per signal", took / n);
    let per_signal = took / n;
    for hz in [19u32, 99] {
        // One signal per 1/hz s of CPU: the share of CPU the profiler takes.
        let share = per_signal.as_secs_f64() * f64::from(hz) * 100.0;
        eprintln!("CPU overhead at {hz} Hz: {share:.4} % of each busy core");
    }
}

#[test]
#[ignore]
fn allocation_heavy_workload_system() {
    let ns = common::allocation_heavy_round_ns(2_000, 9);
    eprintln!("allocation-heavy round, system allocator: {ns:.0} ns");
}

#[test]
#[ignore]
fn heap_sampling_overhead() {
    let sampled = ember_sdk::SamplingAllocator::new(System);
    let sizes: Vec<usize> = (0..4096).map(|i| 16 + (i * 7919) % 4000).collect();
    // Thread CPU time, not wall time: the shared machine preempts us at random.
    let run = |a: &dyn GlobalAlloc| {
        let t0 = common::thread_cpu();
        let mut live: Vec<(*mut u8, Layout)> = Vec::with_capacity(64);
        for round in 0..2_000 {
            for (i, &s) in sizes.iter().enumerate() {
                let layout = Layout::from_size_align(s, 8).unwrap();
                // SAFETY: a non-zero size; every block is freed with its own layout.
                let p = unsafe { a.alloc(layout) };
                live.push((p, layout));
                if live.len() == 64 || (i + round) % 3 == 0 {
                    for (p, l) in live.drain(..) {
                        // SAFETY: allocated above by `a` with `l`.
                        unsafe { a.dealloc(p, l) };
                    }
                }
            }
        }
        for (p, l) in live.drain(..) {
            // SAFETY: as above.
            unsafe { a.dealloc(p, l) };
        }
        common::thread_cpu() - t0
    };
    // Interleave to share the machine's noise; best of nine each.
    let (mut plain, mut wrapped) = (Duration::MAX, Duration::MAX);
    for _ in 0..9 {
        plain = plain.min(run(&System));
        wrapped = wrapped.min(run(&sampled));
    }
    let ops = 2_000.0 * 4096.0;
    eprintln!(
        "8.2 M alloc+free: system {:.1} ns/op, sampled (2 MiB) {:.1} ns/op: overhead {:.1} %",
        plain.as_nanos() as f64 / ops,
        wrapped.as_nanos() as f64 / ops,
        (wrapped.as_secs_f64() / plain.as_secs_f64() - 1.0) * 100.0
    );
}

/// Every text symbol's address plus a few bytes, as offsets of `path` (for a PIE the
/// addresses of the first segment equal file offsets closely enough for a batch's work).
fn symbol_offsets(path: &str, limit: usize) -> Vec<u64> {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let mut v: Vec<u64> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
        .map(|s| s.address() + 4)
        .collect();
    v.sort_unstable();
    v.dedup();
    let step = (v.len() / limit).max(1);
    v.into_iter().step_by(step).take(limit).collect()
}

#[test]
#[ignore]
fn symbolization_memory_and_time() {
    let path = std::env::var("EMBER_SDK_BENCH_BINARY")
        .unwrap_or_else(|_| std::env::current_exe().unwrap().display().to_string());
    let size = std::fs::metadata(&path).unwrap().len();
    let offsets = symbol_offsets(&path, 20_000);
    // Reset the peak (VmHWM) so it measures symbolization alone.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = rss_kib();
    let t = Instant::now();
    let named = ember_sdk::bench::symbolize_file(std::path::Path::new(&path), &offsets);
    let took = t.elapsed();
    let after = rss_kib();
    eprintln!(
        "  RssAnon {} KiB, RssFile {} KiB, VmHWM {} KiB",
        status_kib("RssAnon:"),
        status_kib("RssFile:"),
        status_kib("VmHWM:")
    );
    // SAFETY: malloc_trim only hands free heap pages back to the kernel.
    unsafe { libc::malloc_trim(0) };
    eprintln!(
        "  after malloc_trim: RssAnon {} KiB, RssFile {} KiB",
        status_kib("RssAnon:"),
        status_kib("RssFile:")
    );
    eprintln!(
        "{path} ({:.0} MiB): {named} of {} addresses named in {took:?}; RSS {} -> {} KiB (+{:.1} MiB)",
        size as f64 / (1 << 20) as f64,
        offsets.len(),
        before,
        after,
        (after as f64 - before as f64) / 1024.0
    );
    // A cut of this process: addresses of its own functions, symbolized and encoded.
    let own: Vec<u64> = {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let (start, _) = maps
            .lines()
            .find(|l| {
                l.contains(exe.to_str().unwrap()) && l.split(' ').nth(1).unwrap().contains('x')
            })
            .map(|l| {
                let r = l.split(' ').next().unwrap();
                let (s, e) = r.split_once('-').unwrap();
                (
                    u64::from_str_radix(s, 16).unwrap(),
                    u64::from_str_radix(e, 16).unwrap(),
                )
            })
            .unwrap();
        let first_x_offset = {
            let l = maps
                .lines()
                .find(|l| {
                    l.contains(exe.to_str().unwrap()) && l.split(' ').nth(1).unwrap().contains('x')
                })
                .unwrap();
            u64::from_str_radix(l.split(' ').nth(2).unwrap(), 16).unwrap()
        };
        symbol_offsets(exe.to_str().unwrap(), 5_000)
            .into_iter()
            .filter(|&o| o >= first_x_offset)
            .map(|o| o - first_x_offset + start)
            .collect()
    };
    let before = rss_kib();
    let t = Instant::now();
    let bytes = ember_sdk::bench::build_and_encode(&own);
    eprintln!(
        "one cut of {} distinct addresses: symbolized + encoded in {:?} ({bytes} bytes gzip'd), RSS +{:.1} MiB",
        own.len(),
        t.elapsed(),
        (rss_kib() as f64 - before as f64) / 1024.0
    );
    common::burn_hot(1);
}
