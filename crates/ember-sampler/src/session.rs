//! A recording session: choosing what to sample, opening one event per CPU
//! (per thread for `-p`), draining the ring buffers in timestamp order, and
//! turning each sample into a stack of not-yet-symbolized frames attributed
//! to the process image that was mapped when it was taken.

use crate::SamplerError;
use crate::launch::{self, ExitStatus};
use crate::parse::{self, Record, SampleRecord};
use crate::process::ProcessTable;
use crate::sys::{self, EventConfig, EventKind, RingBuffer};
use crate::unwind::DwarfUnwinder;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// What to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Launch this command (argv) and follow its threads and children.
    Command(Vec<OsString>),
    /// Attach to these running processes (all their threads and later children).
    Pids(Vec<u32>),
    /// Every task on every CPU.
    AllCpus,
}

/// How user stacks are unwound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// Frame pointers, walked by the kernel.
    Fp,
    /// CFI (`.eh_frame`/`.debug_frame`) over a copy of the user stack.
    Dwarf,
    /// Both; per sample, whichever method recovers more frames.
    Auto,
}

/// Options of a recording.
#[derive(Debug, Clone)]
pub struct Options {
    /// What to sample.
    pub target: Target,
    /// Samples per second per CPU, 1..=10000.
    pub frequency: u32,
    /// Unwinding method.
    pub call_graph: CallGraph,
    /// Stop after this long (the command is left running).
    pub duration: Option<Duration>,
    /// Data pages per ring buffer (power of two); raised to at least 256
    /// when user stacks are copied.
    pub ring_pages: usize,
    /// Bytes of user stack copied per sample for CFI unwinding (multiple of 8).
    pub user_stack_size: u32,
    /// Also record off-CPU time: every context switch of the targets is
    /// sampled with the blocked stack and timed until the task runs again.
    pub off_cpu: bool,
    /// Also emit `wall/nanoseconds` = on-CPU + off-CPU time per stack
    /// (implies `off_cpu`).
    pub wall: bool,
}

impl Options {
    /// Defaults: 99 Hz, `auto` unwinding with 16 KiB stack copies, 64 data
    /// pages per CPU (256 with stack copies).
    pub fn new(target: Target) -> Self {
        Options {
            target,
            frequency: 99,
            call_graph: CallGraph::Auto,
            duration: None,
            ring_pages: 64,
            user_stack_size: 16 * 1024,
            off_cpu: false,
            wall: false,
        }
    }
}

/// One not-yet-symbolized frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frame {
    /// A kernel address.
    Kernel {
        /// Instruction address.
        addr: u64,
        /// A return address (look up `addr - 1`).
        ret: bool,
    },
    /// A user address inside a known mapping.
    User {
        /// Index into [`Recording::maps`].
        map: u32,
        /// Instruction address.
        addr: u64,
        /// A return address (look up `addr - 1`).
        ret: bool,
    },
    /// A user address outside any file mapping (JIT code or unknown).
    Anon {
        /// Process the address belongs to.
        pid: u32,
        /// Instruction address.
        addr: u64,
        /// A return address.
        ret: bool,
    },
}

/// A mapping referenced by at least one frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MapInfo {
    /// Process the mapping belongs to.
    pub pid: u32,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// Mapped path.
    pub path: Arc<str>,
}

/// Identity of an aggregated stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StackKey {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Process name when sampled.
    pub comm: Arc<str>,
    /// Thread name when sampled.
    pub thread_name: Arc<str>,
    /// Frames, leaf first.
    pub frames: Vec<Frame>,
}

/// Totals of an aggregated stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackValue {
    /// Number of samples.
    pub count: u64,
    /// Sum of sample periods (CPU nanoseconds).
    pub period: u64,
}

/// Live figures for a progress line.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Time since sampling started.
    pub elapsed: Duration,
    /// Samples processed so far.
    pub samples: u64,
    /// Records the kernel reported lost.
    pub lost: u64,
}

