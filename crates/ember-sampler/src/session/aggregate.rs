//! Turning samples and side-band records into the aggregated stacks of a recording.

use super::options::CallGraph;
use crate::parse::{Record, SampleId, SampleRecord};
use crate::process::ProcessTable;
use crate::tracepoint::{STATE_EXITING, SwitchFormat};
use crate::unwind::DwarfUnwinder;
use ember_samples::{Frame, MapInfo, RawEvent, RawSample, RawSwitch, Recording, StackKey};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The perf callchain marker values (`PERF_CONTEXT_*`) are all above this.
pub(super) const CONTEXT_MAX: u64 = (-4095i64) as u64;
pub(super) const CONTEXT_KERNEL: u64 = (-128i64) as u64;
pub(super) const CONTEXT_USER: u64 = (-512i64) as u64;

/// Turns samples and side-band records into aggregated stacks.
pub(super) struct Aggregator {
    pub(super) table: ProcessTable,
    pub(super) rec: Recording,
    pub(super) map_index: HashMap<MapInfo, u32>,
    pub(super) names: HashMap<String, Arc<str>>,
    /// Pids whose state came from records (never read from /proc lazily).
    pub(super) known: HashSet<u32>,
    /// Pids whose /proc maps were re-read after an address missed them.
    pub(super) refreshed: HashSet<u32>,
    pub(super) call_graph: CallGraph,
    pub(super) unwinder: DwarfUnwinder,
    /// Tasks that left the CPU: since when their blocked time is not charged yet, when the
    /// episode began, and with which stack.
    pub(super) switched_out: HashMap<u32, (u64, u64, StackKey)>,
    /// The time up to which each task's blocked time has been charged. Nothing before it is
    /// charged again, so the intervals charged for a task never overlap and its off-CPU time
    /// never exceeds the wall time, even when a switch arrives late: after a later switch
    /// of the same task (past the horizon margin), or after a cut charged the task's blocked
    /// time up to the cut. Tasks not charged since the previous cut are forgotten at a cut.
    pub(super) charged: HashMap<u32, u64>,
    /// The time of the last switch read from each CPU's off-CPU buffer: when that buffer
    /// reports lost records, they were lost after it.
    pub(super) switch_seen: HashMap<u32, u64>,
    /// Episodes shorter than this are not counted ([`Options::off_cpu_min_ns`]).
    pub(super) off_cpu_min_ns: u64,
    /// Keep [`RawEvent`]s.
    pub(super) raw: bool,
    /// Index of each distinct stack in `rec.raw_stacks`.
    pub(super) raw_index: HashMap<Vec<Frame>, u32>,
    /// Tids whose EXIT arrived since the last cut, and before it: their
    /// final switch-out is not blocked time, and their state is dropped one
    /// cut after they died (late records of a dying task still find it).
    pub(super) dead_now: HashSet<u32>,
    pub(super) dead_prev: HashSet<u32>,
    /// Layout of `sched_switch` records when off-CPU samples come from the
    /// tracepoint.
    pub(super) switch_format: Option<SwitchFormat>,
    /// The last switch of each CPU in the raw timeline, (prev tid, next
    /// tid), to tell the switches the timeline has from those it misses
    /// (the tracepoint's gaps, and dying tasks' switches it skips).
    pub(super) timeline_switch: HashMap<u32, (u32, u32)>,
}

/// A task blocked across a cut: since when its blocked time is not charged, when the episode
/// began, and with which stack.
type Blocked = (u32, (u64, u64, StackKey));

impl Aggregator {
    /// An aggregator with no process state, filling an empty recording.
    pub(super) fn new(call_graph: CallGraph, off_cpu_min_ns: u64, raw: bool) -> Aggregator {
        Aggregator {
            table: ProcessTable::default(),
            rec: Recording::default(),
            map_index: HashMap::new(),
            names: HashMap::new(),
            known: HashSet::new(),
            refreshed: HashSet::new(),
            call_graph,
            unwinder: DwarfUnwinder::new(),
            switched_out: HashMap::new(),
            charged: HashMap::new(),
            switch_seen: HashMap::new(),
            off_cpu_min_ns,
            raw,
            raw_index: HashMap::new(),
            dead_now: HashSet::new(),
            dead_prev: HashSet::new(),
            switch_format: None,
            timeline_switch: HashMap::new(),
        }
    }

    pub(super) fn name(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.names.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.names.insert(s.to_string(), a.clone());
        a
    }

