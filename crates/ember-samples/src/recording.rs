//! [`Recording`]: what one stretch of sampling produced, before symbolization, and the
//! operations on it that need no symbols (building it, merging cuts, keeping only what a
//! consumer sends, splitting it per process).
//!
//! The sampler fills a recording through the producer methods ([`Recording::add_stack`],
//! [`Recording::push_map`], ...); everyone else reads it through accessors or hands it to the
//! symbolizing operations ([`crate::pprof`], [`crate::perf_script`], [`crate::timeline`]).
//! The stacks, mappings and timeline are private so that their invariants hold: every
//! [`Frame::User`] indexes [`Recording::maps`], every raw event indexes
//! [`Recording::raw_stacks`].

use crate::capture::{AutoChoice, ExitStatus, OffCpuSource};
use crate::raw::RawEvent;
use crate::stack::{Frame, MapInfo, StackKey, StackValue};
use std::collections::HashMap;

/// Everything a recording produced, before symbolization.
#[derive(Debug, Default)]
pub struct Recording {
    /// Aggregated on-CPU stacks.
    stacks: HashMap<StackKey, StackValue>,
    /// Blocked time per stack (count = blocking episodes, period = ns).
    off_cpu_stacks: HashMap<StackKey, StackValue>,
    /// Mappings referenced by [`Frame::User`].
    maps: Vec<MapInfo>,
    /// Every on-CPU sample and sampled context switch (when kept), sorted by time once the
    /// producer calls [`Recording::sort_raw_events`].
    raw_events: Vec<RawEvent>,
    /// Distinct stacks (leaf first) referenced by the raw events.
    raw_stacks: Vec<Vec<Frame>>,
    /// Total samples.
    pub samples: u64,
    /// Lost records.
    pub lost: u64,
    /// Sampling frequency used.
    pub frequency: u32,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub start_unix_ns: i64,
    /// Recording duration in nanoseconds.
    pub duration_ns: i64,
    /// How the launched command ended, when the sampler launched one.
    pub exit_status: Option<ExitStatus>,
    /// Degradations met while recording (vanished pids, ...).
    pub warnings: Vec<String>,
    /// Off-CPU recording was requested.
    pub off_cpu: bool,
    /// Wall-clock (on + off CPU) view was requested.
    pub wall: bool,
    /// Context switches sampled for off-CPU time.
    pub off_cpu_switches: u64,
    /// CLOCK_MONOTONIC nanoseconds at the start of this recording: the
    /// clock of [`crate::RawSample::time_ns`] and [`crate::RawSwitch::time_ns`]
    /// (`unix_ns = start_unix_ns + (time_ns - start_monotonic_ns)`).
    pub start_monotonic_ns: u64,
    /// The source off-CPU switches came from (`None` without off-CPU).
    pub off_cpu_source: Option<OffCpuSource>,
    /// With `--call-graph auto`: the method settled on for each binary
    /// sampled so far in the session.
    pub auto_choices: Vec<AutoChoice>,
}

impl Recording {
    /// An empty recording that carries `self`'s settings (frequency, off-CPU and wall views,
    /// off-CPU source): the next cut of the same session.
    pub fn next_cut(&self, start_unix_ns: i64, start_monotonic_ns: u64) -> Recording {
        Recording {
            frequency: self.frequency,
            off_cpu: self.off_cpu,
            wall: self.wall,
            off_cpu_source: self.off_cpu_source,
            start_unix_ns,
            start_monotonic_ns,
            ..Recording::default()
        }
    }

    /// Adds `count` samples worth `period` CPU nanoseconds to the on-CPU stack `key`.
    pub fn add_stack(&mut self, key: StackKey, count: u64, period: u64) {
        let value = self.stacks.entry(key).or_default();
        value.count += count;
        value.period += period;
    }

