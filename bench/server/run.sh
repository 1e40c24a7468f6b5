#!/usr/bin/env bash
# One-command benchmark of `ember server` over loopback (issue 4, item 6):
#   1. ingest: `ember-loadgen` (bench/loadgen) pushes the corpus's Go CPU profiles (push.v1 Connect, protobuf)
#      with 100 distinct label sets from keep-alive connections: profiles/s, MB/s, p50/p99;
#      `--vary 100` sends 100 variants of each file (per-sample random value factors, distinct
#      timestamps) so storage is not measured on the same 4 profiles repeated;
#      server peak RSS (VmHWM) and CPU time while ingesting;
#   2. back-fill: one service's day at 10 s resolution (8,640 profiles, legacy /ingest with
#      explicit from/until in the past);
#   3. query: flame graph of that day and of one hour (best of 5, HTTP included);
#   4. storage: bytes of the data directory after the graceful-shutdown flush versus the
#      input pprof bytes.
# The ingest runs twice: with CONCURRENCY connections (16 by default) and with WIDE (64 by
# default; a fleet of agents pushes over many connections). Every push is acknowledged only
# after its WAL fsync, so with few connections the rate is bounded by connections / (fsync
# + request) latency rather than by CPU; the wide run shows what the server does when
# enough pushes are in flight to fill each group commit.
# Appends a section for this run to bench/server/RESULTS.md (earlier runs are kept, so
# figures can be compared across commits). Environment: EMBER (binary; default: cargo build --release),
# LOADGEN (the ember-loadgen binary; default: built with EMBER),
# COUNT (ingest profiles per run, default 20000), CONCURRENCY (default 16), WIDE (default 64),
# CORPORA.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
corpora="${CORPORA:-$root/tests/data/corpora}"
count="${COUNT:-20000}"
concurrency="${CONCURRENCY:-16}"
wide="${WIDE:-64}"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -z "${EMBER:-}" || -z "${LOADGEN:-}" ]]; then
  (cd "$root" && cargo build --release -p ember -p ember-loadgen >&2)
  EMBER="${EMBER:-${CARGO_TARGET_DIR:-$root/target}/release/ember}"
  LOADGEN="${LOADGEN:-${CARGO_TARGET_DIR:-$root/target}/release/ember-loadgen}"
fi
files=(
  "$corpora/pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz"
  "$corpora/pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz"
  "$corpora/pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof"
  "$corpora/pprof/internal/report/testdata/sample.cpu"
)
day_file="${files[0]}"
work="$(mktemp -d)"
trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
echo '{"retention_days": 0, "flush_interval_seconds": 0}' > "$work/config.json"
"$EMBER" server --listen 127.0.0.1:0 --data-dir "$work/data" --config "$work/config.json" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$work/server.log" 2>/dev/null && break; sleep 0.1; done
addr="$(sed -n 's/.*listening on http:\/\/\([^,]*\),.*/\1/p' "$work/server.log" | head -1)"
url="http://$addr"
clk=$(getconf CLK_TCK)
cpu_secs() { awk -v t="$clk" '{print ($14+$15)/t}' "/proc/$server_pid/stat"; }
hwm_kib() { awk '/VmHWM/ {print $2}' "/proc/$server_pid/status"; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }

# Warm-up (connections, allocator, series creation), not reported.
warm_json="$("$LOADGEN" --server "$url" -n 2000 -c "$concurrency" --label-sets 100 --service bench --vary 100 --json "${files[@]}")"
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
# One measured ingest run with $1 connections: sets ingest_json, server_cpu and loadgen_cpu
# (user+sys seconds of the server during the run, and of the load generator).
ingest_run() {
  local c0 c1
  c0=$(cpu_secs)
  ingest_json="$(/usr/bin/time -f '%U %S' -o "$work/loadgen.time" "$LOADGEN" --server "$url" -n "$count" -c "$1" --label-sets 100 --service bench --vary 100 --json "${files[@]}")"
  c1=$(cpu_secs)
  server_cpu=$(python3 -c "print(f'{$c1-$c0:.2f}')")
  loadgen_cpu=$(awk '{printf "%.2f", $1+$2}' "$work/loadgen.time")
}
ingest_run "$concurrency"
narrow_json="$ingest_json"; narrow_cpu="$server_cpu"; narrow_lg="$loadgen_cpu"
ingest_run "$wide"
wide_json="$ingest_json"; wide_cpu="$server_cpu"; wide_lg="$loadgen_cpu"
ingest_hwm=$(hwm_kib)
ingest_rss=$(rss_kib)

day_start=$(( $(date +%s) / 86400 * 86400 - 2 * 86400 ))
backfill_json="$("$LOADGEN" --server "$url" -n 8640 -c "$concurrency" --label-sets 1 --service day --backfill-from "$day_start" --step 10 --vary 100 --json "$day_file")"

