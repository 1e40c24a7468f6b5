//! Conversion of an `ember_sampler` cut recorded with `raw_events` into the
//! exporters' symbolized [`Event`]s: each distinct raw stack is symbolized
//! once, thread names come from the recording's stacks and switches.

use crate::events::{Event, Frame, Sample, SchedSwitch};
use ember_sampler::output::Resolver;
use ember_sampler::session::{Frame as RawFrame, RawEvent};
use ember_sampler::{Recording, Symbolizer};
use std::collections::HashMap;
use std::sync::Arc;

fn address(f: &RawFrame) -> u64 {
    match *f {
        RawFrame::Kernel { addr, .. }
        | RawFrame::User { addr, .. }
        | RawFrame::Anon { addr, .. } => addr,
    }
}

/// The events of `rec` (empty unless it was recorded with
/// `Options::raw_events`), symbolized with `sym` (keep one symbolizer for the
/// whole run: its caches are per binary). Inlined functions become frames of
/// their own at the same address, innermost first, as `perf script` prints
/// them.
pub fn events_from_recording(rec: &Recording, sym: &mut Symbolizer) -> Vec<Event> {
    let mut resolver = Resolver::new(rec, sym);
    let stacks: Vec<Vec<Frame>> = rec
        .raw_stacks
        .iter()
        .map(|stack| {
            let mut out = Vec::with_capacity(stack.len());
            for raw in stack {
                let info = resolver.resolve(raw);
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
            out
        })
        .collect();
    let mut names: HashMap<u32, Arc<str>> = HashMap::new();
    for key in rec.stacks.keys().chain(rec.off_cpu_stacks.keys()) {
        let name = if key.thread_name.is_empty() {
            &key.comm
        } else {
            &key.thread_name
        };
        names.entry(key.tid).or_insert_with(|| name.clone());
    }
    for e in &rec.raw_events {
        if let RawEvent::Switch(s) = e {
            names
                .entry(s.prev_tid)
                .or_insert_with(|| s.prev_comm.clone());
        }
    }
    let empty: Arc<str> = Arc::from("");
    rec.raw_events
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
