//! The subset of Perfetto's trace protos that Ember reads and writes, as prost messages with
//! Perfetto's field numbers (`protos/perfetto/trace/**`; no `protoc` needed).
//!
//! Members of `TracePacket`'s `data` oneof are plain optional fields: on the wire a oneof
//! member is an ordinary field. Scalars are proto3-style plain values: Perfetto treats an
//! absent scalar as 0 and interning ids start at 1, so "unset" and 0 read the same. Fields
//! not listed here are skipped when reading.
//!
//! The messages are declared through `messages!`, one line per field
//! (`tag name: RustType [prost kind] "doc"`), so the schema reads like the `.proto` it
//! mirrors.

/// Declares prost messages from one line per field.
macro_rules! messages {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident { $( $tag:literal $field:ident : $ty:ty [$($kind:tt)*] $fdoc:literal ),* $(,)? }
    )*) => {$(
        $(#[doc = $doc])*
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct $name {
            $( #[doc = $fdoc] #[prost($($kind)*, tag = $tag)] pub $field: $ty, )*
        }
    )*};
}

messages! {
    /// `perfetto.protos.Trace`: the file is this message, packets one after another.
    Trace {
        1 packet: Vec<TracePacket> [message, repeated] "Packets in order.",
    }

    /// `perfetto.protos.TracePacket` (subset).
    TracePacket {
        8 timestamp: u64 [uint64] "Timestamp in nanoseconds (the trace's clock).",
        10 trusted_packet_sequence_id: u32 [uint32] "Writer sequence the packet belongs to.",
        12 interned_data: Option<InternedData> [message, optional] "Interned strings, frames, callstacks of the sequence.",
        13 sequence_flags: u32 [uint32] "`SEQ_INCREMENTAL_STATE_CLEARED` (1) | `SEQ_NEEDS_INCREMENTAL_STATE` (2).",
        41 incremental_state_cleared: bool [bool] "The older form of `SEQ_INCREMENTAL_STATE_CLEARED`.",
        59 trace_packet_defaults: Option<TracePacketDefaults> [message, optional] "Defaults of the sequence (the perf timebase).",
        87 first_packet_on_sequence: bool [bool] "Set on the first packet of a sequence.",
        1 ftrace_events: Option<FtraceEventBundle> [message, optional] "Kernel ftrace events of one CPU.",
        2 process_tree: Option<ProcessTree> [message, optional] "Processes and threads.",
        37 profile_packet: Option<ProfilePacket> [message, optional] "A heapprofd dump (or part of one).",
        50 compressed_packets: Vec<u8> [bytes = "vec"] "zlib-deflated `Trace` bytes holding more packets.",
        54 streaming_profile_packet: Option<StreamingProfilePacket> [message, optional] "Chrome's sampler.",
        66 perf_sample: Option<PerfSample> [message, optional] "One perf sample (traced_perf).",
    }

    /// `perfetto.protos.TracePacketDefaults` (subset).
    TracePacketDefaults {
        12 perf_sample_defaults: Option<PerfSampleDefaults> [message, optional] "Defaults of `PerfSample`s.",
    }

    /// `perfetto.protos.PerfSampleDefaults` (subset).
    PerfSampleDefaults {
        1 timebase: Option<Timebase> [message, optional] "What one sample stands for.",
    }

    /// `perfetto.protos.PerfEvents.Timebase` (subset).
    Timebase {
        1 period: u64 [uint64] "Sample every this many counter events.",
        2 frequency: u64 [uint64] "Or this many samples a second.",
        4 counter: i32 [int32] "`PerfEvents.Counter` (`SW_CPU_CLOCK` = 1, `SW_TASK_CLOCK` = 3 count nanoseconds).",
        10 name: String [string] "Display name.",
    }

    /// `perfetto.protos.InternedData` (subset).
    InternedData {
        5 function_names: Vec<InternedString> [message, repeated] "Function names.",
        6 frames: Vec<Frame> [message, repeated] "Frames.",
        7 callstacks: Vec<Callstack> [message, repeated] "Callstacks.",
        16 build_ids: Vec<InternedString> [message, repeated] "Build ids.",
        17 mapping_paths: Vec<InternedString> [message, repeated] "Mapping path components.",
        19 mappings: Vec<Mapping> [message, repeated] "Mappings.",
    }

    /// `perfetto.protos.InternedString`.
    InternedString {
        1 iid: u64 [uint64] "Interning id.",
        2 str: Vec<u8> [bytes = "vec"] "The bytes.",
    }

    /// `perfetto.protos.Frame` (subset).
    Frame {
        1 iid: u64 [uint64] "Interning id.",
        2 function_name_id: u64 [uint64] "iid of the function name (0: none).",
        3 mapping_id: u64 [uint64] "iid of the mapping.",
        4 rel_pc: u64 [uint64] "Program counter relative to the mapping's file.",
    }

    /// `perfetto.protos.Mapping` (subset).
    Mapping {
        1 iid: u64 [uint64] "Interning id.",
        2 build_id: u64 [uint64] "iid of the build id.",
        3 start_offset: u64 [uint64] "File offset of `start`.",
        4 start: u64 [uint64] "Start address.",
        5 end: u64 [uint64] "End address.",
        7 path_string_ids: Vec<u64> [uint64, repeated, packed = "false"] "Path components (joined with `/`).",
    }

    /// `perfetto.protos.Callstack`.
    Callstack {
        1 iid: u64 [uint64] "Interning id.",
        2 frame_ids: Vec<u64> [uint64, repeated, packed = "false"] "Frame iids, outermost (root) first.",
    }

    /// `perfetto.protos.PerfSample` (subset).
    PerfSample {
        1 cpu: u32 [uint32] "CPU.",
        2 pid: u32 [uint32] "Process id.",
        3 tid: u32 [uint32] "Thread id.",
        4 callstack_iid: u64 [uint64] "Interned callstack (0: none, e.g. a skipped sample).",
        5 cpu_mode: i32 [int32] "`Profiling.CpuMode`: 1 kernel, 2 user.",
        6 timebase_count: u64 [uint64] "Timebase counter value.",
    }

    /// `perfetto.protos.ProfilePacket` (subset): heapprofd. Older traces intern in the
    /// packet's own tables (`strings` serve names, paths and build ids alike).
    ProfilePacket {
        1 strings: Vec<InternedString> [message, repeated] "Strings.",
        2 frames: Vec<Frame> [message, repeated] "Frames.",
        3 callstacks: Vec<Callstack> [message, repeated] "Callstacks.",
        4 mappings: Vec<Mapping> [message, repeated] "Mappings.",
        5 process_dumps: Vec<ProcessHeapSamples> [message, repeated] "One dump per process and heap.",
        6 continued: bool [bool] "The dump goes on in the next packet.",
        7 index: u64 [uint64] "Position of the packet in its dump.",
    }

    /// `perfetto.protos.ProfilePacket.ProcessHeapSamples` (subset).
    ProcessHeapSamples {
        1 pid: u64 [uint64] "Process id.",
        2 samples: Vec<HeapSample> [message, repeated] "Per callstack.",
        9 timestamp: u64 [uint64] "When the dump was taken.",
        11 heap_name: String [string] "Heap (`libc.malloc`, `com.android.art`, a custom heap).",
        12 sampling_interval_bytes: u64 [uint64] "Mean bytes between samples.",
    }

    /// `perfetto.protos.ProfilePacket.HeapSample` (subset). Values are totals since the
    /// profile started, so a later dump of the same process and heap supersedes an earlier one.
    HeapSample {
        1 callstack_id: u64 [uint64] "Interned callstack.",
        2 self_allocated: u64 [uint64] "Bytes allocated.",
        3 self_freed: u64 [uint64] "Bytes freed.",
        5 alloc_count: u64 [uint64] "Allocations.",
        6 free_count: u64 [uint64] "Frees.",
        8 self_max: u64 [uint64] "`dump_at_max` mode: bytes in use at the peak.",
        9 self_max_count: u64 [uint64] "`dump_at_max` mode: allocations in use at the peak.",
    }

    /// `perfetto.protos.StreamingProfilePacket`: Chrome's sampling profiler.
    StreamingProfilePacket {
        1 callstack_iid: Vec<u64> [uint64, repeated, packed = "false"] "One interned callstack a sample.",
        2 timestamp_delta_us: Vec<i64> [int64, repeated, packed = "false"] "Time since the previous sample.",
    }

    /// `perfetto.protos.ProcessTree` (subset).
    ProcessTree {
        1 processes: Vec<Process> [message, repeated] "Processes.",
        2 threads: Vec<Thread> [message, repeated] "Threads.",
    }

    /// `perfetto.protos.ProcessTree.Process` (subset).
    Process {
        1 pid: i32 [int32] "Process id.",
        2 ppid: i32 [int32] "Parent process id.",
        3 cmdline: Vec<String> [string, repeated] "Command line (or only the comm).",
        9 cmdline_is_comm: bool [bool] "`cmdline` holds only the comm.",
    }

    /// `perfetto.protos.ProcessTree.Thread` (subset).
    Thread {
        1 tid: i32 [int32] "Thread id.",
        2 name: String [string] "Thread name.",
        3 tgid: i32 [int32] "Owning process id.",
    }

    /// `perfetto.protos.FtraceEventBundle` (subset).
    FtraceEventBundle {
        1 cpu: u32 [uint32] "CPU of all events.",
        2 event: Vec<FtraceEvent> [message, repeated] "Events in time order.",
    }

    /// `perfetto.protos.FtraceEvent` (subset).
    FtraceEvent {
        1 timestamp: u64 [uint64] "Timestamp in nanoseconds.",
        2 pid: u32 [uint32] "Thread that emitted the event.",
        4 sched_switch: Option<SchedSwitchFtraceEvent> [message, optional] "The switch.",
    }

    /// `perfetto.protos.SchedSwitchFtraceEvent`.
    SchedSwitchFtraceEvent {
        1 prev_comm: String [string] "Name of the thread leaving.",
        2 prev_pid: i32 [int32] "Its tid.",
        3 prev_prio: Option<i32> [int32, optional] "Its priority.",
        4 prev_state: Option<i64> [int64, optional] "Its state.",
        5 next_comm: String [string] "Name of the thread entering.",
        6 next_pid: i32 [int32] "Its tid.",
        7 next_prio: Option<i32> [int32, optional] "Its priority.",
    }
}

/// `TracePacket.sequence_flags`: the sequence's interned data and defaults start afresh here.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: the packet refers to interned data of its sequence.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
/// `Profiling.CpuMode.MODE_KERNEL`.
pub const CPU_MODE_KERNEL: i32 = 1;
/// `Profiling.CpuMode.MODE_USER`.
pub const CPU_MODE_USER: i32 = 2;
/// `PerfEvents.Counter.SW_CPU_CLOCK` (counts nanoseconds).
pub const COUNTER_SW_CPU_CLOCK: i32 = 1;
/// `PerfEvents.Counter.SW_TASK_CLOCK` (counts nanoseconds).
pub const COUNTER_SW_TASK_CLOCK: i32 = 3;
