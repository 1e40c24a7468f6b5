//! Perfetto traces in their native protobuf format: hand-written prost
//! messages for the subset the daemon emits (field numbers from Perfetto's
//! `protos/perfetto/trace/**`), and [`build_trace`], which turns buffered
//! samples and scheduler switches into one trace with a process tree,
//! interned callstacks, `PerfSample`s and `sched_switch` ftrace bundles.

use ember_samples::timeline::{Event, Frame, Sample, SchedSwitch};
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Wire types of the emitted subset. Oneof members of `TracePacket` are
/// plain optional fields: the encoding is the same when one is set.
pub mod proto {
    /// `perfetto.protos.Trace`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Trace {
        /// Packets in order.
        #[prost(message, repeated, tag = "1")]
        pub packet: Vec<TracePacket>,
    }

    /// `perfetto.protos.TracePacket` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacket {
        /// Timestamp in nanoseconds.
        #[prost(uint64, optional, tag = "8")]
        pub timestamp: Option<u64>,
        /// Writer sequence the packet belongs to.
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
        /// Interned strings, frames and callstacks of the sequence.
        #[prost(message, optional, tag = "12")]
        pub interned_data: Option<InternedData>,
        /// `SEQ_INCREMENTAL_STATE_CLEARED` (1) / `SEQ_NEEDS_INCREMENTAL_STATE` (2).
        #[prost(uint32, optional, tag = "13")]
        pub sequence_flags: Option<u32>,
        /// Set on the first packet of a sequence.
        #[prost(bool, optional, tag = "87")]
        pub first_packet_on_sequence: Option<bool>,
        /// Kernel ftrace events of one CPU.
        #[prost(message, optional, tag = "1")]
        pub ftrace_events: Option<FtraceEventBundle>,
        /// Processes and threads.
        #[prost(message, optional, tag = "2")]
        pub process_tree: Option<ProcessTree>,
        /// One perf sample.
        #[prost(message, optional, tag = "66")]
        pub perf_sample: Option<PerfSample>,
    }

    /// `perfetto.protos.InternedData` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InternedData {
        /// Function names.
        #[prost(message, repeated, tag = "5")]
        pub function_names: Vec<InternedString>,
        /// Frames.
        #[prost(message, repeated, tag = "6")]
        pub frames: Vec<InternedFrame>,
        /// Callstacks.
        #[prost(message, repeated, tag = "7")]
        pub callstacks: Vec<Callstack>,
        /// Build ids.
        #[prost(message, repeated, tag = "16")]
        pub build_ids: Vec<InternedString>,
        /// Mapping path components.
        #[prost(message, repeated, tag = "17")]
        pub mapping_paths: Vec<InternedString>,
        /// Mappings.
        #[prost(message, repeated, tag = "19")]
        pub mappings: Vec<Mapping>,
    }

    /// `perfetto.protos.InternedString`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InternedString {
        /// Interning id.
        #[prost(uint64, optional, tag = "1")]
        pub iid: Option<u64>,
        /// The bytes.
        #[prost(bytes = "vec", optional, tag = "2")]
        pub str: Option<Vec<u8>>,
    }

    /// `perfetto.protos.Frame`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InternedFrame {
        /// Interning id.
        #[prost(uint64, optional, tag = "1")]
        pub iid: Option<u64>,
        /// iid into `function_names`.
        #[prost(uint64, optional, tag = "2")]
        pub function_name_id: Option<u64>,
        /// iid into `mappings`.
        #[prost(uint64, optional, tag = "3")]
        pub mapping_id: Option<u64>,
        /// Program counter relative to the mapping.
        #[prost(uint64, optional, tag = "4")]
        pub rel_pc: Option<u64>,
    }

    /// `perfetto.protos.Mapping`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        /// Interning id.
        #[prost(uint64, optional, tag = "1")]
        pub iid: Option<u64>,
        /// iid into `build_ids`.
        #[prost(uint64, optional, tag = "2")]
        pub build_id: Option<u64>,
        /// Start address.
        #[prost(uint64, optional, tag = "4")]
        pub start: Option<u64>,
        /// End address.
        #[prost(uint64, optional, tag = "5")]
        pub end: Option<u64>,
        /// Path components, iids into `mapping_paths`.
        #[prost(uint64, repeated, packed = "false", tag = "7")]
        pub path_string_ids: Vec<u64>,
    }

    /// `perfetto.protos.Callstack`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Callstack {
        /// Interning id.
        #[prost(uint64, optional, tag = "1")]
        pub iid: Option<u64>,
        /// Frame iids, outermost (root) first.
        #[prost(uint64, repeated, packed = "false", tag = "2")]
        pub frame_ids: Vec<u64>,
    }

    /// `perfetto.protos.PerfSample` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PerfSample {
        /// CPU.
        #[prost(uint32, optional, tag = "1")]
        pub cpu: Option<u32>,
        /// Process id.
        #[prost(uint32, optional, tag = "2")]
        pub pid: Option<u32>,
        /// Thread id.
        #[prost(uint32, optional, tag = "3")]
        pub tid: Option<u32>,
        /// Interned callstack.
        #[prost(uint64, optional, tag = "4")]
        pub callstack_iid: Option<u64>,
        /// `Profiling.CpuMode`: 1 kernel, 2 user.
        #[prost(int32, optional, tag = "5")]
        pub cpu_mode: Option<i32>,
        /// Timebase counter value.
        #[prost(uint64, optional, tag = "6")]
        pub timebase_count: Option<u64>,
    }

    /// `perfetto.protos.ProcessTree`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessTree {
        /// Processes.
        #[prost(message, repeated, tag = "1")]
        pub processes: Vec<Process>,
        /// Threads.
        #[prost(message, repeated, tag = "2")]
        pub threads: Vec<Thread>,
    }

    /// `perfetto.protos.ProcessTree.Process` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Process {
        /// Process id.
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        /// Parent process id.
        #[prost(int32, optional, tag = "2")]
        pub ppid: Option<i32>,
        /// Command line (here: the process name).
        #[prost(string, repeated, tag = "3")]
        pub cmdline: Vec<String>,
        /// `cmdline` holds only the comm.
        #[prost(bool, optional, tag = "9")]
        pub cmdline_is_comm: Option<bool>,
    }

    /// `perfetto.protos.ProcessTree.Thread` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Thread {
        /// Thread id.
        #[prost(int32, optional, tag = "1")]
        pub tid: Option<i32>,
        /// Thread name.
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        /// Owning process id.
        #[prost(int32, optional, tag = "3")]
        pub tgid: Option<i32>,
    }

    /// `perfetto.protos.FtraceEventBundle` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FtraceEventBundle {
        /// CPU of all events.
        #[prost(uint32, optional, tag = "1")]
        pub cpu: Option<u32>,
        /// Events in time order.
        #[prost(message, repeated, tag = "2")]
        pub event: Vec<FtraceEvent>,
    }

    /// `perfetto.protos.FtraceEvent` (subset).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct FtraceEvent {
        /// Timestamp in nanoseconds.
        #[prost(uint64, optional, tag = "1")]
        pub timestamp: Option<u64>,
        /// Thread that emitted the event.
        #[prost(uint32, optional, tag = "2")]
        pub pid: Option<u32>,
        /// The switch.
        #[prost(message, optional, tag = "4")]
        pub sched_switch: Option<SchedSwitchFtraceEvent>,
    }

    /// `perfetto.protos.SchedSwitchFtraceEvent`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SchedSwitchFtraceEvent {
        /// Name of the thread leaving.
        #[prost(string, optional, tag = "1")]
        pub prev_comm: Option<String>,
        /// Its tid.
        #[prost(int32, optional, tag = "2")]
        pub prev_pid: Option<i32>,
        /// Its priority.
        #[prost(int32, optional, tag = "3")]
        pub prev_prio: Option<i32>,
        /// Its state.
        #[prost(int64, optional, tag = "4")]
        pub prev_state: Option<i64>,
        /// Name of the thread entering.
        #[prost(string, optional, tag = "5")]
        pub next_comm: Option<String>,
        /// Its tid.
        #[prost(int32, optional, tag = "6")]
        pub next_pid: Option<i32>,
        /// Its priority.
        #[prost(int32, optional, tag = "7")]
        pub next_prio: Option<i32>,
    }
}

