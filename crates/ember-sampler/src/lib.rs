//! Source: Linux `perf_event_open` sampling and unwinding: capture only.
//!
//! Pipeline: [`session::record`] opens a software `cpu-clock` event per CPU
//! (for a launched command, existing pids, or the whole host), drains the
//! ring buffers and aggregates unwound callchains into an
//! [`ember_samples::Recording`]. Everything done with a recording afterwards
//! (symbolizing, pprof, `perf script`, merging, splitting per process) belongs
//! to `ember-samples`.
//!
//! Long-running collectors (the agent) use a [`session::Session`] instead:
//! `start`, `poll` in a loop, `cut` a recording per interval;
//! `record` is that loop run once. Off-CPU samples come from the
//! `sched:sched_switch` tracepoint ([`tracepoint`]); user stacks are unwound
//! by the kernel's frame-pointer walk or by CFI ([`unwind`]), whose
//! architecture-specific parts live in [`arch`].

#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
pub mod arch;
pub mod launch;
pub mod parse;
pub mod process;
pub mod session;
pub mod sys;
pub mod tracepoint;
pub mod unwind;

pub use session::{
    CallGraph, OffCpuSource, Options, Progress, Session, Status, Target, install_interrupt_handler,
    record,
};

/// Errors of the sampler. Messages say what to change, not just the errno.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// The kernel refused perf_event_open for lack of privilege.
    #[error(
        "permission denied opening {what} (kernel.perf_event_paranoid = {paranoid}). \
         Run as root or with CAP_PERFMON, or allow unprivileged users to profile their own \
         processes with kernel stacks: sudo sysctl -w kernel.perf_event_paranoid=1 \
         (whole-host -a sampling needs: sudo sysctl -w kernel.perf_event_paranoid=0)"
    )]
    Permission {
        /// The event that was refused.
        what: String,
        /// Current value of /proc/sys/kernel/perf_event_paranoid.
        paranoid: String,
    },
    /// perf_event_open failed for another reason.
    #[error("cannot open {0}: {1}")]
    Open(String, #[source] std::io::Error),
    /// Mapping a ring buffer failed.
    #[error(
        "cannot mmap the perf ring buffer: {0} (lower the buffer size or raise \
         kernel.perf_event_mlock_kb)"
    )]
    Mmap(#[source] std::io::Error),
    /// Creating a pipe for the launch handshake failed.
    #[error("cannot create a pipe: {0}")]
    Pipe(#[source] std::io::Error),
    /// The command could not be started.
    #[error("cannot run {0}: {1}")]
    Launch(String, #[source] std::io::Error),
    /// A pid given with -p does not exist.
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    /// Invalid options.
    #[error("{0}")]
    Config(String),
}
