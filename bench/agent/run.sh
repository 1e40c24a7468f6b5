#!/usr/bin/env bash
# One-command overhead benchmark of the always-on `ember agent` (issue 5, item 6):
# target: agent CPU <= 0.5% of one core and RSS <= 64 MB at 19 Hz whole-host sampling,
# measured with the machine busy.
#   1. builds release `ember`, starts `ember server` on a free loopback port (temp data dir);
#   2. starts a busy workload on every CPU (bench/agent/busy.c: several call paths and
#      recursion depths) plus a loop spawning short-lived processes (about 10 per second);
#   3. starts the agent (whole host, 19 Hz, upload every 15 s, server exporter), warms up,
#      then samples utime+stime (/proc/PID/stat) and VmRSS/VmHWM over the window;
#   4. reports agent CPU % of one core, peak RSS, profiles sent, samples/lost (agent
#      /metrics), and the same CPU/RSS for the server (not part of the target).
# Appends a section for this run to bench/agent/RESULTS.md. Environment: EMBER (binary; default: cargo build --release),
# WARMUP (seconds, default 20), WINDOW (seconds, default 120), RESULTS (output file),
# PERF (file: also `perf record -g` the agent over the window), SPAWN=0 (no short-lived processes),
# EXPORTERS=1 (also run exporters.perf_collector and exporters.perfetto_daemon with their
# defaults — 99 Hz, 60 s dumps, 16 MiB ring with sched switches, 60 s snapshots — to file://;
# EXPORTERS=perf: the perf_collector only).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
warmup="${WARMUP:-20}"
window="${WINDOW:-120}"
results="${RESULTS:-$here/RESULTS.md}"
if [[ -z "${EMBER:-}" ]]; then
  (cd "$root" && cargo build --release -p ember >&2)
  EMBER="${CARGO_TARGET_DIR:-$root/target}/release/ember"
fi
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- "$p" 2>/dev/null || true; done
  # busy.c forks one worker per CPU into its own process group.
  [[ -n "${busy_pgid:-}" ]] && kill -- "-$busy_pgid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- server ---
echo '{"retention_days": 0, "flush_interval_seconds": 0}' > "$work/server.json"
"$EMBER" server --listen 127.0.0.1:0 --data-dir "$work/data" --config "$work/server.json" 2> "$work/server.log" &
server_pid=$!; pids+=("$server_pid")
for _ in $(seq 100); do grep -q "listening on" "$work/server.log" 2>/dev/null && break; sleep 0.1; done
addr="$(sed -n 's/.*listening on http:\/\/\([^,]*\),.*/\1/p' "$work/server.log" | head -1)"
[[ -n "$addr" ]] || { cat "$work/server.log" >&2; echo "server did not start" >&2; exit 1; }

# --- workload: every CPU busy, plus short-lived processes ---
ncpu=$(nproc)
gcc -O2 -g -fno-omit-frame-pointer -o "$work/busy" "$here/busy.c"
setsid "$work/busy" "$ncpu" &
busy_pgid=$!
if [[ "${SPAWN:-1}" != 0 ]]; then
  ( while :; do sh -c 'ls /proc >/dev/null; cat /proc/loadavg >/dev/null' ; sleep 0.1; done ) &
  pids+=("$!")
fi

# --- agent ---
cat > "$work/agent.yaml" <<YAML
admin:
  listen: 127.0.0.1:0
profiling:
  enabled: true
  cpu:
    enabled: true
    sample_rate_hz: 19
  upload_interval: 15s
  targets:
    all: true
exporters:
  server:
    url: http://$addr
YAML
if [[ "${EXPORTERS:-0}" != 0 ]]; then
  cat >> "$work/agent.yaml" <<YAML
  perf_collector:
    export_to: file://$work/bucket
    local_dir: $work/perf-spool
YAML
fi
if [[ "${EXPORTERS:-0}" != 0 && "${EXPORTERS:-0}" != perf ]]; then
  cat >> "$work/agent.yaml" <<YAML
  perfetto_daemon:
    export_to: file://$work/bucket
    local_dir: $work/perfetto-runs
YAML
fi
"$EMBER" agent --config "$work/agent.yaml" 2> "$work/agent.log" &
agent_pid=$!; pids+=("$agent_pid")
for _ in $(seq 100); do grep -qE 'admin listening"? url=' "$work/agent.log" 2>/dev/null && break; sleep 0.1; done
admin="$(sed -n 's/.*admin listening"\{0,1\} url=\(http:\/\/[^ ]*\).*/\1/p' "$work/agent.log" | head -1)"
[[ -n "$admin" ]] || { cat "$work/agent.log" >&2; echo "agent did not start" >&2; exit 1; }
echo "server http://$addr, agent admin $admin; warm-up ${warmup}s, window ${window}s" >&2
sleep "$warmup"

