//! A recording session: choosing what to sample, opening one event per CPU
//! (per thread for `-p`), draining the ring buffers in timestamp order, and
//! turning each sample into a stack of not-yet-symbolized frames attributed
//! to the process image that was mapped when it was taken.

use crate::SamplerError;
use crate::launch;
use crate::parse::{self, Record, SampleId, SampleRecord};
use crate::process::ProcessTable;
use crate::sys::{self, EventConfig, EventKind, RingBuffer};
use crate::tracepoint::{self, STATE_EXITING, SwitchFormat};
use crate::unwind::DwarfUnwinder;
use ember_samples::{Frame, MapInfo, RawEvent, RawSample, RawSwitch, Recording, StackKey};
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

pub use ember_samples::OffCpuSource;

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
    /// Per binary: the first samples whose user instruction is in a binary
    /// compare both methods; the binary keeps frame pointers when their
    /// walk matched CFI's frames inside it in at least 80% of them, CFI
    /// otherwise; binaries without CFI use frame pointers (see
    /// [`crate::unwind::DwarfUnwinder::unwind_auto`]).
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
    /// Also keep every sample and sampled context switch, in time order, in
    /// [`Recording::raw_events`] (for timeline exporters: Perfetto traces,
    /// `perf script` dumps). Costs memory proportional to the event count.
    pub raw_events: bool,
    /// Where off-CPU switches come from.
    pub off_cpu_source: OffCpuSource,
    /// Off-CPU episodes (switch-out to switch-in) shorter than this many
    /// nanoseconds are not counted in [`Recording::off_cpu_stacks`] (raw
    /// switches are kept). 0 counts every episode.
    pub off_cpu_min_ns: u64,
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
            raw_events: false,
            off_cpu_source: OffCpuSource::Auto,
            off_cpu_min_ns: 0,
        }
    }
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
    /// Rings from this index on belong to the off-CPU event.
    off_cpu_from: usize,
    /// The off-CPU event is the tracepoint (its samples carry raw data).
    switch_raw: bool,
}

impl Events {
    fn all_fds(&self) -> impl Iterator<Item = &OwnedFd> {
        self.rings.iter().map(|r| r.fd()).chain(self.extra.iter())
    }
}

