"""Folds the PerfSample packets of a Perfetto trace with Perfetto's own schema
(perfetto_trace_pb2 from the PyPI package `perfetto`), independently of Ember's reader:
interned function names, frames and callstacks per trusted_packet_sequence_id, cleared at
SEQ_INCREMENTAL_STATE_CLEARED; prints `root;...;leaf count` lines, sorted. A frame without
a function name prints as `0x<address>` (pprof's name for a location without lines), the
address being the mapping's start + rel_pc - start_offset (rel_pc without a start)."""
import collections
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

state = {}
counts = collections.Counter()
for p in trace.packet:
    seq = p.trusted_packet_sequence_id
    if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED or seq not in state:
        state[seq] = ({}, {}, {}, {})
    names, frames, stacks, mappings = state[seq]
    if p.HasField("interned_data"):
        d = p.interned_data
        names.update((s.iid, s.str.decode("utf-8", "replace")) for s in d.function_names)
        frames.update((fr.iid, fr) for fr in d.frames)
        stacks.update((cs.iid, list(cs.frame_ids)) for cs in d.callstacks)
        mappings.update((m.iid, m) for m in d.mappings)
    if p.HasField("perf_sample"):
        parts = []
        for fid in stacks[p.perf_sample.callstack_iid]:
            fr = frames[fid]
            name = names.get(fr.function_name_id, "")
            m = mappings.get(fr.mapping_id)
            address = m.start + fr.rel_pc - m.start_offset if m and m.start else fr.rel_pc
            parts.append(name if name else hex(address))
        counts[";".join(parts)] += 1

for stack in sorted(counts):
    print(stack, counts[stack])
