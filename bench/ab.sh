#!/usr/bin/env bash
# Previous build against this build, interleaved in one run: bench/ab.sh OLD_EMBER NEW_EMBER [RUNS]
#
# Answers "is this change slower?" for the command-line paths: each case runs the old and the
# new binary alternately (old first in odd rounds, new first in even ones, so neither always
# gets the warmer cache), RUNS rounds after one untimed warm-up of each, and prints the median
# wall time, median CPU time (user + sys) and the highest peak RSS of each, with new/old ratios
# (< 1 means the new build is faster or smaller). The outputs of old and new are compared
# byte for byte in the warm-up round: a change that alters output is reported, not timed.
#
# Cases (inputs under bench/out/data, made by `bench/run.sh data` or by this script):
#   collapse-1t       ember collapse -j 1 on medium.perf.txt (FlameGraph's example-perf-stacks,
#                     a real perf script, repeated to 25 MB)
#   collapse-default  the same with the default worker threads
#   flamegraph        ember flamegraph on synthetic-100k.folded (100,000 distinct stacks)
#   top-pprof         ember top over a real 1.2 MB Go CPU profile (google/pprof's large.cpu)
#   pprof-merge       OLD_MERGE / NEW_MERGE (bench/pprof-merge built against each tree), when
#                     both are given in the environment: decode + merge of 1,000 Go profiles
# The server ingest and agent overhead comparisons have their own scripts (bench/server/run.sh,
# bench/agent/run.sh, each taking EMBER=...); run them alternately for old and new.
# Environment: NICE (niceness of measured runs; default -10 as root), DATA (input directory).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
old="${1:?usage: ab.sh OLD_EMBER NEW_EMBER [RUNS]}"
new="${2:?usage: ab.sh OLD_EMBER NEW_EMBER [RUNS]}"
runs="${3:-7}"
data="${DATA:-$here/out/data}"
corpora="$repo/tests/data/corpora"
if [[ -z "${NICE:-}" ]]; then NICE=0; [[ $(id -u) == 0 ]] && NICE=-10; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$data"

# Inputs, made once and kept.
if [[ ! -s "$data/medium.perf.txt" ]]; then
    gzip -dc "$corpora/FlameGraph/example-perf-stacks.txt.gz" > "$work/once.txt"
    : > "$data/medium.perf.txt"
    while (( $(stat -c %s "$data/medium.perf.txt") < 25000000 )); do
        cat "$work/once.txt" >> "$data/medium.perf.txt"; echo >> "$data/medium.perf.txt"
    done
fi
[[ -s "$data/synthetic-100k.folded" ]] || python3 "$here/gen_folded.py" 100000 > "$data/synthetic-100k.folded"
if [[ ! -s "$data/pprof-1000.list" ]]; then
    awk -F'\t' 'NR > 1 && $4 == "samples/count,cpu/nanoseconds" { print $1 }' "$corpora/pprof-cases.tsv" |
        sed "s|^|$corpora/|" > "$work/go.list"
    mapfile -t files < "$work/go.list"
    for ((i = 0; i < 1000; i++)); do echo "${files[i % ${#files[@]}]}"; done > "$data/pprof-1000.list"
fi

