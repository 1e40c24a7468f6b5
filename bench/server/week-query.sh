#!/usr/bin/env bash
# Cold and warm flame graphs of `checkout` on a copy of a week store (week-store.sh): starts
# BIN on a fresh copy of DIR/data, then the 7 d flame graph (maxNodes=1024, as realistic.sh)
# first (cold: the store's cache empty; with MODE=drop also the page cache, dropped after
# the copy) and best of 5 more (warm), with the server's CPU for each; then 24 h and 1 h the
# same way (first / best of 5). Prints one line. Run it for two binaries alternately
# (A B A B ...): the machine may be shared. Needs root for MODE=drop.
# Usage: bench/server/week-query.sh DIR BIN LABEL [nodrop|drop]
set -euo pipefail
dir="${1:?usage: week-query.sh DIR BIN LABEL [nodrop|drop]}" bin="${2:?}" label="${3:?}" mode="${4:-nodrop}"
cd "$dir"
rm -rf run
cp -a data run
if [[ $mode == drop ]]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
day_start=$(cat day_start)
: > run.log
t0=$(date +%s%N)
"$bin" server --listen 127.0.0.1:0 --data-dir run --config config.json 2> run.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 600); do grep -q "listening on" run.log && break; sleep 0.01; done
t1=$(date +%s%N)
url="http://$(sed -n 's/.*listening on http:\/\/\([^,]*\),.*/\1/p' run.log | head -1)"
q='query=process_cpu%3Acpu%3Ananoseconds%3Acpu%3Ananoseconds%7Bservice_name%3D%22checkout%22%7D'
get() { curl -s -o run.out -w '%{time_total}' "$url/pyroscope/render?$q&$1&maxNodes=1024" | awk '{printf "%.0f", $1*1000}'; }
series() { local first best=999999 t; first=$(get "$1"); for _ in 1 2 3 4 5; do t=$(get "$1"); (( t < best )) && best=$t; done; echo "$first/$best"; }
clk=$(getconf CLK_TCK)
cpu() { awk -v t="$clk" '{printf "%.0f", 1000*($14+$15)/t}' "/proc/$pid/stat"; }
week="from=$((day_start - 6 * 86400))&until=$((day_start + 86399))"
c0=$(cpu); f7=$(get "$week"); c1=$(cpu); cp run.out "out-$label.json"
best=999999; for _ in 1 2 3 4 5; do t=$(get "$week"); (( t < best )) && best=$t; done; c2=$(cpu)
d1=$(series "from=$day_start&until=$((day_start + 86399))")
h1=$(series "from=$((day_start + 41400))&until=$((day_start + 41400 + 3599))")
rss=$(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$pid/status")
hwm=$(awk '/VmHWM/ {printf "%.0f", $2/1024}' "/proc/$pid/status")
kill -TERM $pid; wait $pid || true
printf '%s\t%s\t7d %s/%s ms (CPU first %s ms, 5 warm %s ms)\t24h %s\t1h %s\tstart %s ms\tRSS %s MiB\tHWM %s MiB\tload %s\n' \
  "$label" "$mode" "$f7" "$best" "$((c1 - c0))" "$((c2 - c1))" "$d1" "$h1" "$(( (t1 - t0) / 1000000 ))" "$rss" "$hwm" "$(cut -d' ' -f1 /proc/loadavg)"
