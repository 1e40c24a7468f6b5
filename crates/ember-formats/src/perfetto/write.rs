//! pprof → Perfetto trace, and the interning tables every Perfetto writer in Ember uses
//! (`ember-export`'s daemon builds its traces of recordings with [`Interner`] too).

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use ember_pprof::Profile;
use prost::Message;

use super::proto::*;

/// Most `PerfSample` packets one converted CPU profile becomes (about 40 MB of trace).
pub const MAX_PERF_SAMPLES: u64 = 1_000_000;

/// The one writer sequence of a converted profile.
const SEQUENCE_ID: u32 = 1;

/// Interning tables of one sequence, in Perfetto's `InternedData` form; iids start at 1
/// because 0 means "unset".
#[derive(Debug, Default)]
pub struct Interner {
    data: InternedData,
    names: HashMap<Vec<u8>, u64>,
    paths: HashMap<Vec<u8>, u64>,
    build_ids: HashMap<Vec<u8>, u64>,
    mappings: HashMap<[u64; 5], u64>,
    frames: HashMap<[u64; 3], u64>,
    stacks: HashMap<Vec<u64>, u64>,
}

/// The iid of `key` in `map` (iids count from 1); a new key's entry, `make(iid)`, is
/// appended to `out`, the table sent in `InternedData`.
fn interned<K: std::hash::Hash + Eq, T>(
    map: &mut HashMap<K, u64>,
    key: K,
    out: &mut Vec<T>,
    make: impl FnOnce(u64) -> T,
) -> u64 {
    let next = map.len() as u64 + 1;
    match map.entry(key) {
        Entry::Occupied(e) => *e.get(),
        Entry::Vacant(e) => {
            out.push(make(next));
            *e.insert(next)
        }
    }
}

/// The iid of the string `bytes` in `map`.
fn intern(map: &mut HashMap<Vec<u8>, u64>, out: &mut Vec<InternedString>, bytes: &[u8]) -> u64 {
    interned(map, bytes.to_vec(), out, |iid| InternedString {
        iid,
        str: bytes.to_vec(),
    })
}

impl Interner {
    /// A mapping of the file at `path` (split into path components, as Perfetto stores
    /// them), with `build_id` (pprof's hex form, stored as the raw bytes it spells; any other
    /// text as it is) and its bounds (0 when unknown).
    pub fn mapping(
        &mut self,
        path: &str,
        build_id: &str,
        start: u64,
        end: u64,
        offset: u64,
    ) -> u64 {
        let path_ids: Vec<u64> = path
            .split('/')
            .filter(|c| !c.is_empty())
            .map(|c| intern(&mut self.paths, &mut self.data.mapping_paths, c.as_bytes()))
            .collect();
        let build = if build_id.is_empty() {
            0
        } else {
            let raw = unhex(build_id).unwrap_or_else(|| build_id.as_bytes().to_vec());
            intern(&mut self.build_ids, &mut self.data.build_ids, &raw)
        };
        let path_key = path_ids
            .iter()
            .fold(0u64, |h, &id| h.wrapping_mul(1_000_003) ^ id);
        let key = [path_key, build, start, end, offset];
        interned(&mut self.mappings, key, &mut self.data.mappings, |iid| {
            Mapping {
                iid,
                build_id: build,
                start_offset: offset,
                start,
                end,
                path_string_ids: path_ids,
            }
        })
    }

    /// A frame of `function` (empty: unnamed) in mapping `mapping` (0: none) at `rel_pc`.
    pub fn frame(&mut self, function: &str, mapping: u64, rel_pc: u64) -> u64 {
        let name = match function {
            "" => 0,
            f => intern(&mut self.names, &mut self.data.function_names, f.as_bytes()),
        };
        let key = [name, mapping, rel_pc];
        interned(&mut self.frames, key, &mut self.data.frames, |iid| Frame {
            iid,
            function_name_id: name,
            mapping_id: mapping,
            rel_pc,
        })
    }

    /// A callstack of frame iids, outermost (root) first.
    pub fn callstack(&mut self, frames_root_first: Vec<u64>) -> u64 {
        let key = frames_root_first.clone();
        interned(&mut self.stacks, key, &mut self.data.callstacks, |iid| {
            Callstack {
                iid,
                frame_ids: frames_root_first,
            }
        })
    }

    /// Distinct callstacks so far.
    pub fn callstacks(&self) -> usize {
        self.stacks.len()
    }

    /// The interned data, to be sent before the first packet that refers to it.
    pub fn into_data(self) -> InternedData {
        self.data
    }
}

