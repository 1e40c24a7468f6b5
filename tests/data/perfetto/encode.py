"""Encodes each *.textproto beside this script into a binary Perfetto trace (*.pftrace)
with Perfetto's own schema (perfetto_trace_pb2 from the PyPI package `perfetto`), the way
Perfetto's diff tests turn their textprotos into traces. Run it again after adding a
textproto; the binaries are committed so the tests need no Python.

The pip package's schema declares `previous_packet_dropped` a uint32 where Perfetto's
textprotos write `true`; both are the varint 1 on the wire, so `true` is read as 1."""
import pathlib

from google.protobuf import text_format
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

here = pathlib.Path(__file__).parent
for src in sorted(here.glob("*.textproto")):
    text = src.read_text().replace("previous_packet_dropped: true", "previous_packet_dropped: 1")
    trace = text_format.Parse(text, pb.Trace())
    out = src.with_suffix(".pftrace")
    out.write_bytes(trace.SerializeToString())
    print(out.name, len(trace.packet), "packets")
