//! A recording session: choosing what to sample, opening one event per CPU
//! (per thread for `-p`), draining the ring buffers in timestamp order, and
//! turning each sample into a stack of not-yet-symbolized frames attributed
//! to the process image that was mapped when it was taken.

use crate::SamplerError;
use crate::launch;
use crate::parse::{self, Record};
use crate::sys::{self, EventConfig, EventKind};
use ember_samples::Recording;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

mod aggregate;
mod open;
mod options;

use aggregate::Aggregator;
use open::{Events, all_pids, list_tids, open_error, open_target_events};
pub use options::{CallGraph, Options, Progress, Status, Target};

pub use ember_samples::OffCpuSource;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT/SIGTERM stop a recording gracefully instead of killing
/// Ember (a launched command still receives the terminal's SIGINT itself).
pub fn install_interrupt_handler() {
    let handler = on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// A running sampling session: events stay open and per-process state
/// (names, mappings, unwinders) carries over from one [`Session::cut`] to
/// the next, while exited processes are forgotten so that memory stays
/// bounded however long it runs.
///
/// ```no_run
/// # use ember_sampler::{Options, Session, Target};
/// # use std::time::{Duration, Instant};
/// let mut session = Session::start(&Options::new(Target::AllCpus))?;
/// let mut last = Instant::now();
/// loop {
///     session.poll(Duration::from_millis(100));
///     if last.elapsed() >= Duration::from_secs(10) {
///         last = Instant::now();
///         let recording = session.cut(); // the last 10 s, aggregated
///         # drop(recording);
///     }
/// }
/// # Ok::<(), ember_sampler::SamplerError>(())
/// ```
pub struct Session {
    opts: Options,
    layout: parse::Layout,
    agg: Aggregator,
    events: Events,
    raw_fds: Vec<RawFd>,
    pending: Vec<Record>,
    bytes: Vec<u8>,
    child_pid: Option<i32>,
    watched_pids: Vec<u32>,
    started: Instant,
    /// Unix and monotonic clocks read together at the start.
    start_unix_ns: i64,
    start_mono_ns: u64,
    /// Totals of the recordings already cut, for [`Session::progress`].
    cut_samples: u64,
    cut_lost: u64,
    status: Status,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("target", &self.opts.target)
            .field("rings", &self.events.rings.len())
            .field("processes", &self.agg.table.processes.len())
            .field("status", &self.status)
            .finish()
    }
}

fn validate(opts: &Options) -> Result<(), SamplerError> {
    if !(1..=10_000).contains(&opts.frequency) {
        return Err(SamplerError::Config(format!(
            "frequency must be 1..=10000 Hz, got {}",
            opts.frequency
        )));
    }
    if opts.call_graph != CallGraph::Fp
        && (opts.user_stack_size == 0
            || !opts.user_stack_size.is_multiple_of(8)
            || opts.user_stack_size > 65_528)
    {
        return Err(SamplerError::Config(format!(
            "user stack size must be a multiple of 8 between 8 and 65528 bytes, got {}",
            opts.user_stack_size
        )));
    }
    if opts.call_graph != CallGraph::Fp && !crate::arch::CFI_SUPPORTED {
        return Err(SamplerError::Config(
            "CFI (dwarf/auto) unwinding is not implemented for this architecture; use \
             --call-graph fp"
                .into(),
        ));
    }
    Ok(())
}

