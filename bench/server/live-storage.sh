#!/usr/bin/env bash
# Bytes on disk per profile at live flush sizes, after compaction (issue 11: storage
# <= 15 % of the pprof input), and the memory and time of a compaction of live blocks.
#
#   bench/server/live-storage.sh DIR [PER_FLUSH ...]
#
# DIR holds profiles written by `ember-loadgen --workload realistic --services 20 --seed 1
# --churn high -n 9600 --write-dir DIR` (20 services, 61 KB gzip'd, ~880 stacks each). For
# each PER_FLUSH (default: 600 100) the store-level example `flush_cpu` ingests them in
# order, each series' profiles STEP seconds apart (30: a flush of 600 then spans the five
# minutes of the server's default interval), and flushes then compacts every PER_FLUSH
# profiles, as the server's timer does; it prints the bytes on disk per profile after the
# last compaction, as a share of the mean pprof input. Then four blocks of 600 profiles are
# written without compaction (by each build's own flush) and merged by `compact_rss` in a
# process of its own: its peak RSS (VmHWM) and time.
# Environment: SERVERS (see the end), SERVERS_ONLY=1 (only those);
# OLD_FLUSH_CPU / OLD_COMPACT_RSS: the same examples built from another commit,
# run before this tree's for each line; STEP (30); ROUNDS_RSS (3); CARGO_TARGET_DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
dir="${1:?usage: live-storage.sh DIR [PER_FLUSH ...]}"
shift
[ $# -gt 0 ] && sizes=("$@") || sizes=(600 100)
step="${STEP:-30}"
(cd "$root" && cargo build --release -p ember-store --example flush_cpu --example compact_rss >&2)
new_flush="$target/release/examples/flush_cpu"
new_compact="$target/release/examples/compact_rss"
count=$(($(wc -l < "$dir/index.tsv") - 1))
input=$(du -cb "$dir"/*.pb.gz | tail -1 | cut -f1)
mean=$((input / count))
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
export EMBER_BENCH_DIR="$scratch" EMBER_STEP_SECONDS="$step"
echo "input: $count profiles, mean $mean bytes gzip'd; profiles of a series ${step} s apart"
# SERVERS_ONLY=1 skips the store-level lines.
[ -n "${SERVERS_ONLY:-}" ] && sizes=()
for n in "${sizes[@]}"; do
  for which in old new; do
    bin="$new_flush"
    if [ "$which" = old ]; then
      bin="${OLD_FLUSH_CPU:-}"
      [ -n "$bin" ] || continue
    fi
    line=$("$bin" "$dir" "$n" 1 | tail -1)
    per=$(sed -E 's/.* ([0-9]+) bytes per profile/\1/' <<< "$line")
    blocks=$(sed -E 's/.*; ([0-9]+) block\(s\).*/\1/' <<< "$line")
    cpu=$(sed -E 's/.*both ([0-9.]+);.*/\1/' <<< "$line")
    awk -v w="$which" -v n="$n" -v p="$per" -v m="$mean" -v b="$blocks" -v c="$cpu" 'BEGIN {
      printf "%s: flushes of %d, compacted: %d bytes per profile (%.1f %% of the pprof input), %d blocks, flush+compaction %.3f ms CPU per profile\n", w, n, p, 100 * p / m, b, c }'
  done
done
# Four blocks of 600 without compaction, each written by the same build's flush (a build
# does not read a newer block format), then one merge of them; ROUNDS_RSS (3) times, old
# and new alternated.
for which in old new; do
  [ -n "${SERVERS_ONLY:-}" ] && break
  flush="$new_flush"
  if [ "$which" = old ]; then
    [ -n "${OLD_COMPACT_RSS:-}" ] || continue
    flush="${OLD_FLUSH_CPU:-$new_flush}"
  fi
  EMBER_KEEP_STORE="$scratch/blocks4-$which" EMBER_NO_COMPACT=1 "$flush" "$dir" 600 1 > /dev/null
  ls "$scratch/blocks4-$which/blocks"/*.blk | tail -n +5 | xargs rm -f
done
for _ in $(seq "${ROUNDS_RSS:-3}"); do
  for which in old new; do
    [ -n "${SERVERS_ONLY:-}" ] && break
    bin="$new_compact"
    if [ "$which" = old ]; then
      bin="${OLD_COMPACT_RSS:-}"
      [ -n "$bin" ] || continue
    fi
    rm -rf "$scratch/merge" && cp -r "$scratch/blocks4-$which" "$scratch/merge"
    echo "$which: $("$bin" "$scratch/merge" $((40 << 20)))"
  done
done
# With SERVERS="BIN..." (ember binaries, e.g. the previous release and this tree's), each
# runs as a server flushing every second (so loadgen's pushes, ~500-700 a second here, land
# in blocks of live size) while LOADGEN (this tree's ember-loadgen) pushes the realistic
# fleet's first COUNT (9600) profiles; then: blocks and bytes on disk per profile after the
# graceful shutdown (its final flush and compaction included), and the server's peak RSS.
if [ -n "${SERVERS:-}" ]; then
  loadgen="${LOADGEN:-$target/release/ember-loadgen}"
  count="${COUNT:-9600}"
  echo '{"flush_interval_seconds": 1}' > "$scratch/server.json"
  for bin in $SERVERS; do
    data="$scratch/server-data"
    rm -rf "$data"
    "$bin" server --listen 127.0.0.1:4071 --data-dir "$data" --config "$scratch/server.json" \
      2> "$scratch/server.log" &
    pid=$!
    for _ in $(seq 100); do
      curl -sf http://127.0.0.1:4071/ready > /dev/null && break
      sleep 0.1
    done
    "$loadgen" --server http://127.0.0.1:4071 --workload realistic --services 20 --seed 1 \
      --churn high -n "$count" -c 4 --json > "$scratch/loadgen.json"
    sleep 3
    hwm=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")
    kill -TERM "$pid"
    wait "$pid" || true
    bytes=$(du -cb "$data"/blocks/*.blk | tail -1 | cut -f1)
    blocks=$(ls "$data"/blocks/*.blk | wc -l)
    awk -v b="$bin" -v n="$count" -v by="$bytes" -v m="$mean" -v k="$blocks" -v h="$hwm" 'BEGIN {
      printf "server %s: %d pushes, %d blocks, %d bytes per profile (%.1f %% of the pprof input), peak RSS %d MiB\n", b, n, k, by / n, 100 * by / n / m, h }'
  done
fi