    pub(super) fn handle(&mut self, record: Record) {
        match record {
            Record::Sample(s) => self.sample(s),
            Record::Mmap2(m) => {
                self.known.insert(m.pid);
                self.table.mmap(&m);
            }
            Record::Comm {
                pid,
                tid,
                comm,
                exec,
                ..
            } => {
                if exec {
                    self.known.insert(pid);
                }
                self.table.comm(pid, tid, &comm, exec);
            }
            Record::Fork {
                pid,
                ppid,
                tid,
                ptid,
                ..
            } => {
                if pid != ppid {
                    self.known.insert(pid);
                }
                self.dead_now.remove(&tid);
                self.dead_prev.remove(&tid);
                self.table.fork(pid, ppid, tid, ptid);
            }
            Record::Exit { pid, tid, .. } => {
                if pid == tid {
                    self.unwinder.forget(pid);
                }
                self.dead_now.insert(tid);
                self.switched_out.remove(&tid);
                self.table.exit(pid, tid);
            }
            Record::Lost { id, lost, off_cpu } => {
                self.rec.lost += lost;
                if off_cpu {
                    let seen = self.switch_seen.get(&id.cpu).copied().unwrap_or(0);
                    self.close_open_episodes(seen);
                }
            }
            Record::Switch { id, out, other } => {
                self.switch_seen.insert(id.cpu, id.time);
                if !out {
                    self.switch_in(id.tid, id.time);
                    if let Some(prev) = other {
                        self.fill_missed_switch(id, prev);
                    }
                }
            }
        }
    }

    pub(super) fn find_file_map(&self, pid: u32, ip: u64) -> Option<crate::process::Map> {
        self.table
            .processes
            .get(&pid)
            .and_then(|p| p.find(ip))
            .filter(|m| m.path.starts_with('/') || m.path.starts_with('['))
            .filter(|m| !m.path.starts_with("[anon"))
            .cloned()
    }

    /// User frames by CFI, or for `auto` by the rule of the sampled binary
    /// (see [`DwarfUnwinder::unwind_auto`]); `fp` is the kernel's walk.
    pub(super) fn user_unwind(
        &mut self,
        pid: u32,
        s: &SampleRecord,
        fp: Vec<(u64, bool)>,
    ) -> Vec<(u64, bool)> {
        let Some(start) = crate::arch::start_regs(&s.user_regs) else {
            // No user registers (kernel thread, or none requested).
            return if self.call_graph == CallGraph::Auto {
                fp
            } else {
                Vec::new()
            };
        };
        if pid == 0 {
            return Vec::new();
        }
        // Make sure the mapping under the IP is known before unwinding.
        let _ = self.refresh_if_missing(pid, start.pc);
        let Some(process) = self.table.processes.get(&pid) else {
            return fp;
        };
        if self.call_graph == CallGraph::Auto {
            self.unwinder
                .unwind_auto(pid, process, &s.user_regs, &s.user_stack, fp)
        } else {
            self.unwinder
                .unwind(pid, process, &s.user_regs, &s.user_stack)
        }
    }

    pub(super) fn refresh_if_missing(&mut self, pid: u32, ip: u64) -> Option<crate::process::Map> {
        let mut found = self.find_file_map(pid, ip);
        if found.is_none() && pid != 0 && !self.known.contains(&pid) && self.refreshed.insert(pid) {
            // A process attached mid-exec (or mapping code we never saw
            // an MMAP2 for): its /proc snapshot may predate the mapping.
            self.table.load_from_proc(pid);
            found = self.find_file_map(pid, ip);
        }
        found
    }

    pub(super) fn intern_map(&mut self, info: MapInfo) -> u32 {
        if let Some(&i) = self.map_index.get(&info) {
            return i;
        }
        let i = self.rec.push_map(info.clone());
        self.map_index.insert(info, i);
        i
    }

    pub(super) fn user_frame(&mut self, pid: u32, ip: u64, ret: bool) -> Frame {
        match self.refresh_if_missing(pid, ip) {
            Some(m) => {
                let info = MapInfo {
                    pid,
                    start: m.start,
                    end: m.end,
                    pgoff: m.pgoff,
                    path: m.path,
                };
                Frame::User {
                    map: self.intern_map(info),
                    addr: ip,
                    ret,
                }
            }
            None => Frame::Anon { pid, addr: ip, ret },
        }
    }

    pub(super) fn is_dead(&self, tid: u32) -> bool {
        self.dead_now.contains(&tid) || self.dead_prev.contains(&tid)
    }

