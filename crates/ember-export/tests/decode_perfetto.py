"""Decodes an Ember perfetto_daemon snapshot with Perfetto's own schema
(perfetto_trace_pb2 from the `perfetto` PyPI package) and prints a JSON
summary: every PerfSample's callstack resolved through the interned data to
function names (root first), process tree and sched_switch figures."""
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

names, frames, callstacks = {}, {}, {}
stacks, samples, switches = {}, 0, 0
processes, threads = set(), set()
cleared = set()
errors = []
for p in trace.packet:
    seq = p.trusted_packet_sequence_id
    if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
        cleared.add(seq)
    if p.HasField("interned_data"):
        d = p.interned_data
        for s in d.function_names:
            names[(seq, s.iid)] = s.str.decode("utf-8", "replace")
        for fr in d.frames:
            frames[(seq, fr.iid)] = fr.function_name_id
        for cs in d.callstacks:
            callstacks[(seq, cs.iid)] = list(cs.frame_ids)
    if p.HasField("process_tree"):
        for pr in p.process_tree.processes:
            processes.add(pr.pid)
        for th in p.process_tree.threads:
            threads.add((th.tgid, th.tid))
    if p.HasField("perf_sample"):
        s = p.perf_sample
        samples += 1
        if seq not in cleared:
            errors.append("perf_sample before incremental state was cleared")
        if (seq, s.callstack_iid) not in callstacks:
            errors.append("unknown callstack_iid %d" % s.callstack_iid)
            continue
        fn = [names.get((seq, frames.get((seq, f))), "?missing") for f in callstacks[(seq, s.callstack_iid)]]
        key = "%s;%s" % (s.pid, ";".join(fn))
        stacks[key] = stacks.get(key, 0) + 1
    if p.HasField("ftrace_events"):
        for ev in p.ftrace_events.event:
            if ev.HasField("sched_switch"):
                switches += 1

print(json.dumps({
    "samples": samples,
    "stacks": stacks,
    "sched_switches": switches,
    "processes": sorted(processes),
    "threads": len(threads),
    "function_names": sorted(set(names.values())),
    "errors": errors[:5],
}))
