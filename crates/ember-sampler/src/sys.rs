//! The thin layer over the kernel: opening `perf_event` file descriptors,
//! mapping and draining their ring buffers, polling, and the clock the kernel
//! stamps records with.
//!
//! Every `unsafe` block of the sampler that talks to the perf subsystem lives
//! here (process launching has its own in [`crate::launch`]); everything above
//! this module works on plain byte slices.

use crate::SamplerError;
use perf_event_open_sys as sys;
use perf_event_open_sys::bindings as b;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Sample fields we ask the kernel for; [`crate::parse`] decodes exactly this layout.
pub const SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_PERIOD
    | b::PERF_SAMPLE_CALLCHAIN) as u64;

/// Which software event to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventKind {
    /// `cpu-clock`, sampled at a frequency: on-CPU time.
    #[default]
    CpuClock,
    /// `context-switches`, every switch-out sampled with the stack of the
    /// task leaving the CPU, plus PERF_RECORD_SWITCH records: off-CPU time.
    ContextSwitch,
    /// The `sched:sched_switch` tracepoint (id from tracefs), sampled on
    /// every switch with the stack of the task leaving and the raw record
    /// (prev/next task, prev state): off-CPU time.
    ///
    /// It also asks for PERF_RECORD_SWITCH records, which say when a task
    /// comes back on the CPU. A per-task event needs them because it only
    /// fires when its own task leaves. A CPU-wide event sees the return as
    /// `next_pid` of the next switch, but not always: on kernel 6.18 a CPU
    /// was seen to stop delivering the tracepoint while its idle task is
    /// current (every switch *from* idle missing, for as long as the
    /// session ran), so a sleeper woken on an idle CPU never came back. The
    /// side-band records come from the scheduler's perf hooks, not the
    /// tracepoint, and were there every time.
    SchedSwitch {
        /// Tracepoint id.
        id: u64,
    },
}

/// What one `perf_event_open` call should measure.
#[derive(Debug, Clone, Copy)]
pub struct EventConfig {
    /// The event.
    pub kind: EventKind,
    /// Samples per second (frequency mode).
    pub frequency: u32,
    /// Start counting only when the monitored task calls `exec` (used for a
    /// command we launch, so the fork-to-exec window of Ember is not sampled).
    pub enable_on_exec: bool,
    /// Follow threads and processes created by the monitored task.
    pub inherit: bool,
    /// Ask for COMM/MMAP2/FORK/EXIT side-band records.
    pub side_band: bool,
    /// Maximum callchain depth.
    pub max_stack: u16,
    /// Sample user mode only (what unprivileged users may do at
    /// `perf_event_paranoid` 2).
    pub exclude_kernel: bool,
    /// Bytes of user stack to copy with each sample (0 = none); also asks
    /// for the user registers needed to unwind it ([`USER_REGS_MASK`]).
    pub user_stack: u32,
    /// Let the kernel walk user frame pointers into the callchain.
    pub user_callchain: bool,
    /// Wake the reader once this many bytes are buffered.
    pub wakeup_bytes: u32,
}

/// The user registers sampled for CFI unwinding (architecture-specific,
/// see [`crate::arch`]).
pub use crate::arch::USER_REGS_MASK;

fn build_attr(cfg: &EventConfig) -> b::perf_event_attr {
    let mut attr = b::perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        config: b::PERF_COUNT_SW_CPU_CLOCK as u64,
        sample_type: SAMPLE_TYPE,
        ..Default::default()
    };
    if cfg.user_stack > 0 {
        attr.sample_type |= (b::PERF_SAMPLE_REGS_USER | b::PERF_SAMPLE_STACK_USER) as u64;
        attr.sample_regs_user = USER_REGS_MASK;
        attr.sample_stack_user = cfg.user_stack;
    }
    attr.set_exclude_callchain_user(u64::from(!cfg.user_callchain));
    if cfg.wakeup_bytes > 0 {
        attr.set_watermark(1);
        attr.__bindgen_anon_2.wakeup_watermark = cfg.wakeup_bytes;
    }
    match cfg.kind {
        EventKind::CpuClock => {
            attr.__bindgen_anon_1.sample_freq = u64::from(cfg.frequency);
            attr.set_freq(1);
        }
        EventKind::ContextSwitch => {
            attr.config = b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64;
            attr.__bindgen_anon_1.sample_period = 1;
            attr.set_context_switch(1);
        }
        EventKind::SchedSwitch { id } => {
            attr.type_ = b::PERF_TYPE_TRACEPOINT;
            attr.config = id;
            attr.sample_type |= b::PERF_SAMPLE_RAW as u64;
            attr.__bindgen_anon_1.sample_period = 1;
            attr.set_context_switch(1);
        }
    }
    attr.set_disabled(1);
    attr.set_inherit(u64::from(cfg.inherit));
    attr.set_enable_on_exec(u64::from(cfg.enable_on_exec));
    let side = u64::from(cfg.side_band);
    attr.set_mmap(side);
    attr.set_mmap2(side);
    attr.set_comm(side);
    attr.set_comm_exec(side);
    attr.set_task(side);
    attr.set_sample_id_all(1);
    // Stamp records with CLOCK_MONOTONIC so they can be ordered against our
    // own clock reads (see `monotonic_ns`) when merging per-CPU buffers.
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.set_exclude_guest(1);
    attr.set_exclude_kernel(u64::from(cfg.exclude_kernel));
    attr.set_exclude_callchain_kernel(u64::from(cfg.exclude_kernel));
    attr.sample_max_stack = cfg.max_stack;
    attr
}

