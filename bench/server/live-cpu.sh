#!/usr/bin/env bash
# A quick probe of one build's ingest CPU over HTTP: live-cpu.sh BIN [COUNT] [PERF_OUT]
# Starts `BIN server` on a fresh data directory (retention off, default flush settings),
# pushes 1,000 warm-up profiles of the realistic workload (seed 1001, not measured), then
# COUNT (2000) high-churn profiles (seed 1) from 20 services over CONC (4) connections with
# ember-loadgen, and prints the server's CPU (user+sys from /proc/PID/stat) per accepted
# profile over those pushes. With PERF_OUT, `perf record -g` samples the server meanwhile.
# Alternate two builds yourself (old, new, old, new) to compare them: see BENCHMARKS.md.
# Environment: LOADGEN (default: this tree's release ember-loadgen), CONC (4), SWITCHES=1 to
# also print the server's context switches per profile over the pushes, by thread name
# (voluntary + involuntary, from /proc/PID/task/*/status: each hand-off between threads
# is a wake-up and a switch). PERF_OPTS: `perf record` options instead of `-F 499 -g` (e.g.
# `-F 999 --call-graph dwarf,8192` for inclusive costs). PERF_STAT=1: also print
# `perf stat -e context-switches,cpu-migrations,task-clock,page-faults` of the server over
# the pushes, per profile.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin=${1:?usage: live-cpu.sh BIN [COUNT] [PERF_OUT]}
count=${2:-2000}
perf=${3:-}
LOADGEN="${LOADGEN:-${CARGO_TARGET_DIR:-$root/target}/release/ember-loadgen}"
work=$(mktemp -d "${TMPDIR:-/tmp}/ember-live.XXXX")
log=$work/log
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
echo '{"retention_days": 0}' > "$work/config.json"
"$bin" server --listen 127.0.0.1:0 --data-dir "$work/data" --config "$work/config.json" 2> "$log" &
pid=$!
for _ in $(seq 600); do grep -q "listening on" "$log" 2>/dev/null && break; sleep 0.05; done
url="http://$(sed -n 's/.*listening on http:\/\/\([^,]*\),.*/\1/p' "$log" | head -1)"
clk=$(getconf CLK_TCK)
cpu() { awk -v t="$clk" '{print ($14+$15)/t}' "/proc/$pid/stat"; }
# "name switches" per live thread (threads of one name summed).
switches() {
  for t in /proc/"$pid"/task/*; do
    awk '/^Name:/ {n=$2} /ctxt_switches/ {s+=$2} END {print n, s}' "$t/status" 2>/dev/null || true
  done | awk '{s[$1]+=$2} END {for (n in s) print n, s[n]}' | sort
}
"$LOADGEN" --server "$url" --workload realistic --services 20 --seed 1001 -n 1000 -c 4 --json > /dev/null
fsyncs() { curl -s "$url/metrics" | awk '/^ember_wal_fsyncs_total/ {print $2}'; }
[[ -n "${SWITCHES:-}" ]] && { switches > "$work/sw0"; f0=$(fsyncs); }
c0=$(cpu)
if [[ -n "$perf" ]]; then
  # shellcheck disable=SC2086 # PERF_OPTS is a list of options
  perf record ${PERF_OPTS:--F 499 -g} -p "$pid" -o "$perf" 2>/dev/null &
  ppid=$!
  sleep 0.5
fi
if [[ -n "${PERF_STAT:-}" ]]; then
  perf stat -x, -e context-switches,cpu-migrations,task-clock,page-faults -p "$pid" \
    -o "$work/stat" 2>/dev/null &
  spid=$!
  sleep 0.2
fi
out=$("$LOADGEN" --server "$url" --workload realistic --services 20 --seed 1 --churn high \
  -n "$count" -c "${CONC:-4}" --json)
c1=$(cpu)
[[ -n "${SWITCHES:-}" ]] && { switches > "$work/sw1"; f1=$(fsyncs); }
if [[ -n "$perf" ]]; then kill -INT "$ppid"; wait "$ppid" || true; fi
[[ -n "${PERF_STAT:-}" ]] && { kill -INT "$spid"; wait "$spid" || true; }
ok=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['ok'])" "$out")
python3 -c "print(f'$bin: {1000*($c1-$c0)/$ok:.3f} ms server CPU per profile ({$ok} ok)')"
if [[ -n "${PERF_STAT:-}" ]]; then
  awk -F, -v ok="$ok" '$3 != "" && $1 ~ /^[0-9.]+$/ {printf "  perf stat %-18s %10.3f per profile\n", $3, $1/ok}' "$work/stat"
fi
if [[ -n "${SWITCHES:-}" ]]; then
  python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(f\"  {j['profiles_per_second']:.0f} profiles/s, p50 {j['p50_ms']:.1f} ms, p99 {j['p99_ms']:.1f} ms\")" "$out"
fi
if [[ -n "${SWITCHES:-}" ]]; then
  join -a 2 -e 0 -o 0,1.2,2.2 "$work/sw0" "$work/sw1" |
    awk -v ok="$ok" '{d=$3-$2; tot+=d; printf "  %-16s %6.2f switches per profile\n", $1, d/ok}
      END {printf "  %-16s %6.2f switches per profile\n", "all", tot/ok}'
  python3 -c "print(f'  log fsyncs       {($f1-$f0)/$ok:6.2f} per profile')"
  curl -s "$url/metrics" | awk '/^ember_wal_(fsyncs|sync_seconds)_total/ {v[$1]=$2}
    END {printf "  log write+fsync  %6.2f ms per fsync (whole run)\n", 1000*v["ember_wal_sync_seconds_total"]/v["ember_wal_fsyncs_total"]}' 
fi
kill -TERM "$pid"; wait "$pid" || true
