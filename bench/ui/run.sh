#!/usr/bin/env bash
# The web UI benchmark, in one command:  bench/ui/run.sh
#
# Builds `ember` (release, this checkout) unless EMBER is given, starts `ember server` on a
# fresh data directory, loads a day of one service whose merge has 100,000+ nodes
# (bench/ui/gen_day.py: 144 profiles over the last 24 h, seeded), times the day's merge as the
# page asks for it (curl, RUNS times), then drives Debian's chromium over the page
# (bench/ui/bench.mjs: navigation to the first painted flame graph, zoom, hover, redraw, search;
# RUNS page loads, median and min–max). Needs what `.ci/setup` installs (chromium, node,
# tests/browser/node_modules).
#
# With OLD (another ember binary, e.g. the previous release), a second server holding the same
# day runs beside the first and every measure alternates between the two, run by run (curl
# too), so a busy machine weighs on both alike: one table per server, "old" and "new".
# Environment:
#   EMBER             an ember binary to use (default: build target/release/ember)
#   OLD               an ember binary to compare with (default: none)
#   CARGO_TARGET_DIR  where cargo builds (default: <repo>/target)
#   RUNS              page loads and curl runs (default 7, at least 5)
#   NODES             distinct call-tree nodes of the day (default 110000)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
runs="${RUNS:-7}"
nodes="${NODES:-110000}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
if [ -z "${EMBER:-}" ]; then
  (cd "$repo" && cargo build --release -p ember --quiet)
  EMBER="$CARGO_TARGET_DIR/release/ember"
fi
work="$(mktemp -d /tmp/ember-uibench.XXXXXX)"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$work"' EXIT

# start NAME BINARY: a server on a fresh data directory holding the day; sets $addr.
start() {
  local name="$1" bin="$2" log="$work/$1.log"
  "$bin" server --listen 127.0.0.1:0 --data-dir "$work/$name" 2>"$log" &
  pids+=($!)
  for _ in $(seq 100); do grep -q "http://" "$log" && break; sleep 0.1; done
  addr="$(grep -o 'http://[0-9.:]*' "$log" | head -1)"
  echo "$name: ember server at $addr ($("$bin" --version)); loading a day of profiles:"
  python3 "$here/gen_day.py" "$addr" "$nodes" uibench
}

names=(new)
start new "$EMBER"
addrs=("$addr")
if [ -n "${OLD:-}" ]; then
  names=(old new)
  start old "$OLD"
  addrs=("$addr" "${addrs[0]}")
fi

# The server's side: the day's merge as the page asks for it (no node limit), in the JSON
# flamebearer and, where the server has it, the binary one the web UI reads (curl, alternating
# between the servers).
query='%7Bservice_name%3D%22uibench%22%7D'
echo "server: GET the day's flame graph ($runs runs each; seconds to first byte, total, bytes)"
for format in flamebearer flamebearer-bin; do
  for _ in $(seq "$runs"); do
    for i in "${!names[@]}"; do
      url="${addrs[$i]}/api/v1/query?query=$query&from=now-24h&until=now&format=$format&maxNodes=0"
      curl -s -o /dev/null -w "${names[$i]} $format %{http_code} %{time_starttransfer} %{time_total} %{size_download}\n" "$url"
    done
  done
done >"$work/curl.txt"
for format in flamebearer flamebearer-bin; do
  for name in "${names[@]}"; do
    lines="$(awk -v n="$name" -v f="$format" '$1 == n && $2 == f' "$work/curl.txt")"
    if ! grep -q " 200 " <<<"$lines"; then
      echo "  $name, format=$format: not served"
      continue
    fi
    sort -k4 -n <<<"$lines" | awk -v n="$name" -v f="$format" '{ a[NR] = $4; t[NR] = $5; b = $6 } END {
      printf "  %s, format=%s: first byte median %.0f ms (min %.0f, max %.0f); whole answer median %.0f ms; %.1f MB\n",
        n, f, 1000 * a[int((NR + 1) / 2)], 1000 * a[1], 1000 * a[NR], 1000 * t[int((NR + 1) / 2)], b / 1e6 }'
  done
done

echo "browser: $runs page loads per server"
servers=""
for i in "${!names[@]}"; do
  servers+="${servers:+, }{\"name\": \"${names[$i]}\", \"base\": \"${addrs[$i]}\"}"
done
node "$here/bench.mjs" "{\"servers\": [$servers], \"query\": \"{service_name=\\\"uibench\\\"}\", \"runs\": $runs}"