    /// Adds `episodes` blocking episodes worth `blocked_ns` to the off-CPU stack `key`
    /// (a blocked task cut in two charges its time in both recordings, its episode in one).
    pub fn add_off_cpu(&mut self, key: StackKey, episodes: u64, blocked_ns: u64) {
        let value = self.off_cpu_stacks.entry(key).or_default();
        value.count += episodes;
        value.period += blocked_ns;
    }

    /// Appends a mapping and returns the index [`Frame::User`] refers to it by. The producer
    /// keeps its own index to avoid duplicates.
    pub fn push_map(&mut self, info: MapInfo) -> u32 {
        self.maps.push(info);
        (self.maps.len() - 1) as u32
    }

    /// Appends a distinct raw stack (leaf first) and returns its index for the raw events.
    pub fn push_raw_stack(&mut self, frames: Vec<Frame>) -> u32 {
        self.raw_stacks.push(frames);
        (self.raw_stacks.len() - 1) as u32
    }

    /// Appends one event of the timeline.
    pub fn push_raw_event(&mut self, event: RawEvent) {
        self.raw_events.push(event);
    }

    /// Orders the timeline by time (stable: events of equal time keep their arrival order).
    pub fn sort_raw_events(&mut self) {
        self.raw_events.sort_by_key(RawEvent::time_ns);
    }

    /// Aggregated on-CPU stacks.
    pub fn stacks(&self) -> &HashMap<StackKey, StackValue> {
        &self.stacks
    }

    /// Blocked time per stack (count = blocking episodes, period = nanoseconds).
    pub fn off_cpu_stacks(&self) -> &HashMap<StackKey, StackValue> {
        &self.off_cpu_stacks
    }

    /// The on-CPU stacks, then the off-CPU ones, with a flag telling which.
    pub fn all_stacks(&self) -> impl Iterator<Item = (&StackKey, &StackValue, bool)> {
        self.stacks
            .iter()
            .map(|(k, v)| (k, v, false))
            .chain(self.off_cpu_stacks.iter().map(|(k, v)| (k, v, true)))
    }

    /// Mappings referenced by [`Frame::User`].
    pub fn maps(&self) -> &[MapInfo] {
        &self.maps
    }

    /// The mapping a [`Frame::User`] refers to.
    pub fn map(&self, index: u32) -> Option<&MapInfo> {
        self.maps.get(index as usize)
    }

    /// The timeline (empty unless the sampler was asked to keep it), sorted by time.
    pub fn raw_events(&self) -> &[RawEvent] {
        &self.raw_events
    }

    /// Distinct stacks (leaf first) referenced by [`crate::RawSample::stack`] and
    /// [`crate::RawSwitch::prev_stack`].
    pub fn raw_stacks(&self) -> &[Vec<Frame>] {
        &self.raw_stacks
    }