# One timed run: "$@" with stdout to the file $1; prints "wall cpu rss_kb". Wall and CPU time
# come from a small Python wrapper around fork/exec + wait4 (microsecond resolution; GNU time's
# is 10 ms, too coarse for the short cases); the peak RSS from GNU time, which runs the
# command as its own small child, so the wrapper's memory is not counted.
one() {
    local out="$1"; shift
    nice -n "$NICE" python3 -c '
import os, sys, time
out = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
err = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.dup2(out, 1); os.dup2(err, 2)
    os.execv("/usr/bin/time", ["time", "-f", "%M", "-o", sys.argv[4]] + sys.argv[5:])
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - start
if status != 0:
    sys.exit("failed: " + " ".join(sys.argv[5:]))
rss = open(sys.argv[4]).read().split()[-1]
print(f"{wall:.4f} {ru.ru_utime + ru.ru_stime:.4f} {rss}")
' "$out" "$work/err" unused "$work/rss" "$@" || { cat "$work/err" >&2; exit 1; }
}

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# case NAME -- OLD_CMD... -- NEW_CMD...
case_ab() {
    local name="$1"; shift; shift
    local oc=() nc=()
    while [[ "$1" != -- ]]; do oc+=("$1"); shift; done; shift
    nc=("$@")
    one "$work/old.out" "${oc[@]}" > /dev/null
    one "$work/new.out" "${nc[@]}" > /dev/null
    local same=identical
    cmp -s "$work/old.out" "$work/new.out" || same=DIFFERENT
    : > "$work/old.tsv"; : > "$work/new.tsv"
    for ((r = 1; r <= runs; r++)); do
        if (( r % 2 )); then
            one /dev/null "${oc[@]}" >> "$work/old.tsv"; one /dev/null "${nc[@]}" >> "$work/new.tsv"
        else
            one /dev/null "${nc[@]}" >> "$work/new.tsv"; one /dev/null "${oc[@]}" >> "$work/old.tsv"
        fi
    done
    local ow oc_ or_ nw nc_ nr
    ow=$(cut -d' ' -f1 "$work/old.tsv" | median); oc_=$(cut -d' ' -f2 "$work/old.tsv" | median)
    or_=$(cut -d' ' -f3 "$work/old.tsv" | sort -g | tail -1)
    nw=$(cut -d' ' -f1 "$work/new.tsv" | median); nc_=$(cut -d' ' -f2 "$work/new.tsv" | median)
    nr=$(cut -d' ' -f3 "$work/new.tsv" | sort -g | tail -1)
    awk -v n="$name" -v ow="$ow" -v oc="$oc_" -v or="$or_" -v nw="$nw" -v nc="$nc_" -v nr="$nr" -v s="$same" \
        'BEGIN { printf "| %s | %.4f / %.4f | %.4f / %.4f | %.2f | %.2f | %.1f / %.1f | %s |\n",
                 n, ow, nw, oc, nc, (ow > 0 ? nw / ow : 0), (oc > 0 ? nc / oc : 0), or / 1024, nr / 1024, s }'
}

echo "old: $old"
echo "new: $new"
echo "runs: $runs interleaved per case; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| case | wall s old / new | CPU s old / new | wall new/old | CPU new/old | peak RSS MiB old / new | output |"
echo "|---|---|---|---|---|---|---|"
case_ab collapse-1t -- "$old" collapse -j 1 "$data/medium.perf.txt" -- "$new" collapse -j 1 "$data/medium.perf.txt"
case_ab collapse-default -- "$old" collapse "$data/medium.perf.txt" -- "$new" collapse "$data/medium.perf.txt"
case_ab flamegraph -- "$old" flamegraph "$data/synthetic-100k.folded" -- "$new" flamegraph "$data/synthetic-100k.folded"
large="$corpora/pprof/internal/proftest/testdata/large.cpu"
case_ab top-pprof -- "$old" top "$large" -- "$new" top "$large"
case_ab collapse-startup -- "$old" collapse /dev/null -- "$new" collapse /dev/null
if [[ -n "${OLD_MERGE:-}" && -n "${NEW_MERGE:-}" ]]; then
    # The merge program prints timings as JSON: compare its result fields only.
    case_ab pprof-merge -- sh -c "'$OLD_MERGE' '$data/pprof-1000.list' | sed -E 's/\"(decode_s|merge_s|total_s|cpu_s|profiles_per_s|mb_per_s)\": [0-9.e-]+,? ?//g'" \
        -- sh -c "'$NEW_MERGE' '$data/pprof-1000.list' | sed -E 's/\"(decode_s|merge_s|total_s|cpu_s|profiles_per_s|mb_per_s)\": [0-9.e-]+,? ?//g'"
fi
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
