//! What one child process measures for one contender. Each contender runs in a process of
//! its own because both install a `SIGPROF` handler, and only one handler can be installed
//! at a time: in one process the second would silently take the first one's signals.
//!
//! A child prints `key=value` lines on stdout for the parent to collect.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::procinfo::{process_cpu, reset_peak, status_kib, thread_cpu};
use crate::workload::{at_depth, burn};

/// Recursion under the capture: with `main`, the runtime's start and the harness below it
/// the stack is 40–45 frames deep (each child prints the depth its profiler saw).
const CAPTURE_RECURSION: usize = 36;

/// Samples in a 60 s profile at 99 Hz of one busy thread.
pub const SAMPLES_60S_99HZ: u64 = 60 * 99;

fn emit(key: &str, value: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{key}={value}").expect("writing to the parent");
}

fn per(d: Duration, n: u32) -> f64 {
    d.as_nanos() as f64 / f64::from(n)
}

/// ember-sdk: one capture as its handler does it, called directly (`bench::capture_once`),
/// and the `raise(SIGPROF)` round trip with the handler inactive and active.
pub fn capture_ember(n_direct: u32, n_signals: u32) {
    let mut buf = ember_sdk::bench::CaptureBuffer::new();
    at_depth(CAPTURE_RECURSION, &mut || {
        let depth = ember_sdk::bench::capture_once(&mut buf);
        let t = Instant::now();
        for _ in 0..n_direct {
            std::hint::black_box(ember_sdk::bench::capture_once(&mut buf));
        }
        emit("direct_ns", per(t.elapsed(), n_direct));
        emit("depth", depth);
        let idle = ember_sdk::bench::raise_signals(n_signals, false);
        let active = ember_sdk::bench::raise_signals(n_signals, true);
        emit("signal_idle_ns", per(idle, n_signals));
        emit("signal_active_ns", per(active, n_signals));
    });
    emit("frame_pointers", ember_sdk::FRAME_POINTERS);
}

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Sends `n` `SIGPROF`s to the calling thread; returns the time taken.
fn raise_n(n: u32) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: raising a signal whose handler is installed (ours or pprof-rs's).
        unsafe { libc::raise(libc::SIGPROF) };
    }
    t.elapsed()
}

/// pprof-rs: its handler cannot be called outside a signal (the walk is private and starts
/// from the signal's `ucontext`), so the capture is the `raise(SIGPROF)` round trip with its
/// handler minus the same round trip with an empty handler. Also times 40 calls of its
/// public `pprof::validate`, which its walk makes once per frame.
pub fn capture_pprof(n_signals: u32) {
    // SAFETY: a zeroed sigaction with a handler that does nothing; SIGPROF is ours until
    // pprof-rs installs its own below.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ignore_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut()), 0);
    }
    at_depth(CAPTURE_RECURSION, &mut || {
        let idle = raise_n(n_signals);
        emit("signal_idle_ns", per(idle, n_signals));
        // 1 Hz: the timer adds a sample per second of CPU; the raised signals are the rest.
        let guard = pprof::ProfilerGuard::new(1).expect("starting pprof-rs");
        let active = raise_n(n_signals);
        emit("signal_active_ns", per(active, n_signals));
        let report = guard.report().build_unresolved().expect("pprof-rs report");
        let depth = report
            .data
            .keys()
            .map(|f| f.frames.len())
            .max()
            .unwrap_or(0);
        let samples: isize = report.data.values().sum();
        emit("depth", depth);
        emit("samples", samples);
        drop(guard);
        // Its walk validates each frame pointer with a write() of 16 bytes into a pipe.
        let on_stack = [0usize; 2];
        let rounds = n_signals.min(20_000);
        let t = Instant::now();
        for _ in 0..rounds {
            for _ in 0..40 {
                std::hint::black_box(pprof::validate(
                    std::hint::black_box(&on_stack) as *const _ as *const libc::c_void
                ));
            }
        }
        emit("validate40_ns", per(t.elapsed(), rounds));
    });
}

/// Which profiler runs during a CPU or encoding measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    None,
    Ember,
    Pprof,
}

impl Contender {
    pub fn parse(s: &str) -> Contender {
        match s {
            "none" => Contender::None,
            "ember" => Contender::Ember,
            "pprof" => Contender::Pprof,
            other => panic!("unknown contender {other:?}: none, ember or pprof"),
        }
    }
}