fn unix_now_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Session {
    /// Validates `opts`, opens the events (launching the command for
    /// [`Target::Command`]) and starts sampling. `opts.duration` is not
    /// enforced here: the caller decides when to stop.
    pub fn start(opts: &Options) -> Result<Session, SamplerError> {
        validate(opts)?;
        let mut opts = opts.clone();
        opts.off_cpu |= opts.wall;
        if opts.call_graph != CallGraph::Fp {
            opts.ring_pages = opts.ring_pages.max(256);
        }
        let layout = parse::Layout {
            user_regs: if opts.call_graph == CallGraph::Fp {
                0
            } else {
                sys::USER_REGS_MASK.count_ones() as usize
            },
            raw: false,
        };
        let mut agg = Aggregator::new(opts.call_graph, opts.off_cpu_min_ns, opts.raw_events);
        let mut cfg = EventConfig {
            kind: EventKind::CpuClock,
            frequency: opts.frequency,
            enable_on_exec: false,
            inherit: true,
            side_band: true,
            exclude_kernel: false,
            user_stack: if opts.call_graph == CallGraph::Fp {
                0
            } else {
                opts.user_stack_size
            },
            user_callchain: opts.call_graph != CallGraph::Dwarf,
            // Wake up when a quarter of the buffer is filled, not per sample.
            wakeup_bytes: u32::try_from(opts.ring_pages * sys::page_size() / 4).unwrap_or(u32::MAX),
            max_stack: std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(127),
        };
        let mut warnings = Vec::new();
        let mut child = None;
        let mut watched_pids = Vec::new();
        let (events, switch_format) = match &opts.target {
            Target::Command(argv) => {
                let stopped = launch::spawn_stopped(argv)?;
                cfg.enable_on_exec = true;
                let opened = open_target_events(&opts, &[stopped.pid()], &mut cfg, &mut warnings)?;
                child = Some(stopped);
                opened
            }
            Target::Pids(pids) => {
                let mut tasks = Vec::new();
                for &pid in pids {
                    let tids = list_tids(pid);
                    if tids.is_empty() {
                        return Err(SamplerError::NoSuchProcess(pid));
                    }
                    agg.table.load_from_proc(pid);
                    tasks.extend(tids);
                    watched_pids.push(pid);
                }
                open_target_events(&opts, &tasks, &mut cfg, &mut warnings)?
            }
            Target::AllCpus => {
                cfg.inherit = false;
                let opened = open_target_events(&opts, &[-1], &mut cfg, &mut warnings)?;
                // Snapshot existing processes; later changes arrive as records.
                for pid in all_pids() {
                    agg.table.load_from_proc(pid);
                }
                agg.table.unreadable.clear();
                opened
            }
        };
        agg.switch_format = switch_format;
        let off_cpu_source = opts.off_cpu.then_some(if switch_format.is_some() {
            OffCpuSource::Tracepoint
        } else {
            OffCpuSource::ContextSwitch
        });

        let started = Instant::now();
        let start_unix_ns = unix_now_ns();
        let start_mono_ns = sys::monotonic_ns();
        let mut child_pid = None;
        if let Some(stopped) = child.take() {
            let name = match &opts.target {
                Target::Command(argv) => argv[0].to_string_lossy().into_owned(),
                _ => String::new(),
            };
            child_pid = Some(stopped.release(&name)?);
        } else {
            for fd in events.all_fds() {
                sys::set_enabled(fd, true).map_err(|e| open_error(e, "enabling cpu-clock"))?;
            }
        }
        let mut rec = Recording::default();
        rec.frequency = opts.frequency;
        rec.off_cpu = opts.off_cpu;
        rec.wall = opts.wall;
        rec.start_unix_ns = start_unix_ns;
        rec.start_monotonic_ns = start_mono_ns;
        rec.warnings = warnings;
        rec.off_cpu_source = off_cpu_source;
        agg.rec = rec;
        let raw_fds = events.rings.iter().map(|r| r.fd().as_raw_fd()).collect();
        Ok(Session {
            opts,
            layout,
            agg,
            events,
            raw_fds,
            pending: Vec::new(),
            bytes: Vec::new(),
            child_pid,
            watched_pids,
            started,
            start_unix_ns,
            start_mono_ns,
            cut_samples: 0,
            cut_lost: 0,
            status: Status::Running,
        })
    }

    /// Waits up to `timeout` for the ring buffers to fill past their
    /// watermark, then drains and aggregates every record old enough to be
    /// in timestamp order. Call it at least every few hundred milliseconds
    /// (the buffers are sized for that) until the target is gone.
    pub fn poll(&mut self, timeout: Duration) -> Status {
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        sys::poll_fds(&self.raw_fds, ms);
        self.drain_ready();
        if self.status == Status::Running {
            if let Some(pid) = self.child_pid
                && let Some(status) = launch::wait(pid, true)
            {
                self.agg.rec.exit_status = Some(status);
                self.status = Status::TargetGone;
            }
            if !self.watched_pids.is_empty()
                && self
                    .watched_pids
                    .iter()
                    .all(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
            {
                self.status = Status::TargetGone;
            }
        }
        self.status
    }

    /// Drains the buffers and aggregates records up to a safe horizon;
    /// returns the horizon (CLOCK_MONOTONIC ns).
    fn drain_ready(&mut self) -> u64 {
        // Records stamped before this instant are already in the buffers we
        // are about to drain, so they can be ordered safely (the margin
        // covers a record being written just as its timestamp is taken).
        let horizon = sys::monotonic_ns().saturating_sub(10_000_000);
        drain(
            &mut self.events,
            self.layout,
            &mut self.bytes,
            &mut self.pending,
        );
        process_until(&mut self.agg, &mut self.pending, Some(horizon));
        horizon
    }

    /// Live figures since the start of the session (across cuts).
    pub fn progress(&self) -> Progress {
        Progress {
            elapsed: self.started.elapsed(),
            samples: self.cut_samples + self.agg.rec.samples,
            lost: self.cut_lost + self.agg.rec.lost,
        }
    }

    /// Time since sampling started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// How many processes and threads the session currently keeps state
    /// for (names, mappings): follows the live tasks, not every task seen.
    pub fn tracked_tasks(&self) -> (usize, usize) {
        (self.agg.table.processes.len(), self.agg.table.threads.len())
    }

    /// Binaries in the shared unwind-table cache, and how many times a
    /// binary was loaded (a miss) since the start.
    pub fn unwind_cache_stats(&self) -> (usize, u64) {
        self.agg.unwinder.cache_stats()
    }

    /// The pid of the launched command ([`Target::Command`]).
    pub fn child_pid(&self) -> Option<i32> {
        self.child_pid
    }

    /// The effective options (off-CPU implied by wall, ring size raised for
    /// stack copies).
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Everything aggregated since the previous cut (or the start): stacks,
    /// the mappings they reference, counts, and raw events if requested.
    /// Its time range ends a few milliseconds before now (records younger
    /// than that may still be in flight and go to the next cut). Tasks
    /// blocked across the cut have their off-CPU time split at the cut.
    pub fn cut(&mut self) -> Recording {
        let horizon = self.drain_ready();
        self.take(horizon)
    }

    /// Stops sampling and returns what was aggregated since the last cut,
    /// up to now (tasks still blocked are charged until now).
    pub fn finish(mut self) -> Recording {
        for fd in self.events.all_fds() {
            let _ = sys::set_enabled(fd, false);
        }
        drain(
            &mut self.events,
            self.layout,
            &mut self.bytes,
            &mut self.pending,
        );
        process_until(&mut self.agg, &mut self.pending, None);
        let end = sys::monotonic_ns();
        self.take(end)
    }

    /// Closes the current recording at `end` (CLOCK_MONOTONIC) and starts
    /// the next one there.
    fn take(&mut self, end: u64) -> Recording {
        let end = end.max(self.agg.rec.start_monotonic_ns);
        let end_unix_ns = self.start_unix_ns + (end - self.start_mono_ns) as i64;
        let rec = self.agg.close(end, end_unix_ns);
        self.cut_samples += rec.samples;
        self.cut_lost += rec.lost;
        rec
    }
}

/// Samples `opts.target` until it ends, the duration passes or SIGINT, and
/// returns the aggregated stacks. `progress` is called about twice a second.
/// A one-shot [`Session`]: start, poll, finish.
pub fn record(
    opts: &Options,
    mut progress: impl FnMut(&Progress),
) -> Result<Recording, SamplerError> {
    let mut session = Session::start(opts)?;
    let mut last_progress = Instant::now();
    loop {
        let status = session.poll(Duration::from_millis(100));
        if last_progress.elapsed() >= Duration::from_millis(500) {
            last_progress = Instant::now();
            progress(&session.progress());
        }
        if status == Status::TargetGone
            || opts.duration.is_some_and(|d| session.elapsed() >= d)
            || (INTERRUPTED.load(Ordering::SeqCst) && session.child_pid().is_none())
        {
            break;
        }
    }
    Ok(session.finish())
}

fn drain(
    events: &mut Events,
    layout: parse::Layout,
    bytes: &mut Vec<u8>,
    pending: &mut Vec<Record>,
) {
    for (i, ring) in events.rings.iter_mut().enumerate() {
        bytes.clear();
        ring.drain_into(bytes);
        let off_cpu = i >= events.off_cpu_from;
        let layout = parse::Layout {
            raw: off_cpu && events.switch_raw,
            ..layout
        };
        pending.extend(
            parse::parse_records(bytes, layout)
                .into_iter()
                .map(|mut r| {
                    match &mut r {
                        Record::Sample(s) => s.off_cpu = off_cpu,
                        Record::Lost { off_cpu: o, .. } => *o = off_cpu,
                        _ => {}
                    }
                    r
                }),
        );
    }
}

fn process_until(agg: &mut Aggregator, pending: &mut Vec<Record>, horizon: Option<u64>) {
    pending.sort_by_key(Record::time);
    let cut = match horizon {
        Some(h) => pending.partition_point(|r| r.time() < h),
        None => pending.len(),
    };
    for record in pending.drain(..cut) {
        agg.handle(record);
    }
}
