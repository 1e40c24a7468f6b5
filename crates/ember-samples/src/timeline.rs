//! The exporters' input: symbolized, time-ordered samples and scheduler
//! switches, independent of how the sampler produced them (the agent converts
//! the sampler's raw events into these).

use std::sync::Arc;

/// One symbolized stack frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Instruction address (as sampled; return addresses for callers).
    pub address: u64,
    /// Function name, demangled; empty when the address could not be
    /// symbolized.
    pub function: Arc<str>,
    /// Offset of `address` inside `function`, when known.
    pub offset: Option<u64>,
    /// Binary path, `[kernel.kallsyms]`, a JIT map, or `[unknown]`.
    pub module: Arc<str>,
}

impl Frame {
    /// A frame whose function is known.
    pub fn known(address: u64, function: &str, offset: u64, module: &str) -> Self {
        Frame {
            address,
            function: Arc::from(function),
            offset: Some(offset),
            module: Arc::from(module),
        }
    }

    /// A frame that could not be symbolized.
    pub fn unknown(address: u64, module: &str) -> Self {
        Frame {
            address,
            function: Arc::from(""),
            offset: None,
            module: Arc::from(module),
        }
    }

    /// Whether this frame is in the kernel.
    pub fn is_kernel(&self) -> bool {
        self.module.starts_with("[kernel")
    }
}

/// One CPU sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Sample time in nanoseconds (the sampler's perf clock).
    pub time_ns: u64,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name (comm).
    pub comm: Arc<str>,
    /// Callchain, leaf (innermost) first.
    pub frames: Vec<Frame>,
}

/// One `sched_switch`: `prev` leaves `cpu`, `next` starts running on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedSwitch {
    /// Switch time in nanoseconds (the same clock as [`Sample::time_ns`]).
    pub time_ns: u64,
    /// CPU of the switch.
    pub cpu: u32,
    /// Thread id leaving the CPU (ftrace calls it a pid).
    pub prev_pid: i32,
    /// Its name.
    pub prev_comm: Arc<str>,
    /// Its kernel priority, when known.
    pub prev_prio: Option<i32>,
    /// Its state when leaving (0 = runnable/preempted, 1 = S, 2 = D, ...),
    /// when known.
    pub prev_state: Option<i64>,
    /// Thread id entering the CPU.
    pub next_pid: i32,
    /// Its name.
    pub next_comm: Arc<str>,
    /// Its kernel priority, when known.
    pub next_prio: Option<i32>,
}

/// An event for the Perfetto ring buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A CPU sample.
    Sample(Sample),
    /// A scheduler switch.
    Switch(SchedSwitch),
}

impl Event {
    /// Event time in nanoseconds.
    pub fn time_ns(&self) -> u64 {
        match self {
            Event::Sample(s) => s.time_ns,
            Event::Switch(s) => s.time_ns,
        }
    }

    /// Approximate memory the event holds, for sizing the ring buffer the
    /// way `buffers.size_kb` sizes Perfetto's.
    pub fn approx_bytes(&self) -> usize {
        let base = std::mem::size_of::<Event>();
        match self {
            Event::Sample(s) => {
                base + s.comm.len() + s.frames.len() * (std::mem::size_of::<Frame>())
            }
            Event::Switch(s) => base + s.prev_comm.len() + s.next_comm.len(),
        }
    }
}