/// Opens one sampling event for `pid` (-1 = every task) on `cpu`.
pub fn open_event(cfg: &EventConfig, pid: i32, cpu: i32) -> Result<OwnedFd, io::Error> {
    let mut attr = build_attr(cfg);
    // SAFETY: `attr` is a fully initialised perf_event_attr whose `size`
    // matches the struct we pass; the kernel only reads it. The flags request
    // a close-on-exec descriptor, so the launched command never inherits it.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            pid,
            cpu,
            -1,
            b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel, is valid and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Redirects the records of `fd` into the ring buffer of `target` (same CPU).
pub fn set_output(fd: &OwnedFd, target: &OwnedFd) -> Result<(), io::Error> {
    // SAFETY: both descriptors are live perf_event fds owned by the caller.
    let rc = unsafe { sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Enables (`true`) or disables a perf event.
pub fn set_enabled(fd: &OwnedFd, enabled: bool) -> Result<(), io::Error> {
    // SAFETY: `fd` is a live perf_event fd; ENABLE/DISABLE take no pointer.
    let rc = unsafe {
        if enabled {
            sys::ioctls::ENABLE(fd.as_raw_fd(), 0)
        } else {
            sys::ioctls::DISABLE(fd.as_raw_fd(), 0)
        }
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A perf ring buffer mapped into our address space: one metadata page
/// followed by `2^n` data pages that the kernel fills and we drain.
#[derive(Debug)]
pub struct RingBuffer {
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: u64,
    fd: OwnedFd,
}

// SAFETY: the mapping is owned exclusively by this value; moving it to another
// thread moves the only handle to it.
unsafe impl Send for RingBuffer {}

impl RingBuffer {
    /// Maps `data_pages` (a power of two) data pages of `fd` and sets a wakeup
    /// watermark at a quarter of the buffer.
    pub fn new(fd: OwnedFd, data_pages: usize) -> Result<Self, SamplerError> {
        if !data_pages.is_power_of_two() {
            return Err(SamplerError::Config(format!(
                "ring buffer pages must be a power of two, got {data_pages}"
            )));
        }
        let page = page_size();
        let map_len = page * (data_pages + 1);
        // SAFETY: mapping a perf fd with PROT_READ|PROT_WRITE and MAP_SHARED is
        // the documented way to access its ring buffer; we check for failure
        // and own the resulting region until Drop unmaps it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(SamplerError::Mmap(io::Error::last_os_error()));
        }
        Ok(RingBuffer {
            base: base.cast(),
            map_len,
            data_offset: page,
            data_size: (page * data_pages) as u64,
            fd,
        })
    }

    /// The descriptor the buffer belongs to (for polling and ioctls).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn meta(&self) -> *mut b::perf_event_mmap_page {
        self.base.cast()
    }

    /// Appends every complete record currently in the buffer to `out` (as one
    /// contiguous byte run, wrap-around undone) and releases the space.
    pub fn drain_into(&mut self, out: &mut Vec<u8>) {
        let meta = self.meta();
        // SAFETY: `meta` points at the metadata page of a live mapping. The
        // kernel updates data_head concurrently, so it is read through an
        // atomic with Acquire ordering: record bytes below head are then
        // visible to us (pairs with the kernel's release barrier).
        let head = unsafe {
            (*(std::ptr::addr_of_mut!((*meta).data_head) as *const AtomicU64))
                .load(Ordering::Acquire)
        };
        // SAFETY: data_tail is only written by us; a plain volatile read is enough.
        let tail = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*meta).data_tail)) };
        if head == tail {
            return;
        }
        let available = head.wrapping_sub(tail).min(self.data_size);
        let start = (tail % self.data_size) as usize;
        let first = (available as usize).min(self.data_size as usize - start);
        // SAFETY: both ranges lie inside the data area of our mapping
        // (start < data_size, first <= data_size - start, the remainder is
        // < data_size from the area's start), and the kernel does not write
        // to the region between tail and head until we advance data_tail.
        unsafe {
            let data = self.base.add(self.data_offset);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            let rest = available as usize - first;
            if rest > 0 {
                out.extend_from_slice(std::slice::from_raw_parts(data, rest));
            }
        }
        // SAFETY: publishing the new tail with Release ordering tells the
        // kernel we are done reading the bytes above, after the copies.
        unsafe {
            (*(std::ptr::addr_of_mut!((*meta).data_tail) as *const AtomicU64))
                .store(tail.wrapping_add(available), Ordering::Release);
        }
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: `base`/`map_len` describe exactly the region mapped in `new`,
        // which nothing references after this point.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as usize } else { 4096 }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock the kernel stamps our records with.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// CPU time (user + system) this process has consumed so far, in
/// nanoseconds, including threads that already exited (`getrusage`).
pub fn own_cpu_ns() -> Option<u64> {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage for the call's duration.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let ns = |t: libc::timeval| (t.tv_sec as u64) * 1_000_000_000 + (t.tv_usec as u64) * 1_000;
    Some(ns(usage.ru_utime) + ns(usage.ru_stime))
}

/// Waits up to `timeout_ms` for any of `fds` to become readable.
pub fn poll_fds(fds: &[RawFd], timeout_ms: i32) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfd structs that the
    // kernel may write `revents` into. Errors (EINTR) simply end the wait.
    unsafe {
        libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms);
    }
}