/// Everything a recording produced, before symbolization.
#[derive(Debug, Default)]
pub struct Recording {
    /// Aggregated stacks.
    pub stacks: HashMap<StackKey, StackValue>,
    /// Mappings referenced by [`Frame::User`].
    pub maps: Vec<MapInfo>,
    /// Total samples.
    pub samples: u64,
    /// Lost records.
    pub lost: u64,
    /// Sampling frequency used.
    pub frequency: u32,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub start_unix_ns: i64,
    /// Recording duration in nanoseconds.
    pub duration_ns: i64,
    /// How the launched command ended, for [`Target::Command`].
    pub exit_status: Option<ExitStatus>,
    /// Degradations met while recording (vanished pids, ...).
    pub warnings: Vec<String>,
    /// Off-CPU recording was requested.
    pub off_cpu: bool,
    /// Wall-clock (on + off CPU) view was requested.
    pub wall: bool,
    /// Blocked time per stack (count = blocking episodes, period = ns).
    pub off_cpu_stacks: HashMap<StackKey, StackValue>,
    /// Context switches sampled for off-CPU time.
    pub off_cpu_switches: u64,
}

impl Recording {
    /// Distinct processes that were sampled.
    pub fn process_count(&self) -> usize {
        let mut pids: Vec<u32> = self
            .stacks
            .keys()
            .chain(self.off_cpu_stacks.keys())
            .map(|k| k.pid)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.len()
    }
}

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

fn paranoid_level() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn open_error(err: io::Error, what: &str) -> SamplerError {
    match err.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => SamplerError::Permission {
            what: what.to_string(),
            paranoid: paranoid_level(),
        },
        _ => SamplerError::Open(what.to_string(), err),
    }
}

/// Per-CPU ring buffers plus the extra fds redirected into them.
struct Events {
    rings: Vec<RingBuffer>,
    extra: Vec<OwnedFd>,
    /// Rings from this index on belong to the context-switch event.
    off_cpu_from: usize,
}

impl Events {
    fn all_fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings.iter().map(|r| r.fd()).chain(self.extra.iter())
    }
}

/// Opens cpu-clock events and, with `opts.off_cpu`, context-switch events
/// (in rings of their own, so their samples can be told apart).
fn open_target_events(
    opts: &Options,
    tasks: &[i32],
    cfg: &mut EventConfig,
    warnings: &mut Vec<String>,
) -> Result<Events, SamplerError> {
    let mut events = open_events(opts, tasks, cfg, warnings)?;
    if opts.off_cpu {
        let mut cs = EventConfig {
            kind: EventKind::ContextSwitch,
            side_band: false,
            ..*cfg
        };
        let more = open_events(opts, tasks, &mut cs, warnings)?;
        events.off_cpu_from = events.rings.len();
        events.rings.extend(more.rings);
        events.extra.extend(more.extra);
    }
    Ok(events)
}

/// Opens the events; when the kernel refuses kernel-mode sampling to an
/// unprivileged user, falls back to user-only sampling with a warning.
fn open_events(
    opts: &Options,
    tasks: &[i32],
    cfg: &mut EventConfig,
    warnings: &mut Vec<String>,
) -> Result<Events, SamplerError> {
    match open_events_once(opts, tasks, cfg, warnings) {
        Err(SamplerError::Permission { paranoid, .. })
            if !cfg.exclude_kernel && !tasks.contains(&-1) =>
        {
            cfg.exclude_kernel = true;
            let events = open_events_once(opts, tasks, cfg, warnings)?;
            warnings.push(format!(
                "kernel.perf_event_paranoid = {paranoid} forbids kernel samples for this user: \
                 recording user-space frames only (to include kernel stacks run as root or: \
                 sudo sysctl -w kernel.perf_event_paranoid=1)"
            ));
            Ok(events)
        }
        other => other,
    }
}

fn open_events_once(
    opts: &Options,
    tasks: &[i32],
    cfg: &EventConfig,
    warnings: &mut Vec<String>,
) -> Result<Events, SamplerError> {
    let mut events = Events {
        rings: Vec::new(),
        extra: Vec::new(),
        off_cpu_from: usize::MAX,
    };
    for cpu in sys::online_cpus() {
        let mut leader: Option<RingBuffer> = None;
        for &task in tasks {
            let fd = match sys::open_event(cfg, task, cpu) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                    let msg = format!("thread {task} vanished before it could be attached");
                    if !warnings.contains(&msg) {
                        warnings.push(msg);
                    }
                    continue;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENODEV) => break,
                Err(e) => {
                    let what = if task < 0 {
                        format!("cpu-clock on CPU {cpu}")
                    } else {
                        format!("cpu-clock for task {task} on CPU {cpu}")
                    };
                    return Err(open_error(e, &what));
                }
            };
            match &leader {
                None => leader = Some(RingBuffer::new(fd, opts.ring_pages)?),
                Some(ring) => {
                    sys::set_output(&fd, ring.fd())
                        .map_err(|e| SamplerError::Open("PERF_EVENT_IOC_SET_OUTPUT".into(), e))?;
                    events.extra.push(fd);
                }
            }
        }
        if let Some(ring) = leader {
            events.rings.push(ring);
        }
    }
    if events.rings.is_empty() {
        return Err(SamplerError::Config(
            "no perf event could be opened (all target processes gone?)".into(),
        ));
    }
    Ok(events)
}

