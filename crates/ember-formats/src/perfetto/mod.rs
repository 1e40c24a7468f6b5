//! Perfetto traces in their native protobuf format (`.perfetto-trace`, `.pftrace`): the wire
//! types ([`proto`]), reading a trace's profiling packets into pprof ([`read_trace`],
//! [`trace_to_profile`]), writing a profile as a trace ([`profile_to_trace`]) and the
//! interning tables every Perfetto writer in Ember shares ([`Interner`]; `ember-export`'s
//! daemon writes recordings with it). [`looks_like_trace`] is what the input detector asks.
//!
//! ## Trace → pprof
//!
//! | Perfetto | pprof |
//! |---|---|
//! | `PerfSample` (traced_perf), `callstack_iid` → interned `Callstack` → `Frame`s → `function_names`, `Mapping`s | one sample of `samples/count`; `cpu/nanoseconds` too when the sequence's `perf_sample_defaults.timebase` says what a sample is (a `SW_CPU_CLOCK`/`SW_TASK_CLOCK` period, or 10⁹/frequency), and pprof's `period` is that |
//! | `PerfSample.pid`, `.tid` | numeric labels `pid`, `tid` |
//! | `StreamingProfilePacket` (Chrome): each `callstack_iid` | one `samples/count` sample (no pid/tid: those live in Chrome's track descriptors, not read) |
//! | heapprofd `ProfilePacket.process_dumps[].samples[]`: `alloc_count`, `self_allocated`, `self_freed`, `free_count` | `alloc_objects`, `alloc_space`, `inuse_objects` = alloc − free, `inuse_space` = allocated − freed; labels `pid` and `heap` (the heap name); `period` = `sampling_interval_bytes`. Values are totals since the start, so only the latest dump of each process and heap is kept (the packets of one dump, chained by `continued`, count as one). `dump_at_max` dumps (`self_max`, `self_max_count`) become both `alloc_*` and `inuse_*`, with a comment saying so |
//! | `Frame` with a function name; without one | a location with one line of that function; a location without lines (folded as `0x<address>`) |
//! | `Frame.rel_pc`, `Mapping.start`/`end`/`start_offset` | address = `start + rel_pc − start_offset` (`rel_pc` when `start` is 0); the mapping's bounds and offset |
//! | `Mapping.path_string_ids`, `build_id` | filename = each component after a `/` (`trace_processor`'s join); build id in lowercase hex |
//! | packet timestamps | `time_nanos`, `duration_nanos` (first to last sample) |
//!
//! Interned data and timebase defaults are kept per `trusted_packet_sequence_id` and start
//! afresh at `SEQ_INCREMENTAL_STATE_CLEARED` (or the older `incremental_state_cleared`);
//! heapprofd's older in-packet tables (`strings`, `frames`, `callstacks`, `mappings`) join
//! the same per-sequence tables. `compressed_packets` are inflated (at most 256 MiB each).
//! A sample naming a callstack or frame its sequence never interned is dropped and counted
//! ([`ReadStats::unresolved`]), as `trace_processor` drops it. Every other packet (ftrace,
//! track events, process trees, ...) is skipped. A trace with CPU and heap samples reads
//! into both; [`trace_to_profile`] takes the CPU one and says in a comment what it left out.
//!
//! ## pprof → trace
//!
//! | pprof | Perfetto |
//! |---|---|
//! | CPU-type profile (no `*_space`/`*_objects` type, no `bytes` unit): each sample's count (its `count`-unit value; else its time value over the period) | that many `PerfSample` packets on one sequence, timestamps spread evenly over `time_nanos` … `time_nanos + duration_nanos` (one period apart when the duration is 0), `cpu_mode` user |
//! | `period` in a time unit (else 10 ms for a time-only profile; none for a count profile whose period is not a time, e.g. Go's mutex profile, whose delays are lost) | `perf_sample_defaults.timebase`: `period` in nanoseconds, counter `SW_CPU_CLOCK`, so reading back gives `cpu/nanoseconds` again |
//! | heap profile (`alloc_objects`, `alloc_space`, `inuse_objects`, `inuse_space`; or its first `bytes` and `count` types) | one heapprofd `ProfilePacket`: one `ProcessHeapSamples` per `pid` and `heap` label, `self_allocated`/`alloc_count` from `alloc_*` (from `inuse_*` when there is no `alloc_*`), `self_freed`/`free_count` = alloc − inuse (a delta profile's sample with more in use than allocated gets alloc raised to inuse); `sampling_interval_bytes` = a `bytes` period |
//! | location (leaf first), its lines (inlined callees first) | frames of one interned callstack, root first: one frame per line, named by its function; a location without lines is an unnamed frame |
//! | mapping: filename, build id, start/limit/offset | `Mapping`: path split into components, build id as the bytes its hex spells, `start`/`end`/`start_offset`; `rel_pc` = address − start + offset |
//! | labels `pid`, `tid` (numeric, or text that parses) | `PerfSample.pid`/`.tid`, `ProcessHeapSamples.pid` |
//!
//! Lost on the way out: other labels, sample types beyond the count (and the one time type,
//! recomputed as count × period), line numbers and file names, comments, negative values
//! (a `-diff_base` profile's base: counted in [`WriteSummary::negative`]), the exact order
//! and times of samples (they are spread evenly), and a relative mapping path's missing
//! leading `/`. A CPU profile of more than [`MAX_PERF_SAMPLES`] samples is scaled down to
//! that many (each stack's count multiplied by the same factor and rounded, stacks rounding
//! to 0 left out, the timebase period divided by the factor so time totals stay close):
//! [`WriteSummary::scaled`] says by how much.