/// The number of possible CPUs, as the kernel numbers them for perf.
pub fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-');
        let lo = ends.next().and_then(|s| s.parse::<i32>().ok());
        let hi = ends.next().and_then(|s| s.parse::<i32>().ok());
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo <= hi => cpus.extend(lo..=hi),
            (Some(lo), None) => cpus.push(lo),
            _ => {}
        }
    }
    if cpus.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        cpus.extend(0..n as i32);
    }
    cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ns() >= a + 1_000_000);
    }

    #[test]
    fn own_cpu_time_grows_when_busy() {
        let before = own_cpu_ns().expect("schedstat");
        let start = std::time::Instant::now();
        let mut x = 1u64;
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(3));
        }
        assert!(own_cpu_ns().unwrap() > before);
    }

    #[test]
    fn cpus_are_listed() {
        let cpus = online_cpus();
        assert!(!cpus.is_empty());
        assert_eq!(cpus[0], 0);
    }

    /// A cpu-clock event on this thread, with or without side-band records.
    fn self_clock(frequency: u32, side_band: bool) -> EventConfig {
        EventConfig {
            kind: EventKind::CpuClock,
            frequency,
            enable_on_exec: false,
            inherit: false,
            side_band,
            max_stack: 127,
            exclude_kernel: false,
            user_stack: 0,
            user_callchain: true,
            wakeup_bytes: 0,
        }
    }

    #[test]
    fn ring_buffer_rejects_bad_page_count() {
        let cfg = self_clock(99, false);
        let fd = open_event(&cfg, 0, -1).expect("perf_event_open on self");
        assert!(RingBuffer::new(fd, 3).is_err());
    }

    #[test]
    fn ring_buffer_collects_self_samples() {
        let cfg = self_clock(1000, true);
        let fd = open_event(&cfg, 0, -1).expect("perf_event_open on self");
        let mut ring = RingBuffer::new(fd, 8).expect("mmap");
        set_enabled(ring.fd(), true).expect("enable");
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        set_enabled(ring.fd(), false).expect("disable");
        let mut bytes = Vec::new();
        ring.drain_into(&mut bytes);
        let records = crate::parse::parse_records(&bytes, Default::default());
        let samples = records
            .iter()
            .filter(|r| matches!(r, crate::parse::Record::Sample(_)))
            .count();
        // 300 ms at 1 kHz; frequency mode ramps up and CPUs are shared, so ask for a fraction.
        assert!(samples >= 20, "only {samples} samples");
        let mut again = Vec::new();
        ring.drain_into(&mut again);
        assert!(again.is_empty(), "tail was not advanced");
    }
}
