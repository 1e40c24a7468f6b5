//! The daemon's traces: buffered samples and scheduler switches as one Perfetto trace with a
//! process tree, interned callstacks, `PerfSample`s and `sched_switch` ftrace bundles. The
//! wire format and the interning tables are `ember_formats::perfetto`'s (the one Perfetto
//! module, which also reads traces and converts profiles); this file only maps recordings
//! onto it.

use ember_formats::perfetto::Interner;
use ember_formats::perfetto::proto::*;
use ember_samples::timeline::{Event, Frame, Sample, SchedSwitch};
use prost::Message;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The sequence of the process tree, interned data and samples; ftrace bundles use the next.
const SEQUENCE_ID: u32 = 1;

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

/// The interned callstack of a sample's frames (leaf first in the recording, root first in
/// Perfetto). A frame without a symbol is named `[unknown] 0x<address>`; without mapping
/// bounds the absolute address is the best `rel_pc`.
fn callstack(interner: &mut Interner, frames: &[Frame]) -> u64 {
    let ids = frames
        .iter()
        .rev()
        .map(|f| {
            let mapping = interner.mapping(&f.module, "", 0, 0, 0);
            if f.function.is_empty() {
                interner.frame(&format!("[unknown] {:#x}", f.address), mapping, f.address)
            } else {
                interner.frame(&f.function, mapping, f.address)
            }
        })
        .collect();
    interner.callstack(ids)
}

/// The process tree of every pid/tid sampled; a thread whose tid equals its pid names the
/// process.
fn process_tree(samples: &[&Sample]) -> ProcessTree {
    let mut procs: BTreeMap<u32, Arc<str>> = BTreeMap::new();
    let mut threads: BTreeMap<u32, (u32, Arc<str>)> = BTreeMap::new();
    for s in samples {
        threads.insert(s.tid, (s.pid, s.comm.clone()));
        let entry = procs.entry(s.pid).or_insert_with(|| s.comm.clone());
        if s.tid == s.pid {
            *entry = s.comm.clone();
        }
    }
    ProcessTree {
        processes: procs
            .iter()
            .map(|(&pid, comm)| Process {
                pid: pid as i32,
                cmdline: vec![comm.to_string()],
                cmdline_is_comm: true,
                ..Default::default()
            })
            .collect(),
        threads: threads
            .iter()
            .map(|(&tid, (pid, comm))| Thread {
                tid: tid as i32,
                name: comm.to_string(),
                tgid: *pid as i32,
            })
            .collect(),
    }
}

/// One ftrace bundle per CPU of the switches (already in time order).
fn switch_bundles(switches: &[&SchedSwitch]) -> Vec<TracePacket> {
    let mut per_cpu: BTreeMap<u32, Vec<FtraceEvent>> = BTreeMap::new();
    for s in switches {
        per_cpu.entry(s.cpu).or_default().push(FtraceEvent {
            timestamp: s.time_ns,
            pid: s.prev_pid.max(0) as u32,
            sched_switch: Some(SchedSwitchFtraceEvent {
                prev_comm: s.prev_comm.to_string(),
                prev_pid: s.prev_pid,
                prev_prio: s.prev_prio,
                prev_state: s.prev_state,
                next_comm: s.next_comm.to_string(),
                next_pid: s.next_pid,
                next_prio: s.next_prio,
            }),
        });
    }
    per_cpu
        .into_iter()
        .map(|(cpu, event)| TracePacket {
            timestamp: event.first().map_or(0, |e| e.timestamp),
            trusted_packet_sequence_id: SEQUENCE_ID + 1,
            ftrace_events: Some(FtraceEventBundle { cpu, event }),
            ..Default::default()
        })
        .collect()
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
    let first_ts = samples
        .first()
        .map(|s| s.time_ns)
        .into_iter()
        .chain(switches.first().map(|s| s.time_ns))
        .min()
        .unwrap_or(0);
    let tree = process_tree(&samples);
    let processes = tree.processes.len();

    let mut interner = Interner::default();
    let mut sample_packets = Vec::with_capacity(samples.len());
    for s in &samples {
        let callstack_iid = callstack(&mut interner, &s.frames);
        let kernel = s.frames.first().is_some_and(Frame::is_kernel);
        sample_packets.push(TracePacket {
            timestamp: s.time_ns,
            trusted_packet_sequence_id: SEQUENCE_ID,
            sequence_flags: SEQ_NEEDS_INCREMENTAL_STATE,
            perf_sample: Some(PerfSample {
                cpu: s.cpu,
                pid: s.pid,
                tid: s.tid,
                callstack_iid,
                cpu_mode: if kernel {
                    CPU_MODE_KERNEL
                } else {
                    CPU_MODE_USER
                },
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let callstacks = interner.callstacks();
    // The sequence opens with its process tree and the interned data every sample refers to.
    let mut first =
        ember_formats::perfetto::sequence_start(SEQUENCE_ID, first_ts, None, interner.into_data());
    first.process_tree = Some(tree);
    let mut packets = vec![first];
    packets.extend(sample_packets);
    packets.extend(switch_bundles(&switches));
    let summary = TraceSummary {
        samples: samples.len(),
        sched_switches: switches.len(),
        callstacks,
        processes,
    };
    (Trace { packet: packets }.encode_to_vec(), summary)
}
