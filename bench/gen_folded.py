#!/usr/bin/env python3
"""Writes a deterministic folded-stacks file with at least N distinct stacks (default 100,000).

The stacks come from random walks over a synthetic call graph, so they share prefixes the way
real profiles do (a few roots, wide middles, long tails) instead of being independent strings.
Same arguments, same bytes: the generator is seeded and uses only Python's own `random`.

Usage: gen_folded.py [N] > out.folded
"""
import random
import sys

def main() -> None:
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rng = random.Random(20261122)

    modules = ["net", "http", "db", "cache", "json", "io", "sched", "alloc", "crypto", "render",
               "parse", "codec", "rpc", "queue", "auth", "log", "fs", "mem", "sync", "util"]
    verbs = ["read", "write", "handle", "process", "encode", "decode", "lookup", "insert",
             "flush", "poll", "dispatch", "visit", "compute", "merge", "split", "hash"]
    nouns = ["request", "buffer", "frame", "node", "entry", "batch", "table", "stream", "block",
             "token", "record", "chunk", "page", "header", "value", "slice"]

    names = []
    for i in range(6000):
        style = i % 4
        m, v, n = rng.choice(modules), rng.choice(verbs), rng.choice(nouns)
        if style == 0:
            names.append(f"{m}::{n.capitalize()}::{v}_{n}")
        elif style == 1:
            names.append(f"std::vector<{m}::{n.capitalize()}>::{v}")
        elif style == 2:
            names.append(f"{m}_{v}_{n}_{i}")
        else:
            names.append(f"<{m}::{n.capitalize()}{i} as {m}::{v.capitalize()}>::{v}")
    # Each function calls a handful of others; hot paths are shared by many stacks.
    callees = [rng.sample(range(len(names)), rng.randint(2, 9)) for _ in names]
    roots = [f"worker-{i}" for i in range(8)] + ["main", "[kernel.kallsyms]"]
    entry = {root: rng.sample(range(len(names)), 5) for root in roots}

    stacks = {}
    while len(stacks) < target:
        root = rng.choice(roots)
        node = rng.choice(entry[root])
        frames = [root, names[node]]
        for _ in range(rng.randint(3, 45)):
            node = rng.choice(callees[node])
            frames.append(names[node])
        stack = ";".join(frames)
        stacks[stack] = stacks.get(stack, 0) + rng.choice((1, 1, 1, 2, 3, 5, 8, 13, 100))

    out = sys.stdout
    for stack in sorted(stacks, key=lambda s: s.encode()):
        out.write(f"{stack} {stacks[stack]}\n")

if __name__ == "__main__":
    main()