/// Bytes spelled by an even-length hexadecimal string.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The packet that opens a sequence: its incremental state starts here, with its defaults
/// and interned data.
pub fn sequence_start(
    sequence: u32,
    timestamp: u64,
    defaults: Option<TracePacketDefaults>,
    interned: InternedData,
) -> TracePacket {
    TracePacket {
        timestamp,
        trusted_packet_sequence_id: sequence,
        first_packet_on_sequence: true,
        sequence_flags: SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE,
        trace_packet_defaults: defaults,
        interned_data: Some(interned),
        ..Default::default()
    }
}

/// What a converted trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WriteSummary {
    /// `PerfSample` packets written (CPU profiles).
    pub perf_samples: u64,
    /// Heap samples written (heap profiles).
    pub heap_samples: u64,
    /// Distinct interned callstacks.
    pub callstacks: usize,
    /// Samples left out: negative values, which a trace cannot hold.
    pub negative: u64,
    /// When a CPU profile had more than [`MAX_PERF_SAMPLES`] samples: the factor every
    /// stack's count was multiplied by (rounded; the timebase period divided by it, so time
    /// totals stay about the same).
    pub scaled: Option<f64>,
}

/// Turns pprof stacks into interned callstacks: each line of a location is a frame (inlined
/// callees are frames of their own) at the address relative to its mapping's file.
struct Stacks<'a> {
    interner: Interner,
    functions: HashMap<u64, &'a str>,
    mappings: HashMap<u64, (u64, &'a ember_pprof::Mapping)>,
    locations: HashMap<u64, &'a ember_pprof::Location>,
    /// Location id → its frames, innermost first.
    frames: HashMap<u64, Vec<u64>>,
}

impl<'a> Stacks<'a> {
    fn new(profile: &'a Profile) -> Self {
        let string = |i: i64| {
            profile
                .string_table
                .get(i as usize)
                .map_or("", String::as_str)
        };
        let mut interner = Interner::default();
        let mappings = profile
            .mapping
            .iter()
            .map(|m| {
                let iid = interner.mapping(
                    string(m.filename),
                    string(m.build_id),
                    m.memory_start,
                    m.memory_limit,
                    m.file_offset,
                );
                (m.id, (iid, m))
            })
            .collect();
        Stacks {
            interner,
            functions: profile
                .function
                .iter()
                .map(|f| (f.id, string(f.name)))
                .collect(),
            mappings,
            locations: profile.location.iter().map(|l| (l.id, l)).collect(),
            frames: HashMap::new(),
        }
    }

    /// The callstack of pprof `location_ids` (leaf first).
    fn callstack(&mut self, location_ids: &[u64]) -> u64 {
        let mut frames = Vec::new();
        for id in location_ids {
            if !self.frames.contains_key(id) {
                let of_location = self.location_frames(*id);
                self.frames.insert(*id, of_location);
            }
            frames.extend_from_slice(&self.frames[id]);
        }
        frames.reverse();
        self.interner.callstack(frames)
    }

    fn location_frames(&mut self, id: u64) -> Vec<u64> {
        let Some(loc) = self.locations.get(&id) else {
            return Vec::new();
        };
        let (mapping, rel_pc) = match self.mappings.get(&loc.mapping_id) {
            Some(&(iid, m)) if m.memory_start != 0 => (
                iid,
                loc.address
                    .wrapping_sub(m.memory_start)
                    .wrapping_add(m.file_offset),
            ),
            Some(&(iid, _)) => (iid, loc.address),
            None => (0, loc.address),
        };
        if loc.line.is_empty() {
            return vec![self.interner.frame("", mapping, rel_pc)];
        }
        loc.line
            .iter()
            .map(|line| {
                let name = self.functions.get(&line.function_id).copied().unwrap_or("");
                self.interner.frame(name, mapping, rel_pc)
            })
            .collect()
    }
}

/// String `i` of `profile`'s table (`""` when out of range).
fn text(profile: &Profile, i: i64) -> &str {
    profile
        .string_table
        .get(i as usize)
        .map_or("", String::as_str)
}

/// Nanoseconds in one `unit` of time, `None` for other units.
fn nanos_per(unit: &str) -> Option<f64> {
    Some(match unit {
        "nanoseconds" | "ns" => 1.0,
        "microseconds" | "us" => 1e3,
        "milliseconds" | "ms" => 1e6,
        "seconds" | "s" => 1e9,
        _ => return None,
    })
}