    pub(super) fn raw_stack(&mut self, frames: &[Frame]) -> u32 {
        if let Some(&i) = self.raw_index.get(frames) {
            return i;
        }
        let i = self.rec.push_raw_stack(frames.to_vec());
        self.raw_index.insert(frames.to_vec(), i);
        i
    }

    pub(super) fn sample(&mut self, mut s: SampleRecord) {
        let time = s.id.time;
        let cpu = s.id.cpu;
        let off_cpu = s.off_cpu;
        let period = s.period;
        // (prev_comm, prev_state, next_tid, next_comm) from the tracepoint.
        let mut switch: Option<(Arc<str>, u64, u32, Arc<str>)> = None;
        if off_cpu {
            self.switch_seen.insert(cpu, time);
            let raw = std::mem::take(&mut s.raw);
            if let Some(format) = self.switch_format
                && let Some(f) = format.decode(&raw)
            {
                // The task taking the CPU stops being off-CPU.
                self.switch_in(f.next_tid, time);
                if f.prev_state & STATE_EXITING != 0 {
                    return;
                }
                switch = Some((
                    self.name(&String::from_utf8_lossy(f.prev_comm)),
                    f.prev_state,
                    f.next_tid,
                    self.name(&String::from_utf8_lossy(f.next_comm)),
                ));
            }
            if s.id.tid == 0 {
                // The idle task is never "blocked", but a timeline needs to
                // see the CPU leave it.
                if self.raw
                    && let Some((prev_comm, state, next_tid, next_comm)) = switch
                {
                    self.timeline_switch.insert(cpu, (0, next_tid));
                    let stack = self.raw_stack(&[]);
                    let next_pid = self.table.pid_of(next_tid);
                    self.rec.push_raw_event(RawEvent::Switch(RawSwitch {
                        time_ns: time,
                        cpu,
                        prev_pid: 0,
                        prev_tid: 0,
                        prev_comm,
                        prev_state: Some(state),
                        prev_stack: stack,
                        next_pid,
                        next_tid: Some(next_tid),
                        next_comm: Some(next_comm),
                    }));
                }
                return;
            }
            // A dying task's last switch-out: it never blocks, it is gone. (Once its pid is
            // released the kernel reports it as tid -1, a tid no EXIT record names.)
            if s.id.tid == u32::MAX || self.is_dead(s.id.tid) {
                return;
            }
            // Only now is the tracepoint's switch on its way into the timeline: the switches
            // of dying tasks returned above are not, so the PERF_RECORD_SWITCH of the task that
            // arrived must fill them in (see `fill_missed_switch`), or a trace would never show
            // that task come back. Under load a sleeper often follows an exiting task onto a CPU.
            if let Some((_, _, next_tid, _)) = &switch {
                self.timeline_switch.insert(cpu, (s.id.tid, *next_tid));
            }
            self.rec.off_cpu_switches += 1;
        } else {
            self.rec.samples += 1;
        }
        let key = self.stack_key(s);
        if self.raw {
            let stack = self.raw_stack(&key.frames);
            let event = if off_cpu {
                let (prev_comm, prev_state, next) = match switch {
                    Some((prev_comm, state, next_tid, next_comm)) => {
                        let next_pid = self.table.pid_of(next_tid);
                        (
                            prev_comm,
                            Some(state),
                            Some((next_pid, next_tid, next_comm)),
                        )
                    }
                    None => (key.thread_name.clone(), None, None),
                };
                RawEvent::Switch(RawSwitch {
                    time_ns: time,
                    cpu,
                    prev_pid: key.pid,
                    prev_tid: key.tid,
                    prev_comm,
                    prev_state,
                    prev_stack: stack,
                    next_pid: next.as_ref().and_then(|n| n.0),
                    next_tid: next.as_ref().map(|n| n.1),
                    next_comm: next.map(|n| n.2),
                })
            } else {
                RawEvent::Sample(RawSample {
                    time_ns: time,
                    cpu,
                    pid: key.pid,
                    tid: key.tid,
                    stack,
                    weight_ns: period,
                })
            };
            self.rec.push_raw_event(event);
        }
        if off_cpu {
            // Blocked time is known when the task comes back (SWITCH in).
            self.switched_out.insert(key.tid, (time, time, key));
        } else {
            self.rec.add_stack(key, 1, period);
        }
    }