use proto::*;

const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
const CPU_MODE_KERNEL: i32 = 1;
const CPU_MODE_USER: i32 = 2;
const SEQUENCE_ID: u32 = 1;

/// Interning tables; iids start at 1 because 0 means "unset" in Perfetto.
#[derive(Default)]
struct Interner {
    data: InternedData,
    names: HashMap<Arc<str>, u64>,
    paths: HashMap<Arc<str>, u64>,
    mappings: HashMap<Arc<str>, u64>,
    frames: HashMap<(u64, u64, u64), u64>,
    stacks: HashMap<Vec<u64>, u64>,
}

fn intern_str(
    map: &mut HashMap<Arc<str>, u64>,
    out: &mut Vec<InternedString>,
    s: &Arc<str>,
) -> u64 {
    if let Some(&iid) = map.get(s) {
        return iid;
    }
    let iid = map.len() as u64 + 1;
    map.insert(s.clone(), iid);
    out.push(InternedString {
        iid: Some(iid),
        str: Some(s.as_bytes().to_vec()),
    });
    iid
}

impl Interner {
    fn frame(&mut self, f: &Frame) -> u64 {
        let name: Arc<str> = if f.function.is_empty() {
            Arc::from(format!("[unknown] {:#x}", f.address))
        } else {
            f.function.clone()
        };
        let name_iid = intern_str(&mut self.names, &mut self.data.function_names, &name);
        let mapping_iid = match self.mappings.get(&f.module) {
            Some(&iid) => iid,
            None => {
                let path_iid = intern_str(&mut self.paths, &mut self.data.mapping_paths, &f.module);
                let iid = self.mappings.len() as u64 + 1;
                self.mappings.insert(f.module.clone(), iid);
                self.data.mappings.push(Mapping {
                    iid: Some(iid),
                    build_id: None,
                    start: None,
                    end: None,
                    path_string_ids: vec![path_iid],
                });
                iid
            }
        };
        // Without mapping bounds the absolute address is the best rel_pc.
        let key = (name_iid, mapping_iid, f.address);
        if let Some(&iid) = self.frames.get(&key) {
            return iid;
        }
        let iid = self.frames.len() as u64 + 1;
        self.frames.insert(key, iid);
        self.data.frames.push(InternedFrame {
            iid: Some(iid),
            function_name_id: Some(name_iid),
            mapping_id: Some(mapping_iid),
            rel_pc: Some(f.address),
        });
        iid
    }

