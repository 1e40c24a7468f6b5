#!/usr/bin/env bash
# The cold 1 h flame graph (issue 11 item 3: < 30 ms cold) on the high-churn `checkout` day,
# with 24 h and 7 d beside it, in one of two settings:
#   restart  BIN starts on a fresh copy of DIR/data (a week store written by week-store.sh
#            with the same BIN: each build reads the blocks it writes); with DROP=1 the
#            page cache is dropped after the copy (needs root). The FIRST query is the hour
#            (nothing decoded, nothing cached), then best of 5 more; then 24 h and 7 d,
#            first and best of 5.
#   backfill BIN starts on an empty directory, the day is back-filled over HTTP (seed 1,
#            8,640 profiles at 10 s, as realistic.sh and week-store.sh), and the first hour
#            is queried right after, as realistic.sh's "flame graph 1h" line; then best of 5.
# The hour is 11:30-12:30 of the day, as realistic.sh and week-query.sh. Prints one line per
# run with the server's RSS and peak RSS and its shutdown time (SIGTERM to exit: the final
# flush and compaction). Run two builds alternately (A B A B): the machine
# may be shared.
# Usage: bench/server/hour-query.sh restart|backfill DIR BIN LABEL
#   Environment: DROP=1 (restart: drop the page cache), HOUR_ONLY=1 (restart: no 24 h and 7 d),
#   LOADGEN (backfill: ember-loadgen).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mode="${1:?usage: hour-query.sh restart|backfill DIR BIN LABEL}" dir="${2:?}" bin="${3:?}" label="${4:?}"
cd "$dir"
day_start=$(cat day_start)
rm -rf run
if [[ $mode == restart ]]; then
  cp -a data run
  if [[ ${DROP:-0} == 1 ]]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
else
  mkdir run
fi
: > run.log
"$bin" server --listen 127.0.0.1:0 --data-dir run --config config.json 2> run.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q "listening on" run.log && break; sleep 0.01; done
url="http://$(sed -n 's/.*listening on http:\/\/\([^,]*\),.*/\1/p' run.log | head -1)"
if [[ $mode == backfill ]]; then
  LOADGEN="${LOADGEN:?set LOADGEN to ember-loadgen}"
  "$LOADGEN" --server "$url" --corpora "$root/tests/data/corpora" --workload realistic --services 1 \
    --churn high --step 10 -c 16 --json --seed 1 --backfill-from "$day_start" -n 8640 > backfill.json
fi
q='query=process_cpu%3Acpu%3Ananoseconds%3Acpu%3Ananoseconds%7Bservice_name%3D%22checkout%22%7D'
get() { curl -s -o run.out -w '%{time_total}' "$url/pyroscope/render?$q&$1&maxNodes=1024" | awk '{printf "%.0f", $1*1000}'; }
series() { local first best=999999 t; first=$(get "$1"); for _ in 1 2 3 4 5; do t=$(get "$1"); (( t < best )) && best=$t; done; echo "$first/$best"; }
# The server's CPU time in ns, summed over its threads (schedstat: finer than /proc/PID/stat's
# 10 ms ticks; a thread that ends between two reads is not counted, and a query of the hour
# starts none).
cpu() { cat /proc/$pid/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }
hour="from=$((day_start + 41400))&until=$((day_start + 41400 + 3599))"
c0=$(cpu); h1=$(get "$hour"); c1=$(cpu)
best=999999; for _ in 1 2 3 4 5; do t=$(get "$hour"); (( t < best )) && best=$t; done
h1="$h1/$best"
cp run.out "hour-$label.json"
d1=-; w7=-
if [[ $mode == restart && ${HOUR_ONLY:-0} != 1 ]]; then
  d1=$(series "from=$day_start&until=$((day_start + 86399))")
  w7=$(series "from=$((day_start - 6 * 86400))&until=$((day_start + 86399))")
fi
rss=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {printf "%.0f", $2/1024}' "/proc/$pid/status")
t0=$(date +%s%N)
kill -TERM $pid; wait $pid || true
down=$(( ($(date +%s%N) - t0) / 1000000 ))
printf '%s\t%s%s\t1h first/best %s ms (server CPU of the first %s ms)\t24h %s\t7d %s\tRSS %s MiB\tHWM %s MiB\tshutdown %s ms\tload %s\n' \
  "$label" "$mode" "$([[ ${DROP:-0} == 1 && $mode == restart ]] && echo ' (page cache dropped)')" \
  "$h1" "$(( (c1 - c0) / 1000000 ))" "$d1" "$w7" "$rss" "$hwm" "$down" "$(cut -d' ' -f1 /proc/loadavg)"
