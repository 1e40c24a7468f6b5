//! What a session samples and how: the target, the unwinding method, the options, and the
//! live figures and status a running session reports.

use ember_samples::OffCpuSource;
use std::ffi::OsString;
use std::time::Duration;

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
    /// Frame pointers, walked by the kernel. The walk ends at the first function without
    /// a frame pointer: on most distributions glibc's start-up (`__libc_start_call_main`),
    /// so `_start` is not reached, as with `perf --call-graph fp`.
    Fp,
    /// CFI (`.eh_frame`/`.debug_frame`) over a copy of the user stack.
    Dwarf,
    /// Per binary: the first samples whose user instruction is in a binary
    /// compare both methods; the binary keeps frame pointers when their
    /// walk matched CFI's frames inside it in at least 80% of them, CFI
    /// otherwise; binaries without CFI use frame pointers. A frame-pointer walk is handed
    /// over to CFI at its first frame in a binary not decided for frame pointers, so stacks
    /// still reach `_start` through a glibc built without them (see
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
    /// [`Recording::raw_events`](ember_samples::Recording::raw_events) (for timeline exporters: Perfetto traces,
    /// `perf script` dumps). Costs memory proportional to the event count.
    pub raw_events: bool,
    /// Where off-CPU switches come from.
    pub off_cpu_source: OffCpuSource,
    /// Off-CPU episodes (switch-out to switch-in) shorter than this many
    /// nanoseconds are not counted in [`Recording::off_cpu_stacks`](ember_samples::Recording::off_cpu_stacks) (raw
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

/// Whether the sampled target is still there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Still sampling.
    Running,
    /// The launched command exited, or every `-p` process is gone (a
    /// whole-host session never ends by itself). Later [`Session::poll`](crate::Session::poll)s
    /// only drain what is left.
    TargetGone,
}
