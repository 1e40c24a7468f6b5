#!/usr/bin/env bash
# Ingest only, over HTTP, on the realistic workload (bench/loadgen/README.md): two ember
# binaries, OLD and NEW, run alternately (old, new, old, new, ... ROUNDS times each), each
# round on a fresh data directory with the default flush settings:
#   1. warm-up: 1,000 profiles of another seed (not measured);
#   2. live ingest: COUNT pushes (push.v1 Connect) from SERVICES services (the mix of
#      languages of the generator), CONCURRENCY keep-alive connections;
#   3. back-fill: DAY profiles of the high-churn `checkout` service (Go CPU, ~74 KB gzip'd,
#      ~650 stacks each; legacy /ingest with from/until, 16 connections).
# For 2 and 3: profiles/s, latency p50/p99 and the server's CPU (user+sys from
# /proc/PID/stat) per profile. The load generator runs on the same cores; it generates its
# profiles before it sends them (the server is idle meanwhile), and that is not timed.
# Prints a Markdown table on stdout. Environment: OLD (required), NEW (default: this tree's
# release build), LOADGEN (default: this tree's release ember-loadgen), COUNT (4000),
# DAY (4000), SERVICES (20), CONCURRENCY (64), SEED (1), ROUNDS (3).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
if [[ -z "${NEW:-}" || -z "${LOADGEN:-}" ]]; then
  (cd "$root" && cargo build --release -p ember -p ember-loadgen >&2)
fi
OLD="${OLD:?set OLD to the ember binary to compare against}"
NEW="${NEW:-$target/release/ember}"
LOADGEN="${LOADGEN:-$target/release/ember-loadgen}"
count="${COUNT:-4000}"
day="${DAY:-4000}"
services="${SERVICES:-20}"
concurrency="${CONCURRENCY:-64}"
seed="${SEED:-1}"
rounds="${ROUNDS:-3}"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
work="$(mktemp -d)"
server_pid=""
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
clk=$(getconf CLK_TCK)
results="$work/results.tsv"
: > "$results"
field() { python3 -c "import json,sys; v=json.loads(sys.argv[1]); [v := v[k] for k in sys.argv[2:]]; print(v)" "$@"; }
day_start=$(( $(date +%s) / 86400 * 86400 - 2 * 86400 ))

# One round: binary $1, label $2. Appends "label<TAB>measure<TAB>value" to the results.
round() {
  local bin="$1" label="$2" data="$work/data-$2" log="$work/server-$2.log" url
  record() { printf '%s\t%s\t%s\n' "$label" "$1" "$2" >> "$results"; }
  echo '{"retention_days": 0}' > "$work/config.json"
  "$bin" server --listen 127.0.0.1:0 --data-dir "$data" --config "$work/config.json" 2> "$log" &
  server_pid=$!
  for _ in $(seq 600); do grep -q "listening on" "$log" 2>/dev/null && break; sleep 0.05; done
  url="http://$(sed -n 's/.*listening on http:\/\/\([^,]*\),.*/\1/p' "$log" | head -1)"
  cpu() { awk -v t="$clk" '{print ($14+$15)/t}' "/proc/$server_pid/stat"; }
  # $1: measure name; the rest: load generator arguments. Records rate, latency, CPU.
  measured() {
    local name="$1" out c0 c1
    shift
    c0=$(cpu)
    out="$("$LOADGEN" --server "$url" --workload realistic --seed "$seed" --churn high --json "$@")"
    c1=$(cpu)
    record "$name, profiles/s" "$(printf '%.0f' "$(field "$out" profiles_per_second)")"
    record "$name, latency p50 / p99, ms" "$(printf '%.1f / %.1f' "$(field "$out" p50_ms)" "$(field "$out" p99_ms)")"
    record "$name, server CPU per profile, ms" "$(python3 -c "print(f'{1000*($c1-$c0)/$(field "$out" ok):.3f}')")"
    if [[ $label == old-1 ]]; then
      echo "$name: $(field "$out" workload)" >> "$work/workloads"
    fi
  }
  "$LOADGEN" --server "$url" --workload realistic --services "$services" --seed $((seed + 1000)) -n 1000 -c "$concurrency" --json > /dev/null
  measured "live ingest ($services services)" --services "$services" -n "$count" -c "$concurrency"
  measured "back-fill (checkout, Go CPU)" --services 1 --backfill-from "$day_start" --step 10 -n "$day" -c 16
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" || true
  server_pid=""
  rm -rf "$data"
}

for r in $(seq "$rounds"); do
  round "$OLD" "old-$r"
  round "$NEW" "new-$r"
done

load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
echo "## Ingest over HTTP: old against new ($(date -u +%Y-%m-%dT%H:%MZ))"
echo
echo "\`bench/server/ingest-ab.sh\` COUNT=$count DAY=$day SERVICES=$services CONCURRENCY=$concurrency SEED=$seed ROUNDS=$rounds;"
echo "OLD=$OLD ($(sha256sum "$OLD" | cut -c1-12)), NEW=$NEW ($(sha256sum "$NEW" | cut -c1-12)); $(nproc) cores, load average before: $load_before, after: $load_after."
echo
python3 - "$results" <<'PY'
import sys
rows, labels = {}, []
for line in open(sys.argv[1]):
    label, measure, value = line.rstrip("\n").split("\t")
    if label not in labels:
        labels.append(label)
    rows.setdefault(measure, {})[label] = value
print("| measure | " + " | ".join(labels) + " |")
print("|---|" + "---|" * len(labels))
for measure, values in rows.items():
    print(f"| {measure} | " + " | ".join(values.get(l, "") for l in labels) + " |")
PY
echo
python3 - "$work/workloads" <<'PY'
import ast, sys
for line in open(sys.argv[1]):
    name, raw = line.rstrip("\n").split(": ", 1)
    w = ast.literal_eval(raw)
    print(f"Workload, {name}: {w['profiles']} profiles from {w['services']} service(s); "
          f"mean {w['mean_kb']:.1f} KB gzip'd, {w['mean_samples']:.0f} samples and {w['mean_stacks']:.0f} stacks per profile, "
          f"{w['distinct_stacks']} distinct stacks.  ")
PY
