#!/usr/bin/env python3
"""Seeds for the ingest fuzz targets (ingest_legacy, ingest_push, ingest_grpc).

Each seed is one request as the targets read it: a flags byte, a shape byte, the payload
(see the doc comment of each target). Besides well-formed requests built around real pprof
files and folded stacks of the corpora, they hold the nested compressed payloads the server
must peel or refuse: gzip inside gzip (body encoding around gzip'd profiles, and profiles
gzip'd twice), bombs (a few KiB inflating past the 4 MiB cap of the fuzzed server), nested
bombs (a bomb gzip'd again) and many small bombs in one request (each under the cap, all
together far over it).

Usage: seed_ingest.py CORPORA_DIR OUT_DIR   (writes OUT_DIR/ingest_{legacy,push,grpc}/)
"""

import base64
import gzip
import json
import os
import struct
import sys

SEP = b"\xffEMB"
MAX_SEED = 60 * 1024  # under run.sh's -max_len=65536 with room for the two header bytes


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


def bomb(n):
    """gzip of n zero bytes: about n/1000 bytes on the wire."""
    return gz(b"\0" * n)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(tag, data):
    """A length-delimited protobuf field."""
    return varint(tag << 3 | 2) + varint(len(data)) + data


def push_request(series):
    """series: [(labels dict, [raw profile bytes])] -> PushRequest bytes."""
    out = b""
    for labels, samples in series:
        s = b""
        for k, v in labels.items():
            s += field(1, field(1, k.encode()) + field(2, v.encode()))
        for raw in samples:
            s += field(2, field(1, raw))
        out += field(1, s)
    return out


def push_json(series):
    return json.dumps({
        "series": [{
            "labels": [{"name": k, "value": v} for k, v in labels.items()],
            "samples": [{"rawProfile": base64.b64encode(raw).decode()} for raw in samples],
        } for labels, samples in series]
    }).encode()


def grpc_frame(message, compressed=False):
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(message)) + message


LABELS = {"__name__": "process_cpu", "service_name": "seed"}