/// Opens cpu-clock events and, with `opts.off_cpu`, the `sched_switch`
/// tracepoint or context-switch events (in rings of their own, so their
/// samples can be told apart). Returns the tracepoint layout when used.
fn open_target_events(
    opts: &Options,
    tasks: &[i32],
    cfg: &mut EventConfig,
    warnings: &mut Vec<String>,
) -> Result<(Events, Option<SwitchFormat>), SamplerError> {
    let mut events = open_events(opts, tasks, cfg, warnings)?;
    if !opts.off_cpu {
        return Ok((events, None));
    }
    let mut format = None;
    let mut more = None;
    if opts.off_cpu_source != OffCpuSource::ContextSwitch {
        let tried = if cfg.exclude_kernel {
            // A tracepoint fires in kernel mode: excluded for this user.
            Err("kernel samples are not allowed for this user".to_string())
        } else {
            tracepoint::sched_switch().and_then(|ss| {
                let tp = EventConfig {
                    kind: EventKind::SchedSwitch { id: ss.id },
                    side_band: false,
                    ..*cfg
                };
                open_events_once(opts, tasks, &tp, warnings)
                    .map(|e| (e, ss.format))
                    .map_err(|e| e.to_string())
            })
        };
        match tried {
            Ok((e, f)) => {
                more = Some(e);
                format = Some(f);
            }
            Err(why) if opts.off_cpu_source == OffCpuSource::Auto => warnings.push(format!(
                "sched:sched_switch tracepoint unavailable ({why}); off-CPU time from \
                 context-switch events instead"
            )),
            Err(why) => {
                return Err(SamplerError::Config(format!(
                    "sched:sched_switch tracepoint unavailable: {why}"
                )));
            }
        }
    }
    let more = match more {
        Some(e) => e,
        None => {
            let mut cs = EventConfig {
                kind: EventKind::ContextSwitch,
                side_band: false,
                ..*cfg
            };
            open_events(opts, tasks, &mut cs, warnings)?
        }
    };
    events.off_cpu_from = events.rings.len();
    events.switch_raw = format.is_some();
    events.rings.extend(more.rings);
    events.extra.extend(more.extra);
    Ok((events, format))
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
        switch_raw: false,
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
    known: HashSet<u32>,
    /// Pids whose /proc maps were re-read after an address missed them.
    refreshed: HashSet<u32>,
    call_graph: CallGraph,
    unwinder: DwarfUnwinder,
    /// Tasks that left the CPU: since when their blocked time is not charged yet, when the
    /// episode began, and with which stack.
    switched_out: HashMap<u32, (u64, u64, StackKey)>,
    /// Episodes shorter than this are not counted ([`Options::off_cpu_min_ns`]).
    off_cpu_min_ns: u64,
    /// Keep [`RawEvent`]s.
    raw: bool,
    /// Index of each distinct stack in `rec.raw_stacks`.
    raw_index: HashMap<Vec<Frame>, u32>,
    /// Tids whose EXIT arrived since the last cut, and before it: their
    /// final switch-out is not blocked time, and their state is dropped one
    /// cut after they died (late records of a dying task still find it).
    dead_now: HashSet<u32>,
    dead_prev: HashSet<u32>,
    /// Layout of `sched_switch` records when off-CPU samples come from the
    /// tracepoint.
    switch_format: Option<SwitchFormat>,
    /// The task the last `sched_switch` sample of each CPU put on it, to
    /// tell the switches the tracepoint reported from those it missed.
    tracepoint_next: HashMap<u32, u32>,
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
                self.dead_now.remove(&tid);
                self.dead_prev.remove(&tid);
                self.table.fork(pid, ppid, tid, ptid);
            }
            Record::Exit { pid, tid, .. } => {
                if pid == tid {
                    self.unwinder.forget(pid);
                }
                self.dead_now.insert(tid);
                self.switched_out.remove(&tid);
                self.table.exit(pid, tid);
            }
            Record::Lost { lost, .. } => self.rec.lost += lost,
            Record::Switch { id, out, other } => {
                if !out {
                    self.switch_in(id.tid, id.time);
                    if let Some(prev) = other {
                        self.fill_missed_switch(id, prev);
                    }
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

    /// User frames by CFI, or for `auto` by the rule of the sampled binary
    /// (see [`DwarfUnwinder::unwind_auto`]); `fp` is the kernel's walk.
    fn user_unwind(
        &mut self,
        pid: u32,
        s: &SampleRecord,
        fp: Vec<(u64, bool)>,
    ) -> Vec<(u64, bool)> {
        let Some(start) = crate::arch::start_regs(&s.user_regs) else {
            // No user registers (kernel thread, or none requested).
            return if self.call_graph == CallGraph::Auto {
                fp
            } else {
                Vec::new()
            };
        };
        if pid == 0 {
            return Vec::new();
        }
        // Make sure the mapping under the IP is known before unwinding.
        let _ = self.refresh_if_missing(pid, start.pc);
        let Some(process) = self.table.processes.get(&pid) else {
            return fp;
        };
        if self.call_graph == CallGraph::Auto {
            self.unwinder
                .unwind_auto(pid, process, &s.user_regs, &s.user_stack, fp)
        } else {
            self.unwinder
                .unwind(pid, process, &s.user_regs, &s.user_stack)
        }
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

    fn intern_map(&mut self, info: MapInfo) -> u32 {
        if let Some(&i) = self.map_index.get(&info) {
            return i;
        }
        let i = self.rec.push_map(info.clone());
        self.map_index.insert(info, i);
        i
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
                Frame::User {
                    map: self.intern_map(info),
                    addr: ip,
                    ret,
                }
            }
            None => Frame::Anon { pid, addr: ip, ret },
        }
    }

    fn is_dead(&self, tid: u32) -> bool {
        self.dead_now.contains(&tid) || self.dead_prev.contains(&tid)
    }

    fn raw_stack(&mut self, frames: &[Frame]) -> u32 {
        if let Some(&i) = self.raw_index.get(frames) {
            return i;
        }
        let i = self.rec.push_raw_stack(frames.to_vec());
        self.raw_index.insert(frames.to_vec(), i);
        i
    }

    fn sample(&mut self, mut s: SampleRecord) {
        let time = s.id.time;
        let cpu = s.id.cpu;
        let off_cpu = s.off_cpu;
        let period = s.period;
        // (prev_comm, prev_state, next_tid, next_comm) from the tracepoint.
        let mut switch: Option<(Arc<str>, u64, u32, Arc<str>)> = None;
        if off_cpu {
            let raw = std::mem::take(&mut s.raw);
            if let Some(format) = self.switch_format
                && let Some(f) = format.decode(&raw)
            {
                // The task taking the CPU stops being off-CPU.
                self.switch_in(f.next_tid, time);
                self.tracepoint_next.insert(cpu, f.next_tid);
                if f.prev_state & STATE_EXITING != 0 {
                    return;
                }
                switch = Some((
                    self.name(&String::from_utf8_lossy(f.prev_comm)),
                    f.prev_state,
                    f.next_tid,
                    self.name(&String::from_utf8_lossy(f.next_comm)),
                ));
            }
            if s.id.tid == 0 {
                // The idle task is never "blocked", but a timeline needs to
                // see the CPU leave it.
                if self.raw
                    && let Some((prev_comm, state, next_tid, next_comm)) = switch
                {
                    let stack = self.raw_stack(&[]);
                    let next_pid = self.table.pid_of(next_tid);
                    self.rec.push_raw_event(RawEvent::Switch(RawSwitch {
                        time_ns: time,
                        cpu,
                        prev_pid: 0,
                        prev_tid: 0,
                        prev_comm,
                        prev_state: Some(state),
                        prev_stack: stack,
                        next_pid,
                        next_tid: Some(next_tid),
                        next_comm: Some(next_comm),
                    }));
                }
                return;
            }
            // A dying task's last switch-out: it never blocks, it is gone.
            if self.is_dead(s.id.tid) {
                return;
            }
            self.rec.off_cpu_switches += 1;
        } else {
            self.rec.samples += 1;
        }
        let key = self.stack_key(s);
        if self.raw {
            let stack = self.raw_stack(&key.frames);
            let event = if off_cpu {
                let (prev_comm, prev_state, next) = match switch {
                    Some((prev_comm, state, next_tid, next_comm)) => {
                        let next_pid = self.table.pid_of(next_tid);
                        (
                            prev_comm,
                            Some(state),
                            Some((next_pid, next_tid, next_comm)),
                        )
                    }
                    None => (key.thread_name.clone(), None, None),
                };
                RawEvent::Switch(RawSwitch {
                    time_ns: time,
                    cpu,
                    prev_pid: key.pid,
                    prev_tid: key.tid,
                    prev_comm,
                    prev_state,
                    prev_stack: stack,
                    next_pid: next.as_ref().and_then(|n| n.0),
                    next_tid: next.as_ref().map(|n| n.1),
                    next_comm: next.map(|n| n.2),
                })
            } else {
                RawEvent::Sample(RawSample {
                    time_ns: time,
                    cpu,
                    pid: key.pid,
                    tid: key.tid,
                    stack,
                    weight_ns: period,
                })
            };
            self.rec.push_raw_event(event);
        }
        if off_cpu {
            // Blocked time is known when the task comes back (SWITCH in).
            self.switched_out.insert(key.tid, (time, time, key));
        } else {
            self.rec.add_stack(key, 1, period);
        }
    }

    /// A CPU-wide PERF_RECORD_SWITCH says task `id` arrived from `prev`.
    /// When the tracepoint reported no such switch (see
    /// [`EventKind::SchedSwitch`] for when it does not), the raw timeline
    /// gets one built from this record, so a trace does not show the CPU
    /// idle while the task ran. Its prev stack and state are unknown.
    fn fill_missed_switch(&mut self, id: SampleId, (prev_pid, prev_tid): (u32, u32)) {
        if !self.raw
            || self.switch_format.is_none()
            || self.tracepoint_next.get(&id.cpu) == Some(&id.tid)
        {
            return;
        }
        self.tracepoint_next.insert(id.cpu, id.tid);
        let prev_comm = if prev_tid == 0 {
            self.name("swapper")
        } else {
            let comm = self
                .table
                .threads
                .get(&prev_tid)
                .cloned()
                .unwrap_or_default();
            self.name(&comm)
        };
        let next_comm = self.table.threads.get(&id.tid).cloned().unwrap_or_default();
        let next_comm = self.name(&next_comm);
        let prev_stack = self.raw_stack(&[]);
        self.rec.push_raw_event(RawEvent::Switch(RawSwitch {
            time_ns: id.time,
            cpu: id.cpu,
            prev_pid,
            prev_tid,
            prev_comm,
            prev_state: None,
            prev_stack,
            next_pid: Some(id.pid),
            next_tid: Some(id.tid),
            next_comm: Some(next_comm),
        }));
    }

    fn switch_in(&mut self, tid: u32, time: u64) {
        if let Some((uncharged, began, key)) = self.switched_out.remove(&tid)
            && time.saturating_sub(began) >= self.off_cpu_min_ns
        {
            self.rec.add_off_cpu(key, 1, time.saturating_sub(uncharged));
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
            CallGraph::Dwarf | CallGraph::Auto => self.user_unwind(pid, &s, fp_user),
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

/// Whether the sampled target is still there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still sampling.
    Running,
    /// The launched command exited, or every `-p` process is gone (a
    /// whole-host session never ends by itself). Later [`Session::poll`]s
    /// only drain what is left.
    TargetGone,
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
        let mut agg = Aggregator {
            table: ProcessTable::default(),
            rec: Recording::default(),
            map_index: HashMap::new(),
            names: HashMap::new(),
            known: Default::default(),
            refreshed: Default::default(),
            call_graph: opts.call_graph,
            unwinder: DwarfUnwinder::new(),
            switched_out: HashMap::new(),
            off_cpu_min_ns: opts.off_cpu_min_ns,
            raw: opts.raw_events,
            raw_index: HashMap::new(),
            dead_now: HashSet::new(),
            dead_prev: HashSet::new(),
            switch_format: None,
            tracepoint_next: HashMap::new(),
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
        let agg = &mut self.agg;
        let start = agg.rec.start_monotonic_ns;
        let end = end.max(start);
        // Blocked tasks: charge the time up to the cut here (the episode
        // is counted once, in the recording where it ends). An episode still
        // under the minimum duration is charged later, whole, if it reaches it.
        let mut blocked: Vec<(u32, (u64, u64, StackKey))> = agg.switched_out.drain().collect();
        for (_, (uncharged, began, key)) in &mut blocked {
            if end.saturating_sub(*began) >= agg.off_cpu_min_ns {
                agg.rec
                    .add_off_cpu(key.clone(), 0, end.saturating_sub(*uncharged));
                *uncharged = end;
            }
        }
        for pid in std::mem::take(&mut agg.table.unreadable) {
            agg.rec.warnings.push(format!(
                "process {pid} vanished or its /proc entry is unreadable; its user frames are [unknown]"
            ));
        }
        let next = agg
            .rec
            .next_cut(self.start_unix_ns + (end - self.start_mono_ns) as i64, end);
        let mut rec = std::mem::replace(&mut agg.rec, next);
        rec.duration_ns = (end - start) as i64;
        if agg.call_graph == CallGraph::Auto {
            rec.auto_choices = agg.unwinder.auto_choices();
        }
        // Ordered on arrival; a record later than the horizon margin would
        // be the only exception, so make the order a guarantee.
        rec.sort_raw_events();
        agg.map_index.clear();
        agg.raw_index.clear();
        agg.names.clear();
        // Still-blocked tasks continue in the next recording: move their
        // stacks over (map indexes are per recording).
        for (tid, (uncharged, began, mut key)) in blocked {
            if agg.is_dead(tid) || !std::path::Path::new(&format!("/proc/{tid}")).exists() {
                continue;
            }
            for frame in &mut key.frames {
                if let Frame::User { map, .. } = frame
                    && let Some(info) = rec.map(*map)
                {
                    *map = agg.intern_map(info.clone());
                }
            }
            agg.switched_out.insert(tid, (uncharged, began, key));
        }
        // Forget tasks that died before the previous cut.
        let dead = std::mem::replace(&mut agg.dead_prev, std::mem::take(&mut agg.dead_now));
        for tid in dead {
            if agg.table.forget(tid) {
                agg.known.remove(&tid);
                agg.refreshed.remove(&tid);
                agg.unwinder.forget(tid);
            }
        }
        agg.table.release_unused_paths();
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