    /// Distinct processes that were sampled.
    pub fn process_count(&self) -> usize {
        let mut pids: Vec<u32> = self.all_stacks().map(|(k, _, _)| k.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        pids.len()
    }

    /// Forgets the timeline (once its consumers had it: the aggregates do not need it).
    pub fn drop_timeline(&mut self) {
        self.raw_events = Vec::new();
        self.raw_stacks = Vec::new();
    }

    /// Keeps only the views a consumer uses: without `on_cpu` the on-CPU stacks go, without
    /// `off_cpu` the off-CPU stacks go (and the recording no longer claims an off-CPU view);
    /// with neither, the mappings go too.
    pub fn retain_views(&mut self, on_cpu: bool, off_cpu: bool) {
        if !off_cpu {
            self.off_cpu_stacks = HashMap::new();
            self.off_cpu = false;
        }
        if !on_cpu {
            self.stacks = HashMap::new();
        }
        if !on_cpu && !off_cpu {
            self.maps = Vec::new();
        }
    }

    /// Adds the aggregated stacks of `other` (a later cut) to `self`, renumbering `other`'s
    /// mappings into `self`'s (each cut numbers its own), and extends the time span to cover
    /// `other`. The timelines are not merged (consume them per cut).
    pub fn merge(&mut self, other: Recording) {
        let mut index: HashMap<MapInfo, u32> = self
            .maps
            .iter()
            .enumerate()
            .map(|(i, m)| (m.clone(), i as u32))
            .collect();
        let renumber: Vec<u32> = other
            .maps
            .into_iter()
            .map(|m| {
                *index.entry(m.clone()).or_insert_with(|| {
                    self.maps.push(m);
                    (self.maps.len() - 1) as u32
                })
            })
            .collect();
        let remap = |mut key: StackKey| {
            for frame in &mut key.frames {
                if let Frame::User { map, .. } = frame
                    && let Some(&to) = renumber.get(*map as usize)
                {
                    *map = to;
                }
            }
            key
        };
        for (key, value) in other.stacks {
            self.add_stack(remap(key), value.count, value.period);
        }
        for (key, value) in other.off_cpu_stacks {
            self.add_off_cpu(remap(key), value.count, value.period);
        }
        self.samples += other.samples;
        self.lost += other.lost;
        self.off_cpu_switches += other.off_cpu_switches;
        let end = other.start_unix_ns.saturating_add(other.duration_ns);
        self.duration_ns = end.saturating_sub(self.start_unix_ns).max(self.duration_ns);
        self.warnings.extend(other.warnings);
    }

    /// Splits the aggregated stacks per process, in pid order: each part keeps the settings
    /// and time span of `self`, only the mappings its stacks use (renumbered), its sample
    /// count and its switch count. The timeline, lost records and warnings stay behind.
    pub fn split_by_process(self) -> Vec<(u32, Recording)> {
        struct Part {
            rec: Recording,
            renumber: HashMap<u32, u32>,
        }
        let template = Recording {
            duration_ns: self.duration_ns,
            ..self.next_cut(self.start_unix_ns, self.start_monotonic_ns)
        };
        let mut parts: HashMap<u32, Part> = HashMap::new();
        let maps = self.maps;
        let mut add = |mut key: StackKey, value: StackValue, off: bool| {
            let part = parts.entry(key.pid).or_insert_with(|| Part {
                rec: Recording {
                    duration_ns: template.duration_ns,
                    ..template.next_cut(template.start_unix_ns, template.start_monotonic_ns)
                },
                renumber: HashMap::new(),
            });
            for frame in &mut key.frames {
                if let Frame::User { map, .. } = frame
                    && let Some(info) = maps.get(*map as usize)
                {
                    let rec = &mut part.rec;
                    *map = *part
                        .renumber
                        .entry(*map)
                        .or_insert_with(|| rec.push_map(info.clone()));
                }
            }
            if off {
                part.rec.off_cpu_switches += value.count;
                part.rec.add_off_cpu(key, value.count, value.period);
            } else {
                part.rec.samples += value.count;
                part.rec.add_stack(key, value.count, value.period);
            }
        };
        for (key, value) in self.stacks {
            add(key, value, false);
        }
        for (key, value) in self.off_cpu_stacks {
            add(key, value, true);
        }
        let mut out: Vec<(u32, Recording)> =
            parts.into_iter().map(|(pid, p)| (pid, p.rec)).collect();
        out.sort_unstable_by_key(|(pid, _)| *pid);
        out
    }

    /// The process name of the first stack of this recording (for a part from
    /// [`Recording::split_by_process`]: the process's name when sampled), or "".
    pub fn first_comm(&self) -> &str {
        self.all_stacks()
            .next()
            .map(|(k, _, _)| &*k.comm)
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn map(pid: u32, path: &str, start: u64) -> MapInfo {
        MapInfo {
            pid,
            start,
            end: start + 0x1000,
            pgoff: 0,
            path: Arc::from(path),
        }
    }

    fn key(pid: u32, frames: Vec<Frame>) -> StackKey {
        StackKey {
            pid,
            tid: pid,
            comm: Arc::from("w"),
            thread_name: Arc::from("w"),
            frames,
        }
    }

    fn user(map: u32, addr: u64) -> Frame {
        Frame::User {
            map,
            addr,
            ret: false,
        }
    }

    #[test]
    fn merge_renumbers_mappings_and_adds_counts() {
        let mut first = Recording {
            samples: 2,
            start_unix_ns: 1_000,
            duration_ns: 1_000,
            ..Recording::default()
        };
        first.push_map(map(7, "/bin/a", 0x1000));
        first.add_stack(key(7, vec![user(0, 0x1010)]), 2, 20);
        // The second cut numbers /bin/b first: its index 1 is /bin/a.
        let mut second = Recording {
            samples: 4,
            start_unix_ns: 2_000,
            duration_ns: 1_500,
            ..Recording::default()
        };
        second.push_map(map(7, "/bin/b", 0x9000));
        second.push_map(map(7, "/bin/a", 0x1000));
        second.add_stack(key(7, vec![user(1, 0x1010)]), 3, 30);
        second.add_stack(key(7, vec![user(0, 0x9010)]), 1, 10);
        first.merge(second);
        assert_eq!(
            first.maps(),
            &[map(7, "/bin/a", 0x1000), map(7, "/bin/b", 0x9000)]
        );
        assert_eq!(first.samples, 6);
        assert_eq!(first.duration_ns, 2_500);
        let a = &first.stacks()[&key(7, vec![user(0, 0x1010)])];
        assert_eq!((a.count, a.period), (5, 50));
        let b = &first.stacks()[&key(7, vec![user(1, 0x9010)])];
        assert_eq!((b.count, b.period), (1, 10));
        assert_eq!(first.stacks().len(), 2);
    }

    #[test]
    fn split_by_process_keeps_each_process_own_mappings() {
        let mut rec = Recording {
            frequency: 99,
            off_cpu: true,
            start_unix_ns: 5,
            duration_ns: 10,
            ..Recording::default()
        };
        let a = rec.push_map(map(1, "/bin/a", 0x1000));
        let b = rec.push_map(map(2, "/bin/b", 0x2000));
        rec.add_stack(key(2, vec![user(b, 0x2010)]), 3, 30);
        rec.add_stack(key(1, vec![user(a, 0x1010)]), 2, 20);
        rec.add_off_cpu(key(1, vec![user(a, 0x1020)]), 1, 1_000);
        let parts = rec.split_by_process();
        assert_eq!(parts.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 2]);
        let (_, one) = &parts[0];
        assert_eq!(one.maps(), &[map(1, "/bin/a", 0x1000)]);
        assert_eq!((one.samples, one.off_cpu_switches), (2, 1));
        assert_eq!(
            (one.frequency, one.off_cpu, one.duration_ns),
            (99, true, 10)
        );
        let (_, two) = &parts[1];
        assert_eq!(two.maps(), &[map(2, "/bin/b", 0x2000)]);
        assert!(two.stacks().contains_key(&key(2, vec![user(0, 0x2010)])));
        assert_eq!(two.process_count(), 1);
    }

    #[test]
    fn retain_views_drops_what_is_not_sent() {
        let mut rec = Recording {
            off_cpu: true,
            ..Recording::default()
        };
        let m = rec.push_map(map(1, "/bin/a", 0x1000));
        rec.add_stack(key(1, vec![user(m, 0x1010)]), 1, 1);
        rec.add_off_cpu(key(1, vec![user(m, 0x1010)]), 1, 1);
        rec.retain_views(true, false);
        assert!(!rec.off_cpu && rec.off_cpu_stacks().is_empty());
        assert_eq!(rec.stacks().len(), 1);
        rec.retain_views(false, false);
        assert!(rec.stacks().is_empty() && rec.maps().is_empty());
    }
}