/// A running profile of either contender.
enum Running {
    None,
    Ember(ember_sdk::CpuRecording),
    Pprof(pprof::ProfilerGuard<'static>),
}

impl Running {
    fn start(who: Contender, hz: u32) -> Running {
        match who {
            Contender::None => Running::None,
            Contender::Ember => {
                Running::Ember(ember_sdk::CpuRecording::start(hz).expect("starting ember-sdk"))
            }
            Contender::Pprof => Running::Pprof(
                pprof::ProfilerGuard::new(hz as libc::c_int).expect("starting pprof-rs"),
            ),
        }
    }

    /// Samples taken so far (pprof-rs: by building an unresolved report, which is cheap).
    fn samples(&self) -> u64 {
        match self {
            Running::None => 0,
            Running::Ember(r) => r.samples(),
            Running::Pprof(g) => {
                let report = g.report().build_unresolved().expect("pprof-rs report");
                report.data.values().sum::<isize>() as u64
            }
        }
    }
}

/// CPU time of `units` of work with the contender profiling at `hz` (from after its start
/// to the end of the work; stopping and building the profile are not included).
pub fn cpu(who: Contender, hz: u32, units: u64) {
    burn(units / 20); // warm the caches and the page tables the same way for everyone
    let running = Running::start(who, hz);
    let (p0, t0, w0) = (process_cpu(), thread_cpu(), Instant::now());
    burn(units);
    let (p1, t1, w1) = (process_cpu(), thread_cpu(), Instant::now());
    emit("process_cpu_ns", (p1 - p0).as_nanos());
    emit("thread_cpu_ns", (t1 - t0).as_nanos());
    emit("wall_ns", (w1 - w0).as_nanos());
    if let Running::Ember(_) = running {
        // The collector drains the ring every 20 ms: let it count the last ones.
        std::thread::sleep(Duration::from_millis(60));
    }
    emit("samples", running.samples());
}

/// Records a 60 s profile's worth of samples (5,940: 60 s at 99 Hz), sampling at `hz`
/// to get there sooner, then times symbolization and encoding (gzip'd pprof for both),
/// and the resident memory added.
pub fn encode(who: Contender, hz: u32, chunk_units: u64) {
    burn(chunk_units);
    reset_peak();
    let rss0 = status_kib("VmRSS:");
    let running = Running::start(who, hz);
    let t = Instant::now();
    while running.samples() < SAMPLES_60S_99HZ && t.elapsed() < Duration::from_secs(300) {
        burn(chunk_units);
    }
    let rss_recording = status_kib("VmRSS:");
    emit("record_wall_ms", t.elapsed().as_millis());
    match running {
        Running::None => panic!("encode needs a profiler"),
        Running::Ember(rec) => {
            let t = Instant::now();
            let profile = rec.finish();
            let built = t.elapsed();
            let t = Instant::now();
            let bytes = ember_pprof::encode_gzip(&profile);
            let encoded = t.elapsed();
            let samples: i64 = profile.sample.iter().map(|s| s.value[0]).sum();
            emit("samples", samples);
            emit("stacks", profile.sample.len());
            emit("symbolize_ms", ms(built));
            emit("encode_ms", ms(encoded));
            emit("bytes", bytes.len());
        }
        Running::Pprof(guard) => {
            let t = Instant::now();
            let report = guard.report().build().expect("pprof-rs report");
            let symbolized = t.elapsed();
            let t = Instant::now();
            let profile = report.pprof().expect("pprof-rs pprof");
            let raw = pprof::protos::Message::encode_to_vec(&profile);
            let bytes = gzip(&raw);
            let encoded = t.elapsed();
            emit("samples", report.data.values().sum::<isize>());
            emit("stacks", report.data.len());
            emit("symbolize_ms", ms(symbolized));
            emit("encode_ms", ms(encoded));
            emit("bytes", bytes.len());
            drop(guard);
        }
    }
    emit("rss_before_kib", rss0);
    emit("rss_recording_kib", rss_recording);
    emit("rss_after_kib", status_kib("VmRSS:"));
    emit("peak_kib", status_kib("VmHWM:"));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Gzip at the default level, as ember-pprof does for its own profiles.
fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(raw).expect("gzip into memory");
    enc.finish().expect("gzip into memory")
}
