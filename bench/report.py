#!/usr/bin/env python3
"""Turns bench/run.sh's raw measurements (bench/out/raw) into a Markdown report on stdout.

Usage: report.py OUT_DIR REPO_DIR EMBER_BINARY
"""
import json
import os
import platform
import statistics
import subprocess
import sys
import time


def sh(*cmd, cwd=None):
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def machine():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return cpu, mem_kb


def load_rss(raw):
    rss = {}
    path = os.path.join(raw, "rss.tsv")
    if os.path.exists(path):
        for line in open(path):
            name, kb = line.rstrip("\n").split("\t")
            rss[name] = int(kb) if kb else None
    return rss


def load_equal(raw):
    eq = {}
    path = os.path.join(raw, "equal.tsv")
    if os.path.exists(path):
        for line in open(path):
            name, verdict = line.rstrip("\n").split("\t")
            eq[name] = verdict
    return eq


def hyper(raw, name):
    path = os.path.join(raw, f"{name}.json")
    if not os.path.exists(path):
        return None
    results = json.load(open(path))["results"]
    return {r["command"]: r for r in results}


def fmt_s(r):
    return f"{r['median']:.3f} (±{r['stddev']:.3f})" if r.get("stddev") is not None else f"{r['median']:.3f}"


def cpu_s(r):
    """Mean CPU time (user + system) per run: less sensitive than wall time to other load."""
    return r["user"] + r["system"]


def mb(kb):
    return f"{kb / 1024:.0f}" if kb else "?"


def main():
    out, repo, ember = sys.argv[1:4]
    raw = os.path.join(out, "raw")
    data = os.path.join(out, "data")
    rss = load_rss(raw)
    equal = load_equal(raw)
    cpu, mem_kb = machine()
    commit_file = os.path.join(out, "commit")
    commit = open(commit_file).read().strip() if os.path.exists(commit_file) else "unknown"
    inferno = [l for l in sh("cargo", "install", "--list").splitlines() if l.startswith("inferno v")]
    inferno += [l for l in sh("cargo", "install", "--list", "--root", os.path.join(out, "tools")).splitlines()
                if l.startswith("inferno v")]
    p = print
    p("## Run")
    p()
    p(f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    p(f"- machine: {os.cpu_count()} CPUs (nproc), `{cpu}`, {mem_kb / 1024 / 1024:.1f} GiB RAM, "
      f"{platform.system()} {platform.release()}")
    p(f"- Ember commit measured: `{commit}` (built from `git archive` of that commit, release profile)")
    p(f"- Ember binary: `{ember}` ({sh(ember, '--version')})")
    p(f"- inferno: {', '.join(sorted({l.rstrip(':') for l in inferno})) or 'unknown'}")
    p(f"- hyperfine: {sh('hyperfine', '--version')}; wall times are the median of the runs (± standard deviation), "
      "seconds; CPU = mean user + system seconds per run")
    load_path = os.path.join(raw, "load.log")
    if os.path.exists(load_path):
        loads = [float(l.split()[1]) for l in open(load_path) if l.strip()]
        if loads:
            p(f"- 1-minute load average seen before each case: {min(loads):.1f} to {max(loads):.1f} "
              f"(on {os.cpu_count()} CPUs; above 1 per CPU, other work shared the machine)")
    p()

    p("## perf script → folded (`ember collapse` vs `inferno-collapse-perf`)")
    p()
    p("| input | size | threads | Ember s | inferno s | Ember MB/s | inferno MB/s | speed-up (wall) | Ember CPU s | inferno CPU s | CPU ratio | Ember peak RSS MiB | inferno peak RSS MiB | same output |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for inp in ("medium", "big"):
        path = os.path.join(data, f"{inp}.perf.txt")
        if not os.path.exists(path):
            continue
        size = os.path.getsize(path) / 1e6
        for tag, label in (("default", "default (all cores)"), ("1t", "1")):
            name = f"collapse-{inp}-{tag}"
            h = hyper(raw, name)
            if not h:
                continue
            e, i = h["ember"], h["inferno"]
            p(f"| {inp}.perf.txt | {size:.0f} MB | {label} | {fmt_s(e)} | {fmt_s(i)} | {size / e['median']:.0f} | "
              f"{size / i['median']:.0f} | **{i['median'] / e['median']:.2f}×** | {cpu_s(e):.3f} | {cpu_s(i):.3f} | {cpu_s(i) / cpu_s(e):.2f}× | {mb(rss.get(name + '.ember'))} | "
              f"{mb(rss.get(name + '.inferno'))} | {equal.get(name, '?')} |")
    p()

    p("## folded → SVG (`ember flamegraph` vs `inferno-flamegraph`, default options)")
    p()
    p("| input | size | distinct stacks | Ember s | inferno s | speed-up (wall) | Ember CPU s | inferno CPU s | CPU ratio | Ember peak RSS MiB | inferno peak RSS MiB |")
    p("|---|---|---|---|---|---|---|---|---|---|---|")
    for inp in ("synthetic-100k", "big"):
        path = os.path.join(data, f"{inp}.folded")
        name = f"flamegraph-{inp}"
        h = hyper(raw, name)
        if not h or not os.path.exists(path):
            continue
        stacks = sum(1 for _ in open(path, "rb"))
        e, i = h["ember"], h["inferno"]
        p(f"| {inp}.folded | {os.path.getsize(path) / 1e6:.0f} MB | {stacks:,} | {fmt_s(e)} | {fmt_s(i)} | "
          f"**{i['median'] / e['median']:.2f}×** | {cpu_s(e):.3f} | {cpu_s(i):.3f} | {cpu_s(i) / cpu_s(e):.2f}× | "
          f"{mb(rss.get(name + '.ember'))} | {mb(rss.get(name + '.inferno'))} |")
    p()

    path = os.path.join(raw, "pprof.jsonl")
    if os.path.exists(path):
        rows = [json.loads(l) for l in open(path) if l.strip()]
        if rows:
            med = lambda k: statistics.median(r[k] for r in rows)
            first = rows[0]
            cpu_med = statistics.median(r.get("cpu_s", float("nan")) for r in rows)
            p("## pprof decode + merge (`ember_pprof::decode` each, then one `ember_pprof::merge`)")
            p()
            p("| profiles | input (as stored, mostly gzip) | decode s | merge s | total s (wall) | profiles/s | MB/s | CPU s | profiles per CPU s | peak RSS MiB | merged samples | merged locations |")
            p("|---|---|---|---|---|---|---|---|---|---|---|---|")
            p(f"| {first['profiles']} | {first['input_bytes'] / 1e6:.1f} MB | {med('decode_s'):.3f} | {med('merge_s'):.3f} | "
              f"{med('total_s'):.3f} | {med('profiles_per_s'):.0f} | {med('mb_per_s'):.1f} | {cpu_med:.2f} | "
              f"{first['profiles'] / cpu_med:.0f} | {mb(rss.get('pprof.ember'))} | "
              f"{first['merged_samples']:,} | {first['merged_locations']:,} |")
            p()
            p(f"Median of {len(rows)} runs. No inferno counterpart (inferno does not read pprof).")
            p()


if __name__ == "__main__":
    main()