/// Whether `profile` is a heap profile (a `*_space` or `*_objects` sample type, or a
/// `bytes` unit), which becomes a heapprofd dump rather than perf samples.
pub fn is_heap_profile(profile: &Profile) -> bool {
    let string = |i: i64| text(profile, i);
    profile.sample_type.iter().any(|t| {
        let (ty, unit) = (string(t.r#type), string(t.unit));
        ty.ends_with("_space") || ty.ends_with("_objects") || unit == "bytes"
    })
}

/// A numeric `pid`/`tid` sample label (or a string one that parses).
fn label_u32(profile: &Profile, sample: &ember_pprof::Sample, key: &str) -> u32 {
    let string = |i: i64| text(profile, i);
    sample
        .label
        .iter()
        .find(|l| string(l.key) == key)
        .and_then(|l| {
            if l.str != 0 {
                string(l.str).parse().ok()
            } else {
                u32::try_from(l.num).ok()
            }
        })
        .unwrap_or(0)
}

/// Writes `profile` as a Perfetto trace (protobuf bytes): a heap profile as one heapprofd
/// dump, any other as `PerfSample`s (see the module documentation for the mapping).
pub fn profile_to_trace(profile: &Profile) -> (Vec<u8>, WriteSummary) {
    if is_heap_profile(profile) {
        heap_trace(profile)
    } else {
        cpu_trace(profile)
    }
}

/// A CPU profile as perf samples: one packet per counted sample.
fn cpu_trace(profile: &Profile) -> (Vec<u8>, WriteSummary) {
    let string = |i: i64| text(profile, i);
    let types: Vec<(&str, &str)> = profile
        .sample_type
        .iter()
        .map(|t| (string(t.r#type), string(t.unit)))
        .collect();
    let count_index = types.iter().position(|&(_, u)| u == "count");
    let time_index = types.iter().position(|&(_, u)| nanos_per(u).is_some());
    // What one sample stands for: the profile's period when it is a time (Go: 10 ms); for a
    // time-only profile without one, 10 ms (100 Hz). A count profile whose period is not a
    // time (Go's mutex and block profiles) has no timebase: its time values are lost.
    let period_unit = profile
        .period_type
        .as_ref()
        .and_then(|t| nanos_per(string(t.unit)));
    let period_ns = match (period_unit, count_index, time_index) {
        (Some(n), _, _) if profile.period > 0 => Some(profile.period as f64 * n),
        (_, None, Some(_)) => Some(10_000_000.0),
        _ => None,
    };
    let mut summary = WriteSummary::default();
    let mut counts: Vec<(usize, u64)> = Vec::new();
    for (k, s) in profile.sample.iter().enumerate() {
        let n = match (count_index, time_index, period_ns) {
            (Some(c), _, _) => s.value.get(c).copied().unwrap_or(0),
            (None, Some(t), Some(p)) => {
                let ns = s.value.get(t).copied().unwrap_or(0) as f64
                    * nanos_per(types[t].1).unwrap_or(1.0);
                (ns / p).round() as i64
            }
            _ => s.value.first().copied().unwrap_or(0),
        };
        if n < 0 {
            summary.negative += 1;
        } else if n > 0 {
            counts.push((k, n as u64));
        }
    }
    let total: u64 = counts.iter().map(|&(_, n)| n).sum();
    let mut period_ns = period_ns;
    if total > MAX_PERF_SAMPLES {
        let factor = MAX_PERF_SAMPLES as f64 / total as f64;
        for (_, n) in &mut counts {
            *n = (*n as f64 * factor).round() as u64;
        }
        period_ns = period_ns.map(|p| p / factor);
        summary.scaled = Some(factor);
    }
    let written: u64 = counts.iter().map(|&(_, n)| n).sum();
    let start = profile.time_nanos.max(0) as u64;
    // Spread the samples evenly over the profile's duration (or one period each).
    let span = if profile.duration_nanos > 0 {
        profile.duration_nanos as f64
    } else {
        written as f64 * period_ns.unwrap_or(1_000_000.0)
    };
    let step = span / written.max(1) as f64;
    let mut stacks = Stacks::new(profile);
    // Packets are encoded as they are made (a `Trace` is its packets one after another): a
    // million decoded packets would take hundreds of MB.
    let mut body = Vec::new();
    let mut k = 0u64;
    for &(index, n) in &counts {
        let sample = &profile.sample[index];
        let callstack_iid = stacks.callstack(&sample.location_id);
        let (pid, tid) = (
            label_u32(profile, sample, "pid"),
            label_u32(profile, sample, "tid"),
        );
        for _ in 0..n {
            let packet = TracePacket {
                timestamp: start + (k as f64 * step) as u64,
                trusted_packet_sequence_id: SEQUENCE_ID,
                sequence_flags: SEQ_NEEDS_INCREMENTAL_STATE,
                perf_sample: Some(PerfSample {
                    pid,
                    tid,
                    callstack_iid,
                    cpu_mode: CPU_MODE_USER,
                    ..Default::default()
                }),
                ..Default::default()
            };
            prost::encoding::message::encode(1, &packet, &mut body);
            k += 1;
        }
    }
    summary.perf_samples = written;
    summary.callstacks = stacks.interner.callstacks();
    let defaults = period_ns.map(|p| TracePacketDefaults {
        perf_sample_defaults: Some(PerfSampleDefaults {
            timebase: Some(Timebase {
                period: p.round() as u64,
                counter: COUNTER_SW_CPU_CLOCK,
                ..Default::default()
            }),
        }),
    });
    let first = sequence_start(SEQUENCE_ID, start, defaults, stacks.interner.into_data());
    let mut out = Trace {
        packet: vec![first],
    }
    .encode_to_vec();
    out.extend_from_slice(&body);
    (out, summary)
}

/// A heap profile as one heapprofd dump per `pid` label (and `heap` label).
fn heap_trace(profile: &Profile) -> (Vec<u8>, WriteSummary) {
    let string = |i: i64| text(profile, i);
    let index = |name: &str| {
        profile
            .sample_type
            .iter()
            .position(|t| string(t.r#type) == name)
    };
    let (alloc_n, alloc_b) = (index("alloc_objects"), index("alloc_space"));
    let (inuse_n, inuse_b) = (index("inuse_objects"), index("inuse_space"));
    // A profile of other names: its first `bytes` type is the space, its first count the objects.
    let unit_index = |unit: &str| {
        profile
            .sample_type
            .iter()
            .position(|t| string(t.unit) == unit)
    };
    let space = alloc_b.or(inuse_b).or_else(|| unit_index("bytes"));
    let objects = alloc_n.or(inuse_n).or_else(|| unit_index("count"));
    let mut summary = WriteSummary::default();
    let mut stacks = Stacks::new(profile);
    let mut dumps: BTreeMap<(u32, String), Vec<HeapSample>> = BTreeMap::new();
    for sample in &profile.sample {
        let v = |i: Option<usize>| i.and_then(|i| sample.value.get(i).copied()).unwrap_or(0);
        // What is freed is what was allocated and is no longer in use. A delta profile can
        // have more in use than it allocated (its alloc_* are deltas, inuse_* absolute):
        // heapprofd cannot say that, so alloc_* is raised to inuse_* there.
        let (mut allocated, mut count) = (v(space), v(objects));
        let mut freed = 0;
        if alloc_b.is_some() && inuse_b.is_some() {
            allocated = allocated.max(v(inuse_b));
            freed = allocated - v(inuse_b);
        }
        let mut frees = 0;
        if alloc_n.is_some() && inuse_n.is_some() {
            count = count.max(v(inuse_n));
            frees = count - v(inuse_n);
        }
        if [allocated, count, freed, frees].iter().any(|&x| x < 0) {
            summary.negative += 1;
            continue;
        }
        let heap = sample
            .label
            .iter()
            .find(|l| string(l.key) == "heap")
            .map_or("", |l| string(l.str));
        let pid = label_u32(profile, sample, "pid");
        dumps
            .entry((pid, heap.to_owned()))
            .or_default()
            .push(HeapSample {
                callstack_id: stacks.callstack(&sample.location_id),
                self_allocated: allocated as u64,
                self_freed: freed as u64,
                alloc_count: count as u64,
                free_count: frees as u64,
                ..Default::default()
            });
        summary.heap_samples += 1;
    }
    let interval = match profile.period_type.as_ref().map(|t| string(t.unit)) {
        Some("bytes") => profile.period.max(0) as u64,
        _ => 0,
    };
    let start = profile.time_nanos.max(0) as u64;
    let process_dumps = dumps
        .into_iter()
        .map(|((pid, heap_name), samples)| ProcessHeapSamples {
            pid: u64::from(pid),
            samples,
            timestamp: start,
            heap_name,
            sampling_interval_bytes: interval,
        })
        .collect();
    summary.callstacks = stacks.interner.callstacks();
    let first = sequence_start(SEQUENCE_ID, start, None, stacks.interner.into_data());
    let dump = TracePacket {
        timestamp: start,
        trusted_packet_sequence_id: SEQUENCE_ID,
        sequence_flags: SEQ_NEEDS_INCREMENTAL_STATE,
        profile_packet: Some(ProfilePacket {
            process_dumps,
            ..Default::default()
        }),
        ..Default::default()
    };
    (
        Trace {
            packet: vec![first, dump],
        }
        .encode_to_vec(),
        summary,
    )
}