best_of_5() {
  local best=999999
  for _ in 1 2 3 4 5; do
    local t
    t=$(curl -s -o "$work/out" -w '%{time_total}' "$1")
    best=$(python3 -c "print(min($best, $t*1000))")
  done
  python3 -c "import json; v=json.load(open('$work/out')); assert v['flamebearer']['numTicks'] > 0" 
  printf '%.1f' "$best"
}
q="query=$(python3 -c 'import urllib.parse; print(urllib.parse.quote("process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"day\"}"))')"
day_ms=$(best_of_5 "$url/pyroscope/render?$q&from=$day_start&until=$((day_start + 86399))&maxNodes=1024")
hour_ms=$(best_of_5 "$url/pyroscope/render?$q&from=$((day_start + 43200))&until=$((day_start + 43200 + 3599))&maxNodes=1024")
day_profiles=$(curl -s "$url/metrics" | awk '/^ember_head_profiles / {print $2}')

# Graceful shutdown folds the log into a block; it can take a while on a loaded machine.
for _ in $(seq 60); do
  kill -TERM "$server_pid" 2>/dev/null || break
  sleep 2
done
wait "$server_pid" || true
data_bytes=$(du -sb "$work/data" | cut -f1)
input_bytes=$(( $(field "$narrow_json" profile_bytes) + $(field "$wide_json" profile_bytes) + $(field "$backfill_json" profile_bytes) ))
input_bytes=$(( input_bytes + $(field "$warm_json" profile_bytes) ))
ratio=$(python3 -c "print(f'{100*$data_bytes/$input_bytes:.1f}')")

load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
results="$here/RESULTS.md"
section="$(mktemp)"
{
  echo "## Run at $commit ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "Produced by \`bench/server/run.sh\` (COUNT=$count CONCURRENCY=$concurrency WIDE=$wide) at $commit on $(date -u +%Y-%m-%dT%H:%MZ),"
  echo "$(nproc) cores, load average (1/5/15 min) before: $load_before, after: $load_after. Loopback; server and load generator share the machine."
  echo
  echo "| measure | result | target |"
  echo "|---|---|---|"
  for run in narrow wide; do
    if [[ $run == narrow ]]; then j="$narrow_json"; cpu="$narrow_cpu"; lg="$narrow_lg"; c="$concurrency"; else j="$wide_json"; cpu="$wide_cpu"; lg="$wide_lg"; c="$wide"; fi
    printf '| ingest rate, %s keep-alive connections (push.v1 Connect, %s Go CPU profiles, 100 label sets) | %.0f profiles/s, %.2f MB/s of pprof | >= 5,000 profiles/s |\n' "$c" "$count" "$(field "$j" profiles_per_second)" "$(field "$j" megabytes_per_second)"
    printf '| ingest latency, %s connections | p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms | p99 reported |\n' "$c" "$(field "$j" p50_ms)" "$(field "$j" p90_ms)" "$(field "$j" p99_ms)" "$(field "$j" max_ms)"
    printf '| server CPU while ingesting, %s connections | %s s user+sys for %.2f s wall = %s ms per profile (load generator: %s ms) | |\n' "$c" "$cpu" "$(field "$j" seconds)" "$(python3 -c "print(f'{1000*$cpu/$count:.3f}')")" "$(python3 -c "print(f'{1000*$lg/$count:.3f}')")"
    printf '| CPU-bound ceiling, %s connections: 2 cores / (server + load generator CPU per profile) | %s profiles/s | |\n' "$c" "$(python3 -c "print(f'{2*$count/($cpu+$lg):.0f}')")"
  done
  printf '| server RSS while ingesting | %s KiB at the end, peak (VmHWM) %s KiB | |\n' "$ingest_rss" "$ingest_hwm"
  printf '| back-fill (legacy /ingest, from/until) | %.0f profiles/s | |\n' "$(field "$backfill_json" profiles_per_second)"
  printf '| flame graph of one service'"'"'s day (8,640 profiles at 10 s) | %s ms | < 300 ms |\n' "$day_ms"
  printf '| flame graph of one hour (360 profiles) | %s ms | < 30 ms |\n' "$hour_ms"
  printf '| storage after flush | %s bytes for %s input pprof bytes = %s%% | <= 15%% |\n' "$data_bytes" "$input_bytes" "$ratio"
  echo
  echo "Queries are \`GET /pyroscope/render?query=process_cpu:cpu:...{service_name=\"day\"}&maxNodes=1024\`, best of 5 with curl, HTTP included."
  echo "Ingest sends 100 variants of each of the 4 corpus Go CPU profiles (\`ember-loadgen --vary 100\`: per-sample random value factors, distinct timestamps). The 2,000-profile warm-up is stored too and counted in the input bytes; every push is acknowledged only after its write-ahead-log fsync (group commit)."
  echo "Storage is \`du -sb\` of the data directory after SIGTERM (graceful shutdown folds the log into blocks); head profiles before shutdown: $day_profiles."
} > "$section"
if [[ ! -s "$results" ]]; then
  printf '# ember server benchmark\n\nEach run of `bench/server/run.sh` appends a section below.\n' > "$results"
fi
{ echo; cat "$section"; } >> "$results"
cat "$section"
rm -f "$section"
