//! Perfetto trace → pprof: the packet walk (compressed packets included), per-sequence
//! interning state, and the aggregation of CPU and heap samples into two profiles.

use std::collections::HashMap;
use std::io::Read;

use ember_pprof::{Profile, ProfileBuilder, SampleLabel};
use prost::Message;

use super::PerfettoError;
use super::proto::*;

/// Most bytes one `compressed_packets` field may inflate to (zip-bomb guard).
const MAX_INFLATED: u64 = crate::input::DEFAULT_MAX_DECOMPRESSED;

/// The profiles found in one trace.
#[derive(Debug, Default)]
pub struct TraceProfiles {
    /// `PerfSample`s and Chrome's `StreamingProfilePacket` samples: `samples/count`, plus
    /// `cpu/nanoseconds` when the perf timebase says what one sample stands for.
    pub cpu: Option<Profile>,
    /// heapprofd dumps: `alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`
    /// (or, for `dump_at_max` dumps, the peak as `inuse_*`).
    pub heap: Option<Profile>,
    /// What was read and skipped.
    pub stats: ReadStats,
}

/// Counts of one read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadStats {
    /// Packets read (those inside `compressed_packets` included).
    pub packets: u64,
    /// CPU samples in the CPU profile (perf and Chrome's).
    pub cpu_samples: u64,
    /// Heap samples (per callstack) of the dumps kept.
    pub heap_samples: u64,
    /// Samples whose callstack or frames were never interned on their sequence (dropped, as
    /// `trace_processor` drops them).
    pub unresolved: u64,
    /// Packets of kinds that hold no profile samples (ftrace, track events, ...), skipped.
    pub skipped: u64,
}

/// Interned data and defaults of one `trusted_packet_sequence_id`, as of the last packet read.
#[derive(Default)]
struct Sequence {
    names: HashMap<u64, String>,
    paths: HashMap<u64, String>,
    build_ids: HashMap<u64, Vec<u8>>,
    mappings: HashMap<u64, Mapping>,
    frames: HashMap<u64, Frame>,
    callstacks: HashMap<u64, Vec<u64>>,
    /// Nanoseconds one perf sample stands for, when the timebase says.
    period_ns: Option<u64>,
    /// The time of the heapprofd dump whose last packet said `continued`: the next packet
    /// on the sequence belongs to the same dump.
    continuing: Option<u64>,
    /// Resolved callstacks (pprof location ids, leaf first), per target profile.
    cpu_stacks: HashMap<u64, Vec<u64>>,
    heap_stacks: HashMap<u64, Vec<u64>>,
}

impl Sequence {
    fn add_strings(map: &mut HashMap<u64, String>, strings: &[InternedString]) {
        for s in strings {
            map.insert(s.iid, String::from_utf8_lossy(&s.str).into_owned());
        }
    }

    fn add(&mut self, d: &InternedData) {
        Self::add_strings(&mut self.names, &d.function_names);
        Self::add_strings(&mut self.paths, &d.mapping_paths);
        for b in &d.build_ids {
            self.build_ids.insert(b.iid, b.str.clone());
        }
        self.add_tables(&d.mappings, &d.frames, &d.callstacks);
    }

    fn add_tables(&mut self, mappings: &[Mapping], frames: &[Frame], callstacks: &[Callstack]) {
        self.mappings
            .extend(mappings.iter().map(|m| (m.iid, m.clone())));
        self.frames
            .extend(frames.iter().map(|f| (f.iid, f.clone())));
        self.callstacks
            .extend(callstacks.iter().map(|c| (c.iid, c.frame_ids.clone())));
    }

    /// A heapprofd packet's own tables: one string table for names, paths and build ids.
    fn add_profile_packet(&mut self, p: &ProfilePacket) {
        for s in &p.strings {
            let text = String::from_utf8_lossy(&s.str).into_owned();
            self.build_ids.insert(s.iid, s.str.clone());
            self.paths.insert(s.iid, text.clone());
            self.names.insert(s.iid, text);
        }
        self.add_tables(&p.mappings, &p.frames, &p.callstacks);
    }

