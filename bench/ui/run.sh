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
# Environment:
#   EMBER             an ember binary to use (default: build target/release/ember)
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
log="$work/server.log"
"$EMBER" server --listen 127.0.0.1:0 --data-dir "$work/data" 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do grep -q "http://" "$log" && break; sleep 0.1; done
addr="$(grep -o 'http://[0-9.:]*' "$log" | head -1)"
echo "ember server at $addr ($("$EMBER" --version))"

echo "loading a day of profiles:"
python3 "$here/gen_day.py" "$addr" "$nodes" uibench

# The server's side: the day's merge as the page asks for it (flamebearer, no node limit).
query='%7Bservice_name%3D%22uibench%22%7D'
url="$addr/api/v1/query?query=$query&from=now-24h&until=now&format=flamebearer&maxNodes=0"
echo "server: GET the day's flame graph ($runs runs; seconds to first byte, total, bytes)"
for _ in $(seq "$runs"); do
  curl -s -o /dev/null -w '%{time_starttransfer} %{time_total} %{size_download}\n' "$url"
done | sort -n | awk '{ a[NR] = $1; t[NR] = $2; b = $3 } END {
  printf "  first byte: median %.0f ms (min %.0f, max %.0f); whole answer median %.0f ms; %.1f MB\n",
    1000 * a[int((NR + 1) / 2)], 1000 * a[1], 1000 * a[NR], 1000 * t[int((NR + 1) / 2)], b / 1e6 }'

echo "browser: $runs page loads"
node "$here/bench.mjs" "{\"base\": \"$addr\", \"query\": \"{service_name=\\\"uibench\\\"}\", \"runs\": $runs}"
