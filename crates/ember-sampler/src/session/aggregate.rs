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
            Record::Lost { lost, off_cpu, .. } => {
                self.rec.lost += lost;
                if off_cpu {
                    // Switches were lost: any task away from a CPU may have come back and left
                    // again unseen, so where its episode ends is not known. Its open episode
                    // is dropped rather than charged through time it may have run (a 20 ms
                    // nap's stack charged until the end of the next 300 ms sleep).
                    self.switched_out.clear();
                }
            }
            Record::Switch { id, out, other } => {
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
mod tests {
    use super::super::process_until;
    use super::*;

    const MS: u64 = 1_000_000;

    /// A task of this process (so `/proc/<tid>` exists and it is carried across cuts).
    fn task() -> SampleId {
        let pid = std::process::id();
        SampleId {
            pid,
            tid: pid,
            time: 0,
            cpu: 0,
        }
    }

    fn aggregator() -> Aggregator {
        let mut agg = Aggregator::new(CallGraph::Fp, 0, false);
        // Its state comes from records: no /proc reads.
        agg.known.insert(task().pid);
        agg
    }

    /// The context-switch event's sample of the task leaving `cpu` at `ms`.
    fn out(ms: u64, cpu: u32) -> Record {
        Record::Sample(SampleRecord {
            id: SampleId {
                time: ms * MS,
                cpu,
                ..task()
            },
            ip: 0x1000,
            period: 1,
            callchain: Vec::new(),
            user_regs: Vec::new(),
            user_stack: Vec::new(),
            off_cpu: true,
            raw: Vec::new(),
        })
    }

    /// The CPU-wide PERF_RECORD_SWITCH of the task arriving on `cpu` at `ms`, from idle.
    fn back(ms: u64, cpu: u32) -> Record {
        Record::Switch {
            id: SampleId {
                time: ms * MS,
                cpu,
                ..task()
            },
            out: false,
            other: Some((0, 0)),
        }
    }

    fn blocked_ns(rec: &Recording) -> u64 {
        rec.off_cpu_stacks().values().map(|v| v.period).sum()
    }

    /// One poll: these records were drained, the ones older than `horizon_ms` are handled.
    fn poll(agg: &mut Aggregator, mut records: Vec<Record>, horizon_ms: u64) {
        process_until(agg, &mut records, Some(horizon_ms * MS));
        assert!(records.is_empty(), "every record is older than the horizon");
    }

    #[test]
    fn switches_late_past_a_cut_do_not_charge_the_cut_time_again() {
        let mut agg = aggregator();
        // The task leaves CPU 0 at 100 ms; a cut at 1 s charges it up to the cut.
        poll(&mut agg, vec![out(100, 0)], 1_000);
        let first = agg.close(1_000 * MS, 0);
        assert_eq!(blocked_ns(&first), 900 * MS);
        // Records stamped before the cut arrive after it (written to CPU 1's buffer after
        // that buffer was drained, as under load): the task came back at 400 ms and left
        // again at 500 ms. It comes back for good at 1.4 s.
        poll(
            &mut agg,
            vec![back(400, 1), out(500, 1), back(1_400, 0)],
            2_000,
        );
        let second = agg.close(2_000 * MS, 0);
        // [100 ms, 1 s] was charged: the episode from 500 ms is charged from 1 s only. (It was
        // charged from 500 ms again, 1.8 s of blocked time within 1.3 s.)
        assert_eq!(blocked_ns(&second), 400 * MS);
        assert_eq!(blocked_ns(&first) + blocked_ns(&second), 1_300 * MS);
    }

    #[test]
    fn a_switch_out_handled_after_a_later_return_does_not_overlap_it() {
        let mut agg = aggregator();
        // Away [100, 300] ms, handled in order.
        poll(&mut agg, vec![out(100, 0), back(300, 1)], 350);
        // A leave at 200 ms on CPU 1 arrives only now, then a return at 400 ms: what the
        // task was charged up to 300 ms is not charged again.
        poll(&mut agg, vec![out(200, 1), back(400, 0)], 500);
        let rec = agg.close(500 * MS, 0);
        assert_eq!(blocked_ns(&rec), 300 * MS, "never more than [100, 400] ms");
        assert_eq!(
            rec.off_cpu_stacks().values().map(|v| v.count).sum::<u64>(),
            2
        );
    }

    /// The kernel's note that `lost` records of `cpu`'s buffer were dropped.
    fn lost(ms: u64, cpu: u32, off_cpu: bool) -> Record {
        Record::Lost {
            id: SampleId {
                time: ms * MS,
                cpu,
                ..task()
            },
            lost: 2,
            off_cpu,
        }
    }

    #[test]
    fn an_episode_open_across_lost_switches_is_not_charged() {
        let mut agg = aggregator();
        agg.off_cpu_min_ns = 100 * MS;
        // A 20 ms nap from 0 ms; its return at 20 ms and the next leave at 21 ms (into a 300 ms
        // sleep) were lost with CPU 1's full buffer; the return from that sleep at 321 ms is
        // seen. Charged, the nap's stack would get 321 ms over the 100 ms minimum.
        poll(
            &mut agg,
            vec![out(0, 0), lost(25, 1, true), back(321, 0)],
            1_000,
        );
        // Losses of the cpu-clock buffers say nothing about switches.
        poll(
            &mut agg,
            vec![out(1_000, 0), lost(1_100, 1, false), back(1_300, 1)],
            2_000,
        );
        let rec = agg.close(2_000 * MS, 0);
        assert_eq!(blocked_ns(&rec), 300 * MS);
        assert_eq!(rec.lost, 4);
    }

    #[test]
    fn episodes_across_cuts_are_split_and_charged_once() {
        let mut agg = aggregator();
        poll(&mut agg, vec![out(100, 0)], 1_000);
        let first = agg.close(1_000 * MS, 0);
        poll(&mut agg, Vec::new(), 2_000);
        let second = agg.close(2_000 * MS, 0);
        poll(&mut agg, vec![back(2_500, 1), out(2_600, 1)], 3_000);
        let third = agg.close(3_000 * MS, 0);
        assert_eq!(
            [first, second, third].map(|r| blocked_ns(&r)),
            [900 * MS, 1_000 * MS, 900 * MS]
        );
        // Charge times are kept only for tasks charged since the previous cut.
        poll(&mut agg, vec![back(3_100, 0)], 4_000);
        agg.close(4_000 * MS, 0);
        assert_eq!(agg.charged.len(), 1);
        agg.close(5_000 * MS, 0);
        assert!(agg.charged.is_empty());
    }
}