pub mod proto;
mod read;
mod write;

pub use read::{ReadStats, TraceProfiles, read_trace};
pub use write::{
    Interner, MAX_PERF_SAMPLES, WriteSummary, is_heap_profile, profile_to_trace, sequence_start,
};

use ember_pprof::Profile;

/// Why bytes could not be read as a Perfetto trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfettoError {
    /// The trace ends inside a field.
    #[error("trace cut short at byte {offset}")]
    Truncated {
        /// Where the unfinished field starts.
        offset: usize,
    },
    /// A field has a wire type protobuf does not have (or a group).
    #[error("not protobuf at byte {offset} (wire type {wire_type})")]
    Corrupt {
        /// Where the field starts.
        offset: usize,
        /// The wire type found.
        wire_type: u64,
    },
    /// A packet does not decode as a `TracePacket`.
    #[error("packet at byte {offset} does not decode: {source}")]
    Packet {
        /// Where the packet's field starts.
        offset: usize,
        /// The decoder's reason.
        source: prost::DecodeError,
    },
    /// A `compressed_packets` field does not inflate, or its packets do not decode.
    #[error("compressed packets at byte {offset}: {reason}")]
    Compressed {
        /// Where the packet holding them starts.
        offset: usize,
        /// Why.
        reason: String,
    },
    /// Compressed packets inside compressed packets (Perfetto never writes them).
    #[error("compressed packets nested inside compressed packets at byte {offset}")]
    NestedCompression {
        /// Where the packet holding them starts.
        offset: usize,
    },
    /// The trace is well-formed but holds no CPU or heap samples.
    #[error(
        "no profile samples in the trace ({packets} packets: no PerfSample, StreamingProfilePacket or heapprofd ProfilePacket with a known callstack)"
    )]
    NoSamples {
        /// Packets read.
        packets: u64,
    },
}

/// Reads a trace into one profile: its CPU samples, else its heap dumps (see the module
/// documentation). A trace with both keeps the CPU profile and notes in a pprof comment how
/// many heap samples it left out; samples dropped for callstacks never interned are noted
/// the same way.
pub fn trace_to_profile(bytes: &[u8]) -> Result<Profile, PerfettoError> {
    let read = read_trace(bytes)?;
    let stats = read.stats;
    let mut notes = Vec::new();
    let mut profile = match (read.cpu, read.heap) {
        (Some(cpu), heap) if stats.cpu_samples > 0 => {
            if heap.is_some() && stats.heap_samples > 0 {
                notes.push(format!(
                    "perfetto: {} heapprofd samples not converted (the trace also has CPU samples)",
                    stats.heap_samples
                ));
            }
            cpu
        }
        (_, Some(heap)) if stats.heap_samples > 0 => heap,
        _ => {
            return Err(PerfettoError::NoSamples {
                packets: stats.packets,
            });
        }
    };
    if stats.unresolved > 0 {
        notes.push(format!(
            "perfetto: {} samples dropped: their callstack or frames were never interned on their sequence",
            stats.unresolved
        ));
    }
    // Said where every reader of the profile sees it: `go tool pprof -comments`.
    for note in notes {
        profile.comment.push(profile.string_table.len() as i64);
        profile.string_table.push(note);
    }
    Ok(profile)
}

/// Whether bytes (already gunzipped) start like a Perfetto trace rather than a pprof
/// profile. Both are protobuf and both usually start with field 1 as a message (`0x0a`),
/// so this walks the first few top-level fields: a trace has only field 1 (`packet`), and a
/// packet never has field 1 or 2 as a varint, which a pprof `ValueType` (its first field)
/// always has. A packet running past the end of what is looked at is judged by its start.
pub fn looks_like_trace(bytes: &[u8]) -> bool {
    let mut rest = &bytes[..bytes.len().min(64 * 1024)];
    let mut packets = 0;
    while !rest.is_empty() && packets < 16 {
        let Ok(key) = prost::encoding::decode_varint(&mut rest) else {
            break;
        };
        if key != 0x0a {
            return false;
        }
        let Ok(len) = prost::encoding::decode_varint(&mut rest) else {
            break;
        };
        let len = (len as usize).min(rest.len());
        if !packet_start_plausible(&rest[..len]) {
            return false;
        }
        rest = &rest[len..];
        packets += 1;
    }
    packets > 0
}

/// The fields of a packet's start: valid wire types, and no varint field 1 or 2.
fn packet_start_plausible(mut body: &[u8]) -> bool {
    while !body.is_empty() {
        let Ok(key) = prost::encoding::decode_varint(&mut body) else {
            return true;
        };
        let (field, wire_type) = (key >> 3, key & 7);
        if field == 0 || (field <= 2 && wire_type == 0) {
            return false;
        }
        let skip = match wire_type {
            0 => match prost::encoding::decode_varint(&mut body) {
                Ok(_) => 0,
                Err(_) => return true,
            },
            1 => 8,
            5 => 4,
            2 => match prost::encoding::decode_varint(&mut body) {
                Ok(n) => n as usize,
                Err(_) => return true,
            },
            _ => return false,
        };
        body = &body[skip.min(body.len())..];
    }
    true
}
