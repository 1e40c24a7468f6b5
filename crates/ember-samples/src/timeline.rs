//! A recording's timeline, symbolized: time-ordered samples and scheduler switches with
//! their frames named ([`timeline`] builds them from a [`Recording`] kept with raw events).
//! This is what the bucket exporters (perf script dumps, Perfetto traces) consume.

use crate::raw::RawEvent;
use crate::recording::Recording;
use crate::resolve::{FrameInfo, Resolver};
use crate::stack::Frame as RawFrame;
use crate::symbolize::Symbolizer;
use std::collections::HashMap;
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

/// Instruction address of a raw frame.
pub(crate) fn address(f: &RawFrame) -> u64 {
    match *f {
        RawFrame::Kernel { addr, .. }
        | RawFrame::User { addr, .. }
        | RawFrame::Anon { addr, .. } => addr,
    }
}

/// Appends the frames `perf script` prints for one raw frame: its inlined callees as frames
/// of their own at the same address (innermost first, no offset), then the function itself.
pub(crate) fn push_frames(raw: &RawFrame, info: &FrameInfo, out: &mut Vec<Frame>) {
    let addr = address(raw);
    for inl in info.inlined.iter() {
        out.push(Frame {
            address: addr,
            function: inl.name.clone(),
            offset: None,
            module: info.module.clone(),
        });
    }
    out.push(Frame {
        address: addr,
        function: if info.known {
            info.name.clone()
        } else {
            Arc::from("")
        },
        offset: if info.known { info.sym_offset } else { None },
        module: info.module.clone(),
    });
}

/// The events of `rec` (empty unless it was recorded with
/// `Options::raw_events`), symbolized with `sym` (keep one symbolizer for the
/// whole run: its caches are per binary). Inlined functions become frames of
/// their own at the same address, innermost first, as `perf script` prints
/// them.
pub fn timeline(rec: &Recording, sym: &mut Symbolizer) -> Vec<Event> {
    let mut resolver = Resolver::new(rec, sym);
    let stacks: Vec<Vec<Frame>> = rec
        .raw_stacks()
        .iter()
        .map(|stack| {
            let mut out = Vec::with_capacity(stack.len());
            for raw in stack {
                push_frames(raw, &resolver.resolve(raw), &mut out);
            }
            out
        })
        .collect();
    let mut names: HashMap<u32, Arc<str>> = HashMap::new();
    for (key, _, _) in rec.all_stacks() {
        let name = if key.thread_name.is_empty() {
            &key.comm
        } else {
            &key.thread_name
        };
        names.entry(key.tid).or_insert_with(|| name.clone());
    }
    for e in rec.raw_events() {
        if let RawEvent::Switch(s) = e {
            names
                .entry(s.prev_tid)
                .or_insert_with(|| s.prev_comm.clone());
        }
    }
    let empty: Arc<str> = Arc::from("");
    rec.raw_events()
        .iter()
        .map(|e| match e {
            RawEvent::Sample(s) => Event::Sample(Sample {
                time_ns: s.time_ns,
                cpu: s.cpu,
                pid: s.pid,
                tid: s.tid,
                comm: names.get(&s.tid).cloned().unwrap_or_else(|| empty.clone()),
                frames: stacks.get(s.stack as usize).cloned().unwrap_or_default(),
            }),
            RawEvent::Switch(s) => Event::Switch(SchedSwitch {
                time_ns: s.time_ns,
                cpu: s.cpu,
                prev_pid: s.prev_tid as i32,
                prev_comm: s.prev_comm.clone(),
                prev_prio: None,
                prev_state: s.prev_state.map(|v| v as i64),
                next_pid: s.next_tid.map_or(-1, |t| t as i32),
                next_comm: s.next_comm.clone().unwrap_or_else(|| empty.clone()),
                next_prio: None,
            }),
        })
        .collect()
}
