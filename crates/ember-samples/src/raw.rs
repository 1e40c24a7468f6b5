//! The time-ordered timeline a recording keeps when asked to (the sampler's `raw_events`
//! option): every on-CPU sample and every sampled context switch, each pointing at one of the
//! recording's distinct raw stacks.

use std::sync::Arc;

/// One event of the ordered timeline kept with the sampler's `raw_events` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawEvent {
    /// A cpu-clock sample.
    Sample(RawSample),
    /// A task left a CPU.
    Switch(RawSwitch),
}

impl RawEvent {
    /// CLOCK_MONOTONIC nanoseconds of the event.
    pub fn time_ns(&self) -> u64 {
        match self {
            RawEvent::Sample(s) => s.time_ns,
            RawEvent::Switch(s) => s.time_ns,
        }
    }
}

/// One on-CPU sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSample {
    /// CLOCK_MONOTONIC nanoseconds (the perf events are opened with
    /// `use_clockid = CLOCK_MONOTONIC`, so this is also perf's clock here).
    pub time_ns: u64,
    /// CPU the sample was taken on.
    pub cpu: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Index into [`Recording::raw_stacks`](crate::Recording::raw_stacks).
    pub stack: u32,
    /// CPU nanoseconds the sample stands for (the cpu-clock period).
    pub weight_ns: u64,
}

/// A context switch: `prev` leaves the CPU, `next` (when known) takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSwitch {
    /// CLOCK_MONOTONIC nanoseconds.
    pub time_ns: u64,
    /// CPU of the switch.
    pub cpu: u32,
    /// Process id of the task leaving.
    pub prev_pid: u32,
    /// Thread id of the task leaving.
    pub prev_tid: u32,
    /// Name of the task leaving.
    pub prev_comm: Arc<str>,
    /// Kernel task state of the task leaving (`prev_state` of
    /// `sched:sched_switch`, 0 = runnable/preempted); `None` when the
    /// context-switch fallback is used, which does not report it.
    pub prev_state: Option<u64>,
    /// Stack of the task leaving (index into [`Recording::raw_stacks`](crate::Recording::raw_stacks)).
    pub prev_stack: u32,
    /// Process id of the task arriving, when known.
    pub next_pid: Option<u32>,
    /// Thread id of the task arriving, when known.
    pub next_tid: Option<u32>,
    /// Name of the task arriving, when known.
    pub next_comm: Option<Arc<str>>,
}

impl RawSwitch {
    /// `prev_state` as `perf script`/ftrace print it: `R` (runnable), `S`,
    /// `D`, `T`, `t`, `X`, `Z`, `P`, `I`, joined with `|`, and `+` when the
    /// task was preempted; `?` when unknown.
    pub fn prev_state_str(&self) -> String {
        let Some(state) = self.prev_state else {
            return "?".into();
        };
        // Bits of TASK_REPORT (include/linux/sched.h, stable since 4.14);
        // TASK_REPORT_MAX (0x100) marks a preempted runnable task.
        const NAMES: [(u64, &str); 8] = [
            (0x01, "S"),
            (0x02, "D"),
            (0x04, "T"),
            (0x08, "t"),
            (0x10, "X"),
            (0x20, "Z"),
            (0x40, "P"),
            (0x80, "I"),
        ];
        let parts: Vec<&str> = NAMES
            .iter()
            .filter(|(bit, _)| state & bit != 0)
            .map(|&(_, n)| n)
            .collect();
        let mut out = if parts.is_empty() {
            "R".to_string()
        } else {
            parts.join("|")
        };
        if state & 0x100 != 0 {
            out.push('+');
        }
        out
    }
}
