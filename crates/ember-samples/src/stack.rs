//! The not-yet-symbolized stacks of a recording: frames (kernel, user inside a mapping, or
//! anonymous), the mappings user frames point into, and the aggregation key and totals.

use std::sync::Arc;

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
        /// Index into [`Recording::maps`](crate::Recording::maps).
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