    /// The pprof locations (leaf first) of callstack `iid`, interned into `builder`; `None`
    /// when the callstack or one of its frames is unknown on this sequence.
    fn resolve(&mut self, iid: u64, builder: &mut ProfileBuilder, heap: bool) -> Option<Vec<u64>> {
        let cached = if heap {
            &self.heap_stacks
        } else {
            &self.cpu_stacks
        };
        if let Some(ids) = cached.get(&iid) {
            return Some(ids.clone());
        }
        let frames = self.callstacks.get(&iid)?;
        let mut ids = Vec::with_capacity(frames.len());
        for frame_iid in frames.iter().rev() {
            let frame = self.frames.get(frame_iid)?;
            ids.push(self.location(frame, builder));
        }
        let cache = if heap {
            &mut self.heap_stacks
        } else {
            &mut self.cpu_stacks
        };
        cache.insert(iid, ids.clone());
        Some(ids)
    }

    /// One frame as a pprof location: its mapping (path components joined as
    /// `trace_processor` joins them, each after a `/`; build id in hex), the absolute address
    /// when the mapping's start is known (else `rel_pc`), and a line of the function when
    /// the frame names one.
    fn location(&self, frame: &Frame, builder: &mut ProfileBuilder) -> u64 {
        let mapping = self.mappings.get(&frame.mapping_id);
        let mapping_id = mapping.map_or(0, |m| {
            let path: String = m
                .path_string_ids
                .iter()
                .map(|id| format!("/{}", self.paths.get(id).map_or("", String::as_str)))
                .collect();
            let build_id = self
                .build_ids
                .get(&m.build_id)
                .map(|b| hex(b))
                .unwrap_or_default();
            builder.mapping(m.start, m.end, m.start_offset, &path, &build_id)
        });
        let address = match mapping {
            Some(m) if m.start != 0 => m
                .start
                .wrapping_add(frame.rel_pc)
                .wrapping_sub(m.start_offset),
            _ => frame.rel_pc,
        };
        match self.names.get(&frame.function_name_id) {
            Some(name) if !name.is_empty() => {
                let f = builder.function(name, name, "");
                builder.location(mapping_id, address, &[(f, 0)])
            }
            _ => builder.location(mapping_id, address, &[]),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The nanoseconds one sample stands for: a clock counter's period, or one over the
/// sampling frequency.
fn period_ns(t: &Timebase) -> Option<u64> {
    let clock = matches!(t.counter, COUNTER_SW_CPU_CLOCK | COUNTER_SW_TASK_CLOCK);
    if t.period > 0 && clock {
        Some(t.period)
    } else {
        1_000_000_000u64.checked_div(t.frequency)
    }
}

/// One heap dump of a process and heap: its time and samples (locations, the four values).
type Dump = (u64, Vec<(Vec<u64>, [i64; 4])>);

/// The reader's state over the whole trace.
#[derive(Default)]
struct Reader {
    sequences: HashMap<u32, Sequence>,
    cpu: Option<ProfileBuilder>,
    heap: Option<ProfileBuilder>,
    /// Latest dump per (pid, heap name): values are totals since the start, so a later dump
    /// supersedes an earlier one; parts of one dump (`continued`) share its time.
    dumps: HashMap<(u64, String), Dump>,
    heap_interval: u64,
    dump_max: bool,
    any_period: bool,
    span: Span,
    stats: ReadStats,
}

/// First and last sample time.
#[derive(Default)]
struct Span {
    first: Option<u64>,
    last: u64,
}

impl Span {
    fn saw(&mut self, ts: u64) {
        self.first = Some(self.first.map_or(ts, |f| f.min(ts)));
        self.last = self.last.max(ts);
    }
}

impl Reader {
    fn packet(&mut self, p: TracePacket) {
        self.stats.packets += 1;
        let seq = self
            .sequences
            .entry(p.trusted_packet_sequence_id)
            .or_default();
        if p.incremental_state_cleared || p.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED != 0 {
            *seq = Sequence::default();
        }
        if let Some(t) = p
            .trace_packet_defaults
            .as_ref()
            .and_then(|d| d.perf_sample_defaults.as_ref())
            .and_then(|d| d.timebase.as_ref())
        {
            seq.period_ns = period_ns(t);
        }
        if let Some(d) = &p.interned_data {
            seq.add(d);
        }
        let ts = p.timestamp;
        if let Some(s) = &p.perf_sample {
            let period = seq.period_ns;
            let labels = [
                SampleLabel::Num("pid", i64::from(s.pid), ""),
                SampleLabel::Num("tid", i64::from(s.tid), ""),
            ];
            self.cpu_sample(
                p.trusted_packet_sequence_id,
                s.callstack_iid,
                ts,
                period,
                &labels,
            );
        } else if let Some(s) = &p.streaming_profile_packet {
            let mut t = ts as i64;
            for (k, &iid) in s.callstack_iid.iter().enumerate() {
                t += s.timestamp_delta_us.get(k).copied().unwrap_or(0) * 1000;
                let seq_id = p.trusted_packet_sequence_id;
                self.cpu_sample(seq_id, iid, t.max(0) as u64, None, &[]);
            }
        } else if let Some(profile) = &p.profile_packet {
            self.profile_packet(p.trusted_packet_sequence_id, profile, ts);
        } else if p.interned_data.is_none() && p.trace_packet_defaults.is_none() {
            self.stats.skipped += 1;
        }
    }

    fn cpu_sample(
        &mut self,
        seq_id: u32,
        callstack: u64,
        ts: u64,
        period: Option<u64>,
        labels: &[SampleLabel<'_>],
    ) {
        let builder = self.cpu.get_or_insert_with(|| {
            ProfileBuilder::new(&[("samples", "count"), ("cpu", "nanoseconds")])
        });
        let seq = self.sequences.entry(seq_id).or_default();
        // A sample without a callstack (a skipped or unwound-nothing sample) has an empty
        // stack, as in trace_processor; one naming an unknown callstack is dropped.
        let stack = if callstack == 0 {
            Some(Vec::new())
        } else {
            seq.resolve(callstack, builder, false)
        };
        let Some(stack) = stack else {
            self.stats.unresolved += 1;
            return;
        };
        self.any_period |= period.is_some();
        let ns = period.map_or(0, |p| p as i64);
        builder.add_sample(&stack, &[1, ns], labels);
        self.stats.cpu_samples += 1;
        self.span.saw(ts);
    }

    fn profile_packet(&mut self, seq_id: u32, p: &ProfilePacket, ts: u64) {
        let builder = self.heap.get_or_insert_with(|| {
            ProfileBuilder::new(&[
                ("alloc_objects", "count"),
                ("alloc_space", "bytes"),
                ("inuse_objects", "count"),
                ("inuse_space", "bytes"),
            ])
        });
        let seq = self.sequences.entry(seq_id).or_default();
        seq.add_profile_packet(p);
        // The packets of one dump share its time: the first one's.
        let base = seq.continuing.unwrap_or(ts);
        seq.continuing = p.continued.then_some(base);
        for dump in &p.process_dumps {
            let when = if dump.timestamp != 0 {
                dump.timestamp
            } else {
                base
            };
            self.heap_interval = self.heap_interval.max(dump.sampling_interval_bytes);
            let mut samples = Vec::with_capacity(dump.samples.len());
            for s in &dump.samples {
                let Some(stack) = seq.resolve(s.callstack_id, builder, true) else {
                    self.stats.unresolved += 1;
                    continue;
                };
                let c = |v: u64| v.min(i64::MAX as u64) as i64;
                let values = if s.self_allocated == 0 && (s.self_max != 0 || s.self_max_count != 0)
                {
                    // dump_at_max: the peak is what is in use; it was allocated too.
                    self.dump_max = true;
                    let (n, b) = (c(s.self_max_count), c(s.self_max));
                    [n, b, n, b]
                } else {
                    let (an, ab) = (c(s.alloc_count), c(s.self_allocated));
                    [an, ab, an - c(s.free_count), ab - c(s.self_freed)]
                };
                samples.push((stack, values));
            }
            let key = (dump.pid, dump.heap_name.clone());
            match self.dumps.get_mut(&key) {
                Some((t, kept)) if *t == when => kept.extend(samples),
                Some((t, _)) if *t > when => {}
                _ => {
                    self.dumps.insert(key, (when, samples));
                }
            }
            self.span.saw(when);
        }
    }

    fn finish(mut self) -> TraceProfiles {
        let (start, end) = (self.span.first.unwrap_or(0), self.span.last);
        let cpu = self.cpu.take().map(|mut b| {
            b.set_time(start as i64, end.saturating_sub(start) as i64);
            if self.any_period {
                b.set_period(("cpu", "nanoseconds"), 0);
            }
            let mut p = b.build();
            if !self.any_period {
                // No timebase said what a sample is: a count profile only.
                p.sample_type.truncate(1);
                for s in &mut p.sample {
                    s.value.truncate(1);
                }
            } else if let Some(s) = p.sample.first() {
                // pprof's period is one number: the first sample's (equal on every
                // sequence of one traced_perf data source).
                p.period = s.value[1] / s.value[0].max(1);
            }
            p
        });
        let heap = self.heap.take().map(|mut b| {
            let mut dumps: Vec<_> = self.dumps.into_iter().collect();
            dumps.sort_by(|a, b| a.0.cmp(&b.0));
            for ((pid, heap), (_, samples)) in &dumps {
                for (stack, values) in samples {
                    let mut labels = vec![SampleLabel::Num("pid", *pid as i64, "")];
                    if !heap.is_empty() {
                        labels.push(SampleLabel::Str("heap", heap));
                    }
                    b.add_sample(stack, values, &labels);
                    self.stats.heap_samples += 1;
                }
            }
            b.set_time(start as i64, end.saturating_sub(start) as i64);
            b.set_period(("space", "bytes"), self.heap_interval as i64);
            b.set_default_sample_type("inuse_space");
            if self.dump_max {
                b.add_comment(
                    "perfetto: dump_at_max heap dumps: alloc_* and inuse_* hold the peak",
                );
            }
            b.build()
        });
        TraceProfiles {
            cpu,
            heap,
            stats: self.stats,
        }
    }
}

/// Reads a Perfetto trace (protobuf, already gunzipped) into its CPU and heap profiles.
/// Packets of other kinds are skipped; bytes that are not a well-formed trace (cut short,
/// a field that does not decode, a `compressed_packets` blob that does not inflate) are an
/// error naming the byte offset.
pub fn read_trace(bytes: &[u8]) -> Result<TraceProfiles, PerfettoError> {
    let mut reader = Reader::default();
    for_each_packet(bytes, 0, &mut |p| reader.packet(p))?;
    Ok(reader.finish())
}

/// Walks the `Trace.packet` fields of `bytes`, inflating `compressed_packets` (one level
/// deep, as Perfetto writes them).
fn for_each_packet(
    bytes: &[u8],
    depth: u8,
    f: &mut impl FnMut(TracePacket),
) -> Result<(), PerfettoError> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let offset = bytes.len() - rest.len();
        let truncated = || PerfettoError::Truncated { offset };
        let key = prost::encoding::decode_varint(&mut rest).map_err(|_| truncated())?;
        let (field, wire_type) = (key >> 3, key & 7);
        let len = match wire_type {
            0 => {
                prost::encoding::decode_varint(&mut rest).map_err(|_| truncated())?;
                0
            }
            1 => 8,
            5 => 4,
            2 => prost::encoding::decode_varint(&mut rest).map_err(|_| truncated())?,
            _ => return Err(PerfettoError::Corrupt { offset, wire_type }),
        };
        let len = usize::try_from(len).map_err(|_| truncated())?;
        if len > rest.len() {
            return Err(truncated());
        }
        let (body, tail) = rest.split_at(len);
        rest = tail;
        if field != 1 || wire_type != 2 {
            continue;
        }
        let packet =
            TracePacket::decode(body).map_err(|source| PerfettoError::Packet { offset, source })?;
        if packet.compressed_packets.is_empty() {
            f(packet);
        } else if depth > 0 {
            return Err(PerfettoError::NestedCompression { offset });
        } else {
            let inflated = inflate(&packet.compressed_packets)
                .map_err(|reason| PerfettoError::Compressed { offset, reason })?;
            for_each_packet(&inflated, depth + 1, f).map_err(|inner| {
                PerfettoError::Compressed {
                    offset,
                    reason: inner.to_string(),
                }
            })?;
        }
    }
    Ok(())
}

fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(bytes)
        .take(MAX_INFLATED + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() as u64 > MAX_INFLATED {
        return Err(format!("inflates to more than {MAX_INFLATED} bytes"));
    }
    Ok(out)
}
