#!/usr/bin/env bash
# A/B benchmark of `ember collapse` against inferno-collapse-perf on one perf script file.
#
# Usage: bench/collapse-ab.sh FILE [RUNS] [THREADS]
#   FILE     perf script text (e.g. bench/out/data/big.perf.txt)
#   RUNS     measured runs per tool (default 7), interleaved ember, inferno, ember, ...
#            after one untimed warm-up run of each (which also checks the outputs are equal)
#   THREADS  1 = single-threaded (`ember collapse -j 1`, `inferno-collapse-perf --nthreads 1`),
#            0 = both tools' default (default: 1)
# Environment:
#   EMBER    the ember binary (default: $CARGO_TARGET_DIR/release/ember or target/release/ember)
#   INFERNO  inferno-collapse-perf (default: found in bench/out/tools/bin, ~/.cargo/bin or PATH)
#   NICE     niceness of every measured run (default -10 when root, else 0)
#
# Prints, per tool: median wall time, median CPU time (user+sys), max RSS over all runs, and
# the inferno/ember ratios (> 1 means ember is faster or smaller). Also prints the load
# average before and after, since the figures are only comparable on a similarly loaded
# machine. CPU and RSS come from the kernel (getrusage of the child).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
file="${1:?usage: collapse-ab.sh FILE [RUNS] [THREADS]}"
runs="${2:-7}"
threads="${3:-1}"
ember="${EMBER:-${CARGO_TARGET_DIR:-$repo/target}/release/ember}"
export PATH="$here/out/tools/bin:$HOME/.cargo/bin:$PATH"
inferno="${INFERNO:-$(command -v inferno-collapse-perf)}"
if [[ -z "${NICE:-}" ]]; then NICE=0; [[ $(id -u) == 0 ]] && NICE=-10; fi

[[ -s "$file" ]] || { echo "collapse-ab.sh: no such input: $file" >&2; exit 1; }
[[ -x "$ember" ]] || { echo "collapse-ab.sh: ember binary not found: $ember" >&2; exit 1; }
[[ -x "$inferno" ]] || { echo "collapse-ab.sh: inferno-collapse-perf not found" >&2; exit 1; }

if [[ $threads == 0 ]]; then
    ember_cmd=("$ember" collapse "$file")
    inferno_cmd=("$inferno" "$file")
else
    ember_cmd=("$ember" collapse -j "$threads" "$file")
    inferno_cmd=("$inferno" --nthreads "$threads" "$file")
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Warm-up (page cache) and equality check.
"${ember_cmd[@]}" > "$tmp/ember.folded"
"${inferno_cmd[@]}" > "$tmp/inferno.folded"
if cmp -s "$tmp/ember.folded" "$tmp/inferno.folded"; then
    equal=identical
else
    equal=DIFFERENT
fi
rm -f "$tmp/ember.folded" "$tmp/inferno.folded"

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
# One measured run: wall time, user+sys CPU (bash `times` of a subshell whose only child is
# the measured command under GNU time: millisecond resolution, where /usr/bin/time's own %U/%S
# print only hundredths of a second, too coarse for the 25 MB input) and max RSS (GNU time).
one() { # tool, command...
    local tool="$1"; shift
    local start end cpu
    start=$(date +%s.%N)
    cpu=$( ( nice -n "$NICE" /usr/bin/time -f '%M' -o "$tmp/rss" "$@" > /dev/null; times ) |
        awk 'NR == 2 { split($1, u, "m"); split($2, s, "m"); printf "%.3f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
    end=$(date +%s.%N)
    echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }') $cpu $(cat "$tmp/rss")" >> "$tmp/$tool"
}
for ((i = 0; i < runs; i++)); do
    one ember "${ember_cmd[@]}"
    one inferno "${inferno_cmd[@]}"
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

median() { # file, column
    sort -g -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END {
        if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
maxcol() { sort -g -k"$2","$2" "$1" | tail -1 | awk -v c="$2" '{ print $c }'; }

ew=$(median "$tmp/ember" 1); ec=$(median "$tmp/ember" 2); er=$(maxcol "$tmp/ember" 3)
iw=$(median "$tmp/inferno" 1); ic=$(median "$tmp/inferno" 2); ir=$(maxcol "$tmp/inferno" 3)

printf 'input      %s (%s bytes)\n' "$file" "$(stat -c %s "$file")"
printf 'threads    %s   runs %s (interleaved)   nice %s   output %s\n' \
    "$([[ $threads == 0 ]] && echo default || echo "$threads")" "$runs" "$NICE" "$equal"
printf 'load avg   before %s   after %s   (%s CPUs)\n' "$load_before" "$load_after" "$(nproc)"
printf '%-8s %10s %12s %12s\n' tool 'wall s' 'user+sys s' 'max RSS KiB'
printf '%-8s %10s %12s %12s\n' ember "$ew" "$ec" "$er"
printf '%-8s %10s %12s %12s\n' inferno "$iw" "$ic" "$ir"
awk -v ew="$ew" -v ec="$ec" -v er="$er" -v iw="$iw" -v ic="$ic" -v ir="$ir" 'BEGIN {
    printf "%-8s %9.2fx %11.2fx %11.3fx\n", "ratio", iw / ew, ic / ec, ir / er }'
[[ $equal == identical ]]