def main():
    corpora, out = sys.argv[1], sys.argv[2]
    profiles = []  # raw (gunzipped) pprof bytes, small ones
    with open(os.path.join(corpora, "pprof-cases.tsv")) as f:
        next(f)
        for line in f:
            path = os.path.join(corpora, line.split("\t")[0])
            if not os.path.isfile(path):
                continue
            data = open(path, "rb").read()
            if data[:2] == b"\x1f\x8b":
                try:
                    data = gzip.decompress(data)
                except Exception:
                    continue
            # profile.proto starts with its sample types (field 1); legacy text and binary
            # formats do not, and one of them is enough (the store only names them).
            if len(data) <= 12 * 1024 and data[:1] == b"\x0a":
                profiles.append(data)
    folded = []
    fdir = os.path.join(corpora, "inferno/tests/data/flamegraph")
    for root, _, files in os.walk(fdir):
        for name in sorted(files):
            data = open(os.path.join(root, name), "rb").read()
            if name.endswith(".txt") and len(data) <= 16 * 1024:
                folded.append(data)
    profiles.sort(key=len)
    folded.sort(key=len)
    small = profiles[:12]
    # A valid profile that inflates to ~1 MiB: a small one plus one long string-table entry
    # (a repeated field may be appended), so bombs also reach the parser and the head.
    fat = gz(small[0] + field(6, b"a" * (1 << 20)))

    seeds = {"ingest_legacy": [], "ingest_push": [], "ingest_grpc": []}

    def add(target, flags, shape, payload):
        data = bytes([flags, shape]) + payload
        if len(data) <= MAX_SEED:
            seeds[target].append(data)

    # --- legacy /ingest: flags bits 0-1 format, 2 harness gzip, 6 body already gzip,
    #     3 gzip the profile, 4 sample_type_config, 5 average, 7 multipart as given
    for i, text in enumerate(folded[:10]):
        add("ingest_legacy", 0, i, text)                      # folded
        add("ingest_legacy", 64, i, gz(text))                 # folded, gzip'd body
        add("ingest_legacy", 1 | 32, i, text)                 # lines, average
    for i, p in enumerate(small):
        add("ingest_legacy", 2, i, p)                         # raw pprof
        add("ingest_legacy", 2 | 64, i, gz(gz(p)))            # body gzip around a gzip'd pprof
        add("ingest_legacy", 2 | 64, i, gz(gz(gz(p))))        # one gzip too many
        add("ingest_legacy", 3 | 8, i, p)                     # multipart, gzip'd profile
        cfg = json.dumps({"cpu": {"display-name": "renamed", "units": "objects"},
                          "samples": {"units": "bytes"}}).encode()
        add("ingest_legacy", 3 | 16, i, cfg + SEP + p)        # multipart with sample_type_config
        b = b"FUZZ"
        body = (b"--" + b + b'\r\nContent-Disposition: form-data; name="profile"; filename="p"\r\n\r\n'
                + gz(p) + b"\r\n--" + b + b'\r\nContent-Disposition: form-data; name="sample_type_config"\r\n\r\n'
                + cfg + b"\r\n--" + b + b"--\r\n")
        add("ingest_legacy", 128, i, body)                    # multipart as given
        add("ingest_legacy", 128 | 64, i, gz(body))           # ... inside a gzip'd body
    add("ingest_legacy", 64, 0, bomb(8 << 20))                # body bomb past the cap
    add("ingest_legacy", 2 | 64, 0, gz(bomb(64 << 20)))      # nested bomb: body gzip of a bomb
    add("ingest_legacy", 2, 0, bomb(3 << 20))                 # profile bomb under the cap
    add("ingest_legacy", 2, 0, fat)                           # valid profile, 1 MiB inflated
    add("ingest_legacy", 3 | 16, 0, b'{"cpu":{"units":"objects"}}' + SEP + fat)
    add("ingest_legacy", 2, 0, bomb(16 << 20))                # profile bomb over the cap
    add("ingest_legacy", 3, 0, gz(bomb(32 << 20)))            # multipart: gzip of a bomb
    add("ingest_legacy", 0, 0, b"a;b;c 1\na;b 2\n")
    add("ingest_legacy", 0, 0, b"a;b;c 9223372036854775807\nx -5\n\n")

    # --- push.v1 Connect: bit 0 JSON, 1 structured, 2 harness gzip, 3/4 gzip profiles once/twice,
    #     5 x-protobuf, 6 body already gzip
    for i in range(0, len(small), 3):
        group = small[i:i + 3]
        joined = SEP.join(group)
        for flags in (2, 2 | 8, 2 | 8 | 16, 2 | 4 | 8, 2 | 1 | 8, 2 | 1 | 4 | 8 | 16):
            add("ingest_push", flags, i, joined)
        series = [(LABELS, [gz(p) for p in group])]
        req = push_request(series)
        add("ingest_push", 0, 0, req)                          # proto as given
        add("ingest_push", 64, 0, gz(req))                     # gzip body around gzip'd profiles
        add("ingest_push", 0, 0, push_request([(LABELS, [gz(gz(p)) for p in group])]))
        add("ingest_push", 1, 0, push_json(series))            # JSON as given
        add("ingest_push", 1 | 64, 0, gz(push_json(series)))
    many = push_request([(LABELS, [bomb(1 << 20)] * 40)])      # 40 small bombs: 40 MiB at once
    add("ingest_push", 0, 0, many)
    add("ingest_push", 0, 0, push_request([(LABELS, [fat] * 40)]))  # 40 valid ones
    add("ingest_push", 64, 0, gz(push_request([(LABELS, [fat] * 40)])))
    add("ingest_push", 64, 0, gz(push_request([(LABELS, [bomb(3 << 20)] * 200)])))
    add("ingest_push", 0, 0, push_request([(LABELS, [gz(bomb(64 << 20))] * 4)]))  # nested bombs
    add("ingest_push", 64, 0, bomb(8 << 20))                   # body bomb
    add("ingest_push", 64, 0, gz(bomb(64 << 20)))              # nested body bomb
    add("ingest_push", 1, 0, push_json([(LABELS, [bomb(1 << 20)] * 20)]))
    add("ingest_push", 1, 0, b'{"series":[{"labels":[{"name":"a","value":"b"}],"samples":[{"rawProfile":"!!"}]}]}')
    add("ingest_push", 2 | 8, 0, SEP.join([b"\0" * 64] * 8))

    # --- gRPC: bit 0 body as given, 1 harness gzip + flag, 2 grpc-encoding gzip, 3 structured,
    #     4/5 gzip profiles once/twice, 6 grpc+proto
    for i in range(0, len(small), 3):
        group = small[i:i + 3]
        joined = SEP.join(group)
        for flags in (8, 8 | 16, 8 | 16 | 32, 8 | 2 | 16, 8 | 2 | 16 | 64):
            add("ingest_grpc", flags, i, joined)
        req = push_request([(LABELS, [gz(p) for p in group])])
        add("ingest_grpc", 1, 0, grpc_frame(req))
        add("ingest_grpc", 1 | 4, 0, grpc_frame(gz(req), compressed=True))
        add("ingest_grpc", 0, 0, req)
        add("ingest_grpc", 2, 0, req)
    add("ingest_grpc", 1 | 4, 0, grpc_frame(bomb(8 << 20), compressed=True))
    add("ingest_grpc", 1 | 4, 0, grpc_frame(gz(push_request([(LABELS, [bomb(3 << 20)] * 200)])), compressed=True))
    add("ingest_grpc", 1, 0, grpc_frame(push_request([(LABELS, [bomb(1 << 20)] * 40)])))
    add("ingest_grpc", 1 | 4, 0, grpc_frame(gz(push_request([(LABELS, [fat] * 40)])), compressed=True))
    add("ingest_grpc", 1, 0, grpc_frame(b"\x0a\x00") + grpc_frame(b""))  # two messages
    add("ingest_grpc", 1, 0, b"\x02\x00\x00\x00\x00")                      # bad flag
    add("ingest_grpc", 1, 0, b"\x00\xff\xff\xff\xff")                      # length past the body
    add("ingest_grpc", 1, 0, grpc_frame(b"", compressed=True))             # compressed, no encoding

    for target, items in seeds.items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for n, data in enumerate(items):
            with open(os.path.join(d, "seed-%03d" % n), "wb") as f:
                f.write(data)
        print("%-13s %4d seeds" % (target, len(items)))


if __name__ == "__main__":
    main()
