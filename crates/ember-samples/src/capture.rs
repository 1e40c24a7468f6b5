//! What the capture reports about itself along with a recording: how a launched command
//! ended, where off-CPU time came from, and what `--call-graph auto` decided per binary.
//! Defined here (not in the sampler) because they are part of the recording.

use std::sync::Arc;

/// How a launched child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// The event off-CPU time is measured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffCpuSource {
    /// The `sched:sched_switch` tracepoint when tracefs is there (mounted
    /// by Ember when root and missing) and the kernel allows it, otherwise
    /// context-switch events with a warning.
    #[default]
    Auto,
    /// The tracepoint or an error.
    Tracepoint,
    /// The software `context-switches` event plus switch records (no task
    /// state, no next task).
    ContextSwitch,
}

/// The unwinding method `auto` settled on for one binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// The kernel's frame-pointer walk.
    FramePointer,
    /// CFI over the copied stack.
    Cfi,
}

/// A decision of `auto` for one binary (reported with each recording).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoChoice {
    /// Path the binary was first seen at.
    pub path: Arc<str>,
    /// Build-id (lowercase hex), empty when the binary has none.
    pub build_id: String,
    /// The method used for samples whose leaf is in this binary.
    pub method: Method,
    /// Why: "no CFI", or "frame pointers matched CFI in N/M samples".
    pub reason: String,
}