fn list_tids(pid: u32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// The perf callchain marker values (`PERF_CONTEXT_*`) are all above this.
const CONTEXT_MAX: u64 = (-4095i64) as u64;
const CONTEXT_KERNEL: u64 = (-128i64) as u64;
const CONTEXT_USER: u64 = (-512i64) as u64;

/// Turns samples and side-band records into aggregated stacks.
struct Aggregator {
    table: ProcessTable,
    rec: Recording,
    map_index: HashMap<MapInfo, u32>,
    names: HashMap<String, Arc<str>>,
    /// Pids whose state came from records (never read from /proc lazily).
    known: std::collections::HashSet<u32>,
    /// Pids whose /proc maps were re-read after an address missed them.
    refreshed: std::collections::HashSet<u32>,
    call_graph: CallGraph,
    unwinder: DwarfUnwinder,
    /// Tasks that left the CPU: when, and with which stack.
    switched_out: HashMap<u32, (u64, StackKey)>,
}

impl Aggregator {
    fn name(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.names.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.names.insert(s.to_string(), a.clone());
        a
    }

    fn handle(&mut self, record: Record) {
        match record {
            Record::Sample(s) => self.sample(s),
            Record::Mmap2(m) => {
                self.known.insert(m.pid);
                self.table.mmap(&m);
            }
            Record::Comm {
                pid,
                tid,
                comm,
                exec,
                ..
            } => {
                if exec {
                    self.known.insert(pid);
                }
                self.table.comm(pid, tid, &comm, exec);
            }
            Record::Fork {
                pid,
                ppid,
                tid,
                ptid,
                ..
            } => {
                if pid != ppid {
                    self.known.insert(pid);
                }
                self.table.fork(pid, ppid, tid, ptid);
            }
            Record::Exit { pid, tid, .. } => {
                if pid == tid {
                    self.unwinder.forget(pid);
                }
                self.table.exit(pid, tid);
            }
            Record::Lost { lost, .. } => self.rec.lost += lost,
            Record::Switch { id, out } => {
                if !out {
                    self.switch_in(id.tid, id.time);
                }
            }
        }
    }

    fn find_file_map(&self, pid: u32, ip: u64) -> Option<crate::process::Map> {
        self.table
            .processes
            .get(&pid)
            .and_then(|p| p.find(ip))
            .filter(|m| m.path.starts_with('/') || m.path.starts_with('['))
            .filter(|m| !m.path.starts_with("[anon"))
            .cloned()
    }

    fn dwarf_unwind(&mut self, pid: u32, s: &SampleRecord) -> Vec<(u64, bool)> {
        if s.user_regs.is_empty() || pid == 0 {
            return Vec::new();
        }
        let ip = s.user_regs.last().copied().unwrap_or(0);
        // Make sure the mapping under the IP is known before unwinding.
        let _ = self.refresh_if_missing(pid, ip);
        let Some(process) = self.table.processes.get(&pid) else {
            return Vec::new();
        };
        self.unwinder
            .unwind(pid, process, &s.user_regs, &s.user_stack)
    }

    fn refresh_if_missing(&mut self, pid: u32, ip: u64) -> Option<crate::process::Map> {
        let mut found = self.find_file_map(pid, ip);
        if found.is_none() && pid != 0 && !self.known.contains(&pid) && self.refreshed.insert(pid) {
            // A process attached mid-exec (or mapping code we never saw
            // an MMAP2 for): its /proc snapshot may predate the mapping.
            self.table.load_from_proc(pid);
            found = self.find_file_map(pid, ip);
        }
        found
    }

    fn user_frame(&mut self, pid: u32, ip: u64, ret: bool) -> Frame {
        match self.refresh_if_missing(pid, ip) {
            Some(m) => {
                let info = MapInfo {
                    pid,
                    start: m.start,
                    end: m.end,
                    pgoff: m.pgoff,
                    path: m.path,
                };
                let next = self.rec.maps.len() as u32;
                let idx = *self.map_index.entry(info.clone()).or_insert_with(|| {
                    self.rec.maps.push(info);
                    next
                });
                Frame::User {
                    map: idx,
                    addr: ip,
                    ret,
                }
            }
            None => Frame::Anon { pid, addr: ip, ret },
        }
    }

    fn sample(&mut self, s: SampleRecord) {
        let time = s.id.time;
        let off_cpu = s.off_cpu;
        let period = s.period;
        if off_cpu {
            self.rec.off_cpu_switches += 1;
        } else {
            self.rec.samples += 1;
        }
        let key = self.stack_key(s);
        if off_cpu {
            // Blocked time is known when the task comes back (SWITCH in).
            self.switched_out.insert(key.tid, (time, key));
        } else {
            let value = self.rec.stacks.entry(key).or_default();
            value.count += 1;
            value.period += period;
        }
    }

    fn switch_in(&mut self, tid: u32, time: u64) {
        if let Some((out, key)) = self.switched_out.remove(&tid) {
            let value = self.rec.off_cpu_stacks.entry(key).or_default();
            value.count += 1;
            value.period += time.saturating_sub(out);
        }
    }

    fn stack_key(&mut self, s: SampleRecord) -> StackKey {
        let pid = s.id.pid;
        let tid = s.id.tid;
        if pid != 0 && !self.known.contains(&pid) && !self.table.processes.contains_key(&pid) {
            self.table.load_from_proc(pid);
        }
        let mut frames = Vec::with_capacity(s.callchain.len());
        // Split the kernel's callchain into its kernel and user parts.
        let mut fp_user: Vec<(u64, bool)> = Vec::new();
        let mut user = false;
        let mut guest = false;
        let mut first_in_context = true;
        for &ip in &s.callchain {
            if ip >= CONTEXT_MAX {
                user = ip == CONTEXT_USER;
                // Guest or hypervisor contexts: skip their frames.
                guest = ip != CONTEXT_KERNEL && ip != CONTEXT_USER;
                first_in_context = true;
                continue;
            }
            let ret = !first_in_context;
            first_in_context = false;
            if guest {
                continue;
            }
            if user {
                fp_user.push((ip, ret));
            } else {
                frames.push(Frame::Kernel { addr: ip, ret });
            }
        }
        let user_frames = match self.call_graph {
            CallGraph::Fp => fp_user,
            CallGraph::Dwarf | CallGraph::Auto => {
                let dwarf = self.dwarf_unwind(pid, &s);
                // Auto: CFI where it gets further (binaries without frame
                // pointers), the kernel's frame-pointer walk otherwise (code
                // without CFI, or stacks deeper than the copied bytes).
                if self.call_graph == CallGraph::Auto && fp_user.len() > dwarf.len() {
                    fp_user
                } else {
                    dwarf
                }
            }
        };
        for (ip, ret) in user_frames {
            let frame = self.user_frame(pid, ip, ret);
            frames.push(frame);
        }
        if frames.is_empty() {
            frames.push(Frame::Anon {
                pid,
                addr: s.ip,
                ret: false,
            });
        }
        let comm = match self.table.processes.get(&pid) {
            Some(p) if !p.comm.is_empty() => p.comm.clone(),
            _ if pid == 0 => "swapper".to_string(),
            _ => self.table.threads.get(&pid).cloned().unwrap_or_default(),
        };
        let thread = self
            .table
            .threads
            .get(&tid)
            .cloned()
            .unwrap_or_else(|| comm.clone());
        StackKey {
            pid,
            tid,
            comm: self.name(&comm),
            thread_name: self.name(&thread),
            frames,
        }
    }
}

/// Samples `opts.target` until it ends, the duration passes or SIGINT, and
/// returns the aggregated stacks. `progress` is called about twice a second.
pub fn record(
    opts: &Options,
    mut progress: impl FnMut(&Progress),
) -> Result<Recording, SamplerError> {
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
    if opts.call_graph != CallGraph::Fp && !cfg!(target_arch = "x86_64") {
        return Err(SamplerError::Config(
            "CFI (dwarf/auto) unwinding is only implemented for x86_64; use --call-graph fp".into(),
        ));
    }
    let mut opts = opts.clone();
    opts.off_cpu |= opts.wall;
    if opts.call_graph != CallGraph::Fp {
        opts.ring_pages = opts.ring_pages.max(256);
    }
    let opts = &opts;
    let layout = parse::Layout {
        user_regs: if opts.call_graph == CallGraph::Fp {
            0
        } else {
            sys::USER_REGS_MASK.count_ones() as usize
        },
    };
    let mut agg = Aggregator {
        table: ProcessTable::default(),
        rec: Recording {
            frequency: opts.frequency,
            off_cpu: opts.off_cpu || opts.wall,
            wall: opts.wall,
            ..Default::default()
        },
        map_index: HashMap::new(),
        names: HashMap::new(),
        known: Default::default(),
        refreshed: Default::default(),
        call_graph: opts.call_graph,
        unwinder: DwarfUnwinder::new(),
        switched_out: HashMap::new(),
    };
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
    let mut child = None;
    let mut watched_pids = Vec::new();
    let events = match &opts.target {
        Target::Command(argv) => {
            let stopped = launch::spawn_stopped(argv)?;
            cfg.enable_on_exec = true;
            let events =
                open_target_events(opts, &[stopped.pid()], &mut cfg, &mut agg.rec.warnings)?;
            child = Some(stopped);
            events
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
            open_target_events(opts, &tasks, &mut cfg, &mut agg.rec.warnings)?
        }
        Target::AllCpus => {
            cfg.inherit = false;
            let events = open_target_events(opts, &[-1], &mut cfg, &mut agg.rec.warnings)?;
            // Snapshot existing processes; later changes arrive as records.
            for pid in all_pids() {
                agg.table.load_from_proc(pid);
            }
            agg.table.unreadable.clear();
            events
        }
    };

    let started = Instant::now();
    agg.rec.start_unix_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
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

    let mut events = events;
    let raw_fds: Vec<_> = events.rings.iter().map(|r| r.fd().as_raw_fd()).collect();
    let mut pending: Vec<Record> = Vec::new();
    let mut bytes = Vec::new();
    let mut last_progress = Instant::now();
    loop {
        sys::poll_fds(&raw_fds, 100);
        // Records stamped before this instant are already in the buffers we
        // are about to drain, so they can be ordered safely (the margin
        // covers a record being written just as its timestamp is taken).
        let horizon = sys::monotonic_ns().saturating_sub(10_000_000);
        drain(&mut events, layout, &mut bytes, &mut pending);
        process_until(&mut agg, &mut pending, Some(horizon));

        if last_progress.elapsed() >= Duration::from_millis(500) {
            last_progress = Instant::now();
            progress(&Progress {
                elapsed: started.elapsed(),
                samples: agg.rec.samples,
                lost: agg.rec.lost,
            });
        }
        if let Some(pid) = child_pid
            && let Some(status) = launch::wait(pid, true)
        {
            agg.rec.exit_status = Some(status);
            break;
        }
        if !watched_pids.is_empty()
            && watched_pids
                .iter()
                .all(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        {
            break;
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if INTERRUPTED.load(Ordering::SeqCst) && child_pid.is_none() {
            break;
        }
    }
    for fd in events.all_fds() {
        let _ = sys::set_enabled(fd, false);
    }
    drain(&mut events, layout, &mut bytes, &mut pending);
    process_until(&mut agg, &mut pending, None);
    // Tasks still blocked at the end were off-CPU until now.
    let end = sys::monotonic_ns();
    let still_out: Vec<u32> = agg.switched_out.keys().copied().collect();
    for tid in still_out {
        agg.switch_in(tid, end);
    }
    agg.rec.duration_ns = started.elapsed().as_nanos() as i64;
    for pid in std::mem::take(&mut agg.table.unreadable) {
        agg.rec.warnings.push(format!(
            "process {pid} vanished or its /proc entry is unreadable; its user frames are [unknown]"
        ));
    }
    Ok(agg.rec)
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
        pending.extend(
            parse::parse_records(bytes, layout)
                .into_iter()
                .map(|mut r| {
                    if let Record::Sample(s) = &mut r {
                        s.off_cpu = off_cpu;
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