clk=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
status_kib() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/status"; }
metric() { curl -s "$admin/metrics" | awk -v m="$1" '$1==m {print $2}'; }
host_ticks() { awk '/^cpu / {print $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
host_idle() { awk '/^cpu / {print $5+$6}' /proc/stat; }

a0=$(ticks "$agent_pid"); s0=$(ticks "$server_pid"); h0=$(host_ticks); i0=$(host_idle)
samples0=$(metric ember_agent_samples_total); lost0=$(metric ember_agent_lost_samples_total)
sent0=$(metric ember_agent_push_sent_profiles_total)
t0=$(date +%s.%N)
if [[ -n "${PERF:-}" ]]; then
  # PERF=FILE: also record the agent's call graphs over the window (perf report -i FILE).
  perf record -q -g -F 999 -p "$agent_pid" -o "$PERF" -- sleep "$window" 2>/dev/null &
fi
max_rss=0
end=$(( $(date +%s) + window ))
while (( $(date +%s) < end )); do
  r=$(status_kib "$agent_pid" VmRSS); (( r > max_rss )) && max_rss=$r
  sleep 1
done
a1=$(ticks "$agent_pid"); s1=$(ticks "$server_pid"); h1=$(host_ticks); i1=$(host_idle)
t1=$(date +%s.%N)
samples1=$(metric ember_agent_samples_total); lost1=$(metric ember_agent_lost_samples_total)
sent1=$(metric ember_agent_push_sent_profiles_total)
enq1=$(metric ember_agent_push_enqueued_profiles_total)
dropped1=$(metric ember_agent_push_dropped_profiles_total)
errors1=$(metric ember_agent_push_errors_total)
dumps1=$(metric ember_agent_perf_collector_dumps_uploaded_total); dumps1=${dumps1:-0}
snaps1=$(metric ember_agent_perfetto_snapshots_total); snaps1=${snaps1:-0}
agent_hwm=$(status_kib "$agent_pid" VmHWM); agent_rss=$(status_kib "$agent_pid" VmRSS)
server_hwm=$(status_kib "$server_pid" VmHWM); server_rss=$(status_kib "$server_pid" VmRSS)
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)

read -r secs agent_pct server_pct host_busy agent_cpu_s server_cpu_s <<<"$(python3 - <<PY
secs = $t1 - $t0
a = ($a1 - $a0) / $clk; s = ($s1 - $s0) / $clk
busy = 1 - ($i1 - $i0) / max(1, $h1 - $h0)
print(f"{secs:.1f} {100*a/secs:.3f} {100*s/secs:.3f} {100*busy:.1f} {a:.2f} {s:.2f}")
PY
)"
samples=$(( ${samples1%.*} - ${samples0%.*} )); lost=$(( ${lost1%.*} - ${lost0%.*} ))
sent=$(( ${sent1%.*} - ${sent0%.*} ))
cpu_ok=$(python3 -c "print('PASS' if $agent_pct <= 0.5 else 'FAIL')")
[[ $(( agent_hwm <= 65536 )) == 1 ]] && rss_ok=PASS || rss_ok=FAIL

summary="agent: CPU ${agent_pct}% of one core (${agent_cpu_s} s in ${secs} s) [$cpu_ok, target <= 0.5%]; \
peak RSS $((agent_hwm / 1024)) MiB (VmHWM ${agent_hwm} KiB, max sampled VmRSS ${max_rss} KiB) [$rss_ok, target <= 64 MB]; \
samples $samples, lost $lost, profiles sent $sent in window (total enqueued $enq1, sent ${sent1%.*}, dropped $dropped1, push errors $errors1); \
server: CPU ${server_pct}% of one core, VmHWM $((server_hwm / 1024)) MiB; host busy ${host_busy}%, load average $loadavg; \
exporters=${EXPORTERS:-0} (perf dumps uploaded $dumps1, perfetto snapshots $snaps1)"
echo "$summary"

commit=$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ ! -s "$results" ]]; then
  printf '# Agent overhead benchmark (issue 5, item 6)\n\nEach run of `bench/agent/run.sh` appends a section below.\n' > "$results"
fi
cat >> "$results" <<MD

## Run at $commit ($(date -u +%Y-%m-%dT%H:%MZ))

Reproduce: \`bench/agent/run.sh\` (env: WARMUP=$warmup WINDOW=$window; EMBER=path skips the build).

- Date: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $commit
- Machine: $(nproc) CPUs, $(sed -n 's/model name\s*: //p' /proc/cpuinfo | head -1), kernel $(uname -r)
- Load average at the end of the window: $loadavg (host CPU busy during the window: ${host_busy}%)
- Workload: bench/agent/busy.c with one worker per CPU (several call paths, recursion depths 0..12,
  three leaf functions) plus a shell loop spawning short-lived processes (~10/s).
- Agent: whole host, 19 Hz per CPU, upload_interval 15s, server exporter to a local \`ember server\`;
  bucket exporters: EXPORTERS=${EXPORTERS:-0} (perf dumps uploaded $dumps1, perfetto snapshots $snaps1).
- Warm-up ${warmup} s, measurement window ${secs} s.

| Process | CPU % of one core | CPU seconds | VmHWM | VmRSS at end | Target |
|---|---|---|---|---|---|
| ember agent | ${agent_pct} | ${agent_cpu_s} | $((agent_hwm / 1024)) MiB | $((agent_rss / 1024)) MiB | CPU <= 0.5% ($cpu_ok), RSS <= 64 MB ($rss_ok) |
| ember server (not in target) | ${server_pct} | ${server_cpu_s} | $((server_hwm / 1024)) MiB | $((server_rss / 1024)) MiB | - |

Agent metrics over the window: samples $samples, lost samples $lost, profiles sent $sent.
Totals at the end: profiles enqueued $enq1, sent ${sent1%.*}, dropped $dropped1, push errors $errors1.

The agent's CPU figure is its own utime+stime from /proc/PID/stat, so it stays meaningful when
other jobs share the machine; only the load average says how busy the host was.
MD
echo "appended this run to $results" >&2