    /// A CPU-wide PERF_RECORD_SWITCH says task `id` arrived from `prev`.
    /// When the tracepoint reported no such switch (see
    /// [`EventKind::SchedSwitch`] for when it does not), the raw timeline
    /// gets one built from this record, so a trace does not show the CPU
    /// idle while the task ran. Its prev stack and state are unknown.
    ///
    /// A task that has begun to exit has no pid any more, and the kernel
    /// then reports it as pid and tid -1 (`u32::MAX`): such a record
    /// repeats the timeline's last switch when its prev is that switch's
    /// prev. (Filling it in anyway had the prev leave the CPU twice: under
    /// load, where tasks exit all the time, one whole-host run in three.)
    pub(super) fn fill_missed_switch(&mut self, id: SampleId, (prev_pid, prev_tid): (u32, u32)) {
        let reported = self
            .timeline_switch
            .get(&id.cpu)
            .is_some_and(|&(prev, next)| {
                next == id.tid || (id.tid == u32::MAX && prev == prev_tid)
            });
        if !self.raw || self.switch_format.is_none() || reported {
            return;
        }
        self.timeline_switch.insert(id.cpu, (prev_tid, id.tid));
        let prev_comm = if prev_tid == 0 {
            self.name("swapper")
        } else {
            let comm = self
                .table
                .threads
                .get(&prev_tid)
                .cloned()
                .unwrap_or_default();
            self.name(&comm)
        };
        let next_comm = self.table.threads.get(&id.tid).cloned().unwrap_or_default();
        let next_comm = self.name(&next_comm);
        let prev_stack = self.raw_stack(&[]);
        self.rec.push_raw_event(RawEvent::Switch(RawSwitch {
            time_ns: id.time,
            cpu: id.cpu,
            prev_pid,
            prev_tid,
            prev_comm,
            prev_state: None,
            prev_stack,
            next_pid: Some(id.pid),
            next_tid: Some(id.tid),
            next_comm: Some(next_comm),
        }));
    }

    pub(super) fn switch_in(&mut self, tid: u32, time: u64) {
        if let Some((uncharged, began, key)) = self.switched_out.remove(&tid)
            && time.saturating_sub(began) >= self.off_cpu_min_ns
        {
            self.charge_off_cpu(tid, key, 1, uncharged, time);
        }
    }

    /// A CPU's buffer lost switches after `seen`: a task away from a CPU may have come back
    /// there and left again unseen, so its open episode is known to last only until `seen`.
    /// It is charged up to there (if it reached the minimum duration by then) and closed,
    /// rather than charged through time the task may have run: a 20 ms nap's stack was
    /// charged until the end of the next 300 ms sleep, whose return was the next one seen.
    fn close_open_episodes(&mut self, seen: u64) {
        let open: Vec<Blocked> = self.switched_out.drain().collect();
        for (tid, (uncharged, began, key)) in open {
            if seen > began && seen - began >= self.off_cpu_min_ns {
                self.charge_off_cpu(tid, key, 1, uncharged, seen);
            }
        }
    }

    /// Charges `tid`'s blocked time from `from` to `to` (and `episodes` ending episodes) to
    /// `key`, less what was charged for the task already (see [`Aggregator::charged`]).
    fn charge_off_cpu(&mut self, tid: u32, key: StackKey, episodes: u64, from: u64, to: u64) {
        let charged = self.charged.entry(tid).or_insert(0);
        let from = from.max(*charged);
        *charged = (*charged).max(to);
        self.rec.add_off_cpu(key, episodes, to.saturating_sub(from));
    }

    /// Closes the current recording at `end` (CLOCK_MONOTONIC, `end_unix_ns` on the Unix
    /// clock) and starts the next one there. Tasks blocked across the cut have their blocked
    /// time split at it; the state of tasks that died before the previous cut is dropped.
    pub(super) fn close(&mut self, end: u64, end_unix_ns: i64) -> Recording {
        let start = self.rec.start_monotonic_ns;
        let end = end.max(start);
        // Blocked tasks: charge the time up to the cut here.
        let blocked = self.charge_blocked(end);
        for pid in std::mem::take(&mut self.table.unreadable) {
            self.rec.warnings.push(format!(
                "process {pid} vanished or its /proc entry is unreadable; its user frames are [unknown]"
            ));
        }
        let next = self.rec.next_cut(end_unix_ns, end);
        let mut rec = std::mem::replace(&mut self.rec, next);
        rec.duration_ns = (end - start) as i64;
        if self.call_graph == CallGraph::Auto {
            rec.auto_choices = self.unwinder.auto_choices();
        }
        // Ordered on arrival; a record later than the horizon margin would
        // be the only exception, so make the order a guarantee.
        rec.sort_raw_events();
        self.map_index.clear();
        self.raw_index.clear();
        self.names.clear();
        // Still-blocked tasks continue in the next recording.
        self.carry_blocked(blocked, &rec, start);
        // Forget tasks that died before the previous cut.
        let dead = std::mem::replace(&mut self.dead_prev, std::mem::take(&mut self.dead_now));
        for tid in dead {
            if self.table.forget(tid) {
                self.known.remove(&tid);
                self.refreshed.remove(&tid);
                self.unwinder.forget(tid);
            }
        }
        self.table.release_unused_paths();
        rec
    }