    fn callstack(&mut self, frames: &[Frame]) -> u64 {
        let ids: Vec<u64> = frames.iter().rev().map(|f| self.frame(f)).collect();
        if let Some(&iid) = self.stacks.get(&ids) {
            return iid;
        }
        let iid = self.stacks.len() as u64 + 1;
        self.stacks.insert(ids.clone(), iid);
        self.data.callstacks.push(Callstack {
            iid: Some(iid),
            frame_ids: ids,
        });
        iid
    }
}

/// Figures of one built trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceSummary {
    /// `PerfSample` packets.
    pub samples: usize,
    /// `sched_switch` events.
    pub sched_switches: usize,
    /// Distinct interned callstacks.
    pub callstacks: usize,
    /// Processes in the process tree.
    pub processes: usize,
}

/// Builds a Perfetto trace of `events` (any order; emitted by time) and
/// returns its protobuf bytes.
pub fn build_trace<'a>(events: impl IntoIterator<Item = &'a Event>) -> (Vec<u8>, TraceSummary) {
    let mut samples: Vec<&Sample> = Vec::new();
    let mut switches: Vec<&SchedSwitch> = Vec::new();
    for e in events {
        match e {
            Event::Sample(s) => samples.push(s),
            Event::Switch(s) => switches.push(s),
        }
    }
    samples.sort_by_key(|s| s.time_ns);
    switches.sort_by_key(|s| s.time_ns);

    // Process tree: every pid/tid seen. A thread whose tid equals its pid
    // names the process.
    let mut procs: BTreeMap<u32, Arc<str>> = BTreeMap::new();
    let mut threads: BTreeMap<u32, (u32, Arc<str>)> = BTreeMap::new();
    for s in &samples {
        threads.insert(s.tid, (s.pid, s.comm.clone()));
        let entry = procs.entry(s.pid).or_insert_with(|| s.comm.clone());
        if s.tid == s.pid {
            *entry = s.comm.clone();
        }
    }
    let first_ts = samples
        .first()
        .map(|s| s.time_ns)
        .into_iter()
        .chain(switches.first().map(|s| s.time_ns))
        .min()
        .unwrap_or(0);
    let mut packets = Vec::with_capacity(samples.len() + 4);
    packets.push(TracePacket {
        timestamp: Some(first_ts),
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        first_packet_on_sequence: Some(true),
        sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
        process_tree: Some(ProcessTree {
            processes: procs
                .iter()
                .map(|(&pid, comm)| Process {
                    pid: Some(pid as i32),
                    ppid: None,
                    cmdline: vec![comm.to_string()],
                    cmdline_is_comm: Some(true),
                })
                .collect(),
            threads: threads
                .iter()
                .map(|(&tid, (pid, comm))| Thread {
                    tid: Some(tid as i32),
                    name: Some(comm.to_string()),
                    tgid: Some(*pid as i32),
                })
                .collect(),
        }),
        ..Default::default()
    });

    let mut interner = Interner::default();
    let mut sample_packets = Vec::with_capacity(samples.len());
    for s in &samples {
        let callstack = interner.callstack(&s.frames);
        let kernel = s.frames.first().is_some_and(Frame::is_kernel);
        sample_packets.push(TracePacket {
            timestamp: Some(s.time_ns),
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            perf_sample: Some(PerfSample {
                cpu: Some(s.cpu),
                pid: Some(s.pid),
                tid: Some(s.tid),
                callstack_iid: Some(callstack),
                cpu_mode: Some(if kernel {
                    CPU_MODE_KERNEL
                } else {
                    CPU_MODE_USER
                }),
                timebase_count: None,
            }),
            ..Default::default()
        });
    }
    let summary_callstacks = interner.data.callstacks.len();
    // Interned data precedes every packet that refers to it.
    packets.push(TracePacket {
        timestamp: Some(first_ts),
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
        interned_data: Some(interner.data),
        ..Default::default()
    });
    packets.extend(sample_packets);

    let mut per_cpu: BTreeMap<u32, Vec<FtraceEvent>> = BTreeMap::new();
    for s in &switches {
        per_cpu.entry(s.cpu).or_default().push(FtraceEvent {
            timestamp: Some(s.time_ns),
            pid: Some(s.prev_pid.max(0) as u32),
            sched_switch: Some(SchedSwitchFtraceEvent {
                prev_comm: Some(s.prev_comm.to_string()),
                prev_pid: Some(s.prev_pid),
                prev_prio: s.prev_prio,
                prev_state: s.prev_state,
                next_comm: Some(s.next_comm.to_string()),
                next_pid: Some(s.next_pid),
                next_prio: s.next_prio,
            }),
        });
    }
    for (cpu, event) in per_cpu {
        packets.push(TracePacket {
            timestamp: event.first().and_then(|e| e.timestamp),
            trusted_packet_sequence_id: Some(SEQUENCE_ID + 1),
            ftrace_events: Some(FtraceEventBundle {
                cpu: Some(cpu),
                event,
            }),
            ..Default::default()
        });
    }
    let summary = TraceSummary {
        samples: samples.len(),
        sched_switches: switches.len(),
        callstacks: summary_callstacks,
        processes: procs.len(),
    };
    (Trace { packet: packets }.encode_to_vec(), summary)
}
