//! CPU clocks and resident memory of this process, from the kernel.

use std::time::Duration;

fn clock(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into; the clock ids used exist on Linux.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({id})");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU time of every thread of the process (the workload, the signal handlers running on
/// it, and any collector thread a profiler keeps).
pub fn process_cpu() -> Duration {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time of the calling thread.
pub fn thread_cpu() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A `kB` field of `/proc/self/status` (`VmRSS:`, `VmHWM:`, `RssAnon:`).
pub fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets the peak resident size (`VmHWM`) so it measures from now.
pub fn reset_peak() {
    // Best effort: an old kernel without it leaves the peak since the start.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