    /// At a cut at `end`: charges the tasks still blocked up to `end` (the episode is counted
    /// once, in the recording where it ends; one still under the minimum duration is charged
    /// later, whole, if it reaches it) and returns them for [`Aggregator::carry_blocked`].
    fn charge_blocked(&mut self, end: u64) -> Vec<Blocked> {
        let mut blocked: Vec<Blocked> = self.switched_out.drain().collect();
        for (tid, (uncharged, began, key)) in &mut blocked {
            if end.saturating_sub(*began) >= self.off_cpu_min_ns {
                self.charge_off_cpu(*tid, key.clone(), 0, *uncharged, end);
                *uncharged = end.max(*uncharged);
            }
        }
        blocked
    }

    /// After a cut that began at `start` and closed `cut`: the tasks still blocked continue
    /// in the next recording, their stacks moved over (map indexes are per recording); the
    /// charge times of the tasks not charged during the cut are forgotten.
    fn carry_blocked(&mut self, blocked: Vec<Blocked>, cut: &Recording, start: u64) {
        for (tid, (uncharged, began, mut key)) in blocked {
            if self.is_dead(tid) || !std::path::Path::new(&format!("/proc/{tid}")).exists() {
                continue;
            }
            for frame in &mut key.frames {
                if let Frame::User { map, .. } = frame
                    && let Some(info) = cut.map(*map)
                {
                    *map = self.intern_map(info.clone());
                }
            }
            self.switched_out.insert(tid, (uncharged, began, key));
        }
        self.charged.retain(|_, &mut until| until >= start);
    }

    pub(super) fn stack_key(&mut self, s: SampleRecord) -> StackKey {
        let pid = s.id.pid;
        let tid = s.id.tid;
        if pid != 0 && !self.known.contains(&pid) && !self.table.processes.contains_key(&pid) {
            self.table.load_from_proc(pid);
        }
        let mut frames = Vec::with_capacity(s.callchain.len());
        // Split the kernel's callchain into its kernel and user parts.
        let mut fp_user: Vec<(u64, bool)> = Vec::new();
        let mut user = false;
        let mut guest = false;
        let mut first_in_context = true;
        for &ip in &s.callchain {
            if ip >= CONTEXT_MAX {
                user = ip == CONTEXT_USER;
                // Guest or hypervisor contexts: skip their frames.
                guest = ip != CONTEXT_KERNEL && ip != CONTEXT_USER;
                first_in_context = true;
                continue;
            }
            let ret = !first_in_context;
            first_in_context = false;
            if guest {
                continue;
            }
            if user {
                fp_user.push((ip, ret));
            } else {
                frames.push(Frame::Kernel { addr: ip, ret });
            }
        }
        let user_frames = match self.call_graph {
            CallGraph::Fp => fp_user,
            CallGraph::Dwarf | CallGraph::Auto => self.user_unwind(pid, &s, fp_user),
        };
        for (ip, ret) in user_frames {
            let frame = self.user_frame(pid, ip, ret);
            frames.push(frame);
        }
        if frames.is_empty() {
            frames.push(Frame::Anon {
                pid,
                addr: s.ip,
                ret: false,
            });
        }
        let comm = match self.table.processes.get(&pid) {
            Some(p) if !p.comm.is_empty() => p.comm.clone(),
            _ if pid == 0 => "swapper".to_string(),
            _ => self.table.threads.get(&pid).cloned().unwrap_or_default(),
        };
        let thread = self
            .table
            .threads
            .get(&tid)
            .cloned()
            .unwrap_or_else(|| comm.clone());
        StackKey {
            pid,
            tid,
            comm: self.name(&comm),
            thread_name: self.name(&thread),
            frames,
        }
    }
}

#[cfg(test)]
mod tests;
