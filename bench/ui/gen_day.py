#!/usr/bin/env python3
"""Loads a day of one service's CPU profiles into a running `ember server`: 144 profiles, one
every 10 minutes over the last 24 hours, whose merge is a call tree of at least NODES distinct
nodes (default 110,000) — the input of the web UI benchmark (bench/ui/run.sh).

The stacks are random walks over a synthetic call graph of Go-, Java- and Rust-style function
names, so they share prefixes the way real profiles do (a few entry points, wide middles, long
tails; depths 4 to 60). Stack weights are heavy-tailed (Pareto): a few hundred hot stacks carry
most of the time, as in a real service. Each profile holds the 300 hottest stacks (with noise)
plus its own share of the tail, so the day's merge has every stack and each profile is a
realistic few thousand stacks. Seeded: the same arguments give the same data.

Usage: gen_day.py SERVER_URL [NODES] [SERVICE]
Prints the day's node count, stack count and total.
"""
import random
import sys
import time
import urllib.request

PROFILES = 144
STEP = 600  # seconds between profiles
HOT = 300


def function_names(rng: random.Random, n: int) -> list:
    pkgs = ["net/http", "database/sql", "encoding/json", "github.com/acme/shop/internal/cart",
            "github.com/acme/shop/internal/pricing", "google.golang.org/grpc", "runtime",
            "compress/gzip", "crypto/tls", "github.com/acme/shop/pkg/cache", "bufio", "sync"]
    jpkgs = ["com/acme/shop/Checkout", "java/util/HashMap", "io/netty/channel/Pipeline",
             "org/apache/kafka/Producer", "com/fasterxml/jackson/Mapper", "java/lang/String"]
    crates = ["tokio::runtime", "hyper::proto", "serde_json::de", "acme_shop::orders", "std::io"]
    verbs = ["Read", "Write", "Handle", "Serve", "Encode", "Decode", "Lookup", "Insert", "Flush",
             "Poll", "Dispatch", "Visit", "Compute", "Merge", "Split", "Hash", "Marshal", "Scan"]
    nouns = ["Request", "Buffer", "Frame", "Node", "Entry", "Batch", "Table", "Stream", "Block",
             "Token", "Record", "Chunk", "Page", "Header", "Value", "Conn", "Tx", "Row"]
    out = []
    for i in range(n):
        v, o = rng.choice(verbs), rng.choice(nouns)
        style = i % 3
        if style == 0:
            out.append(f"{rng.choice(pkgs)}.(*{o}).{v}{o if i % 7 == 0 else ''}{i // 3 % 50 or ''}")
        elif style == 1:
            out.append(f"{rng.choice(jpkgs)}.{v.lower()}{o}{i // 3 % 40 or ''}")
        else:
            out.append(f"{rng.choice(crates)}::{o.lower()}::{v.lower()}_{o.lower()}{i // 3 % 30 or ''}")
    return out


def stacks_of_day(rng: random.Random, target_nodes: int):
    names = function_names(rng, 12000)
    callees = [rng.sample(range(len(names)), rng.randint(2, 10)) for _ in names]
    roots = ["runtime.main", "runtime.goexit", "java/lang/Thread.run", "tokio::runtime::worker::run",
             "[kernel.kallsyms] entry_SYSCALL_64"]
    entry = {r: rng.sample(range(len(names)), 6) for r in roots}
    prefixes = set()
    stacks = []
    while len(prefixes) < target_nodes:
        root = rng.choice(roots)
        f = rng.choice(entry[root])
        frames = [root]
        depth = min(60, 4 + int(rng.expovariate(1 / 14)))
        for _ in range(depth):
            frames.append(names[f])
            # Skewed choice: the first callees are the common paths.
            f = callees[f][min(int(rng.expovariate(1.3)), len(callees[f]) - 1)]
        for k in range(1, len(frames) + 1):
            prefixes.add(tuple(frames[:k]))
        stacks.append(";".join(frames))
    stacks = sorted(set(stacks))
    rng.shuffle(stacks)
    weights = [max(1, int(rng.paretovariate(1.1))) for _ in stacks]
    return stacks, weights, len(prefixes)


def main() -> None:
    server = sys.argv[1].rstrip("/")
    target = int(sys.argv[2]) if len(sys.argv) > 2 else 110_000
    service = sys.argv[3] if len(sys.argv) > 3 else "uibench"
    rng = random.Random(20261127)
    stacks, weights, nodes = stacks_of_day(rng, target)
    order = sorted(range(len(stacks)), key=lambda i: -weights[i])
    hot, tail = order[:HOT], order[HOT:]
    now = int(time.time())
    total = 0
    for p in range(PROFILES):
        lines = []
        for i in hot:
            v = max(1, int(weights[i] * rng.uniform(0.5, 1.5)))
            lines.append(f"{stacks[i]} {v}")
            total += v
        for i in tail[p::PROFILES]:
            lines.append(f"{stacks[i]} {weights[i]}")
            total += weights[i]
        # The day sits in the middle of the last 24 h (5 min to spare at each end), so a
        # benchmark of two servers loaded one after the other keeps every profile in the
        # `now-24h` window of both for its first five minutes.
        at = now - 24 * 3600 + 300 + p * STEP
        url = (f"{server}/ingest?name={service}.cpu&format=folded&from={at}&until={at + 10}"
               "&sampleRate=100&spyName=bench")
        req = urllib.request.Request(url, data="\n".join(lines).encode(), method="POST")
        with urllib.request.urlopen(req) as r:
            r.read()
    print(f"nodes={nodes} stacks={len(stacks)} total={total} profiles={PROFILES}")


if __name__ == "__main__":
    main()
