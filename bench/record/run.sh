#!/usr/bin/env bash
# One-command benchmark of `ember record` against the pipeline it replaces
# (perf record + perf script + a collapser), on the same CPU-bound workload,
# at the same frequency and unwinding mode. Needs root (whole-host sampling).
#
#   bench/record/run.sh            # results in bench/record/RESULTS.md
#
# Env: SECONDS_OF_WORK (default 15: per-process busy time, unprofiled),
#      PROCS (default 2), FREQ (default 99), EMBER (a prebuilt release ember).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
work_s=${SECONDS_OF_WORK:-15}
procs=${PROCS:-2}
freq=${FREQ:-99}

if [ -z "${EMBER:-}" ]; then
  (cd "$root" && cargo build --release -p ember >&2)
  EMBER=${CARGO_TARGET_DIR:-$root/target}/release/ember
fi
[ -x /usr/bin/time ] || apt-get install -y time >&2
command -v perf >/dev/null || apt-get install -y linux-perf >&2 || true

# Workload: a C program splitting CPU across three functions; fixed work so
# slowdown shows as longer wall time. Frame pointers kept so fp works too.
cat > "$out/busy.c" <<'C'
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) static unsigned long spin(unsigned long n, unsigned long x) {
  for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + i; __asm__ volatile("" : "+r"(x)); }
  return x;
}
__attribute__((noinline)) void alpha(unsigned long n) { sink += spin(n * 5, sink); }
__attribute__((noinline)) void beta(unsigned long n) { sink += spin(n * 3, sink); }
__attribute__((noinline)) void gamma_(unsigned long n) { sink += spin(n * 2, sink); }
int main(int argc, char **argv) {
  unsigned long rounds = strtoul(argv[1], 0, 10);
  for (unsigned long r = 0; r < rounds; r++) { alpha(100000); beta(100000); gamma_(100000); }
  return 0;
}
C
gcc -O2 -g -fno-omit-frame-pointer -o "$out/busy" "$out/busy.c"

# Calibrate rounds for ~work_s seconds of one process alone.
t0=$(date +%s.%N); "$out/busy" 200; t1=$(date +%s.%N)
rounds=$(python3 -c "print(max(1,int(200*$work_s/($t1-$t0))))")

workload() { # runs PROCS copies, prints wall seconds
  local s e pids=(); s=$(date +%s.%N)
  for _ in $(seq "$procs"); do "$out/busy" "$rounds" & pids+=($!); done
  wait "${pids[@]}"  # only these: a profiler may run in the background
  e=$(date +%s.%N); python3 -c "print(f'{$e-$s:.2f}')"
}

# $1 = label; rest = profiler command (stopped with SIGINT when the workload ends).
profiled() {
  local label=$1; shift
  /usr/bin/time -f "%U %S %M" -o "$out/$label.time" "$@" 2>"$out/$label.err" &
  local p=$!
  sleep 1
  workload > "$out/$label.wall"
  # SIGINT to the profiler (the child of /usr/bin/time).
  pkill -INT -P "$p" || true
  wait "$p" || true
}

# /usr/bin/time may print "Command terminated by signal 2" first: use the last line.
cpu() { tail -n1 "$1" | awk '{printf "%.2f", $1+$2}'; }
rss() { tail -n1 "$1" | awk '{printf "%.1f", $3/1024}'; }

echo "baseline..." >&2
base=$(workload)

results=()
for cg in dwarf fp; do
  echo "ember $cg..." >&2
  rm -rf "$out/cache-$cg"
  XDG_CACHE_HOME="$out/cache-$cg" profiled "ember-$cg" "$EMBER" record -a -F "$freq" --call-graph "$cg" -q -o "$out/ember-$cg.folded"
  echo "perf $cg..." >&2
  profiled "perf-$cg" perf record -F "$freq" -a --call-graph "$cg" -o "$out/perf-$cg.data"
  /usr/bin/time -f "%U %S %M" -o "$out/perf-script-$cg.time" perf script --no-inline -i "$out/perf-$cg.data" > "$out/perf-$cg.txt" 2>/dev/null
  /usr/bin/time -f "%U %S %M" -o "$out/collapse-$cg.time" "$EMBER" collapse "$out/perf-$cg.txt" > "$out/perf-$cg.folded"
  e_cpu=$(cpu "$out/ember-$cg.time")
  p_cpu=$(python3 -c "print(f'{$(cpu "$out/perf-$cg.time")}+{$(cpu "$out/perf-script-$cg.time")}+{$(cpu "$out/collapse-$cg.time")}')")
  p_sum=$(python3 -c "print(f'{$p_cpu:.2f}')")
  samples_e=$(awk '{s+=$NF} END{print s}' "$out/ember-$cg.folded")
  samples_p=$(awk '{s+=$NF} END{print s}' "$out/perf-$cg.folded")
  busy_e=$(awk '/alpha;spin|beta;spin|gamma_;spin/ {s+=$NF} END{print s+0}' "$out/ember-$cg.folded")
  busy_p=$(awk '/alpha;spin|beta;spin|gamma_;spin/ {s+=$NF} END{print s+0}' "$out/perf-$cg.folded")
  results+=("| $cg | $(cat "$out/ember-$cg.wall") | $e_cpu | $(rss "$out/ember-$cg.time") | $samples_e ($busy_e in the workload) | $(cat "$out/perf-$cg.wall") | $p_cpu = $p_sum | $samples_p ($busy_p in the workload) | $(python3 -c "print(f'{$e_cpu/$p_sum:.3f}' if $p_sum>0 else 'n/a')") |")
done

# Symbolizing a large binary: record `ember collapse` (the release ember,
# ~35 MB with line tables) folding the perf text above, twice with the same
# symbol cache (cold, then warm), with and without --inline.
echo "symbolization..." >&2
sym_rows=()
for inline in "" "--inline"; do
  rm -rf "$out/cache-sym"
  for run in cold warm; do
    XDG_CACHE_HOME="$out/cache-sym" EMBER_DEBUG_RSS=1 "$EMBER" record -F 999 --call-graph dwarf $inline -o "$out/sym.folded" -- \
      sh -c "for i in $(seq -s " " 40); do '$EMBER' collapse '$out/perf-dwarf.txt' > /dev/null; done" 2> "$out/sym-$run.err"
    ms=$(sed -n 's/.*phase profile built: .*, \([0-9.]*\) ms/\1/p' "$out/sym-$run.err")
    peak=$(sed -n 's/.*phase written: peak RSS \([0-9]*\) kB.*/\1/p' "$out/sym-$run.err")
    funcs=$(tr ';' '\n' < "$out/sym.folded" | sed 's/ [0-9]*$//' | sort -u | wc -l)
    sym_rows+=("| ${inline:-plain} | $run | $ms | $funcs | $(python3 -c "print(f'{$peak/1024:.1f}')") |")
  done
done

commit=$(cd "$root" && git rev-parse --short HEAD)
{
  echo "# ember record vs perf record + perf script + ember collapse"
  echo
  echo "Command: \`bench/record/run.sh\` (SECONDS_OF_WORK=$work_s PROCS=$procs FREQ=$freq)"
  echo "Date: $(date -u +%Y-%m-%dT%H:%MZ); commit $commit; machine: $(nproc) CPUs, $(sed -n 's/model name\s*: //p' /proc/cpuinfo | head -1), $(uname -r);"
  echo "$(perf --version 2>/dev/null || echo 'perf: missing'). The host was shared with other builds (load average $(cut -d' ' -f1-3 /proc/loadavg)), so wall times are noisy."
  echo
  echo "Workload: $procs copies of a C busy loop (fixed work, $rounds rounds each); unprofiled wall time **${base} s**."
  echo "Each profiler samples the whole host (-a) at $freq Hz from 1 s before the workload until it ends."
  echo "CPU = user+sys seconds of the profiler processes (pipeline: perf record + perf script + ember collapse)."
  echo
  echo "| unwinding | workload wall under ember (s) | ember CPU (s) | ember peak RSS (MB) | ember samples | workload wall under perf (s) | pipeline CPU (s) | pipeline samples | ember/pipeline CPU |"
  echo "|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${results[@]}"
  echo
  echo "Symbolizing the release ember binary (recorded running \`ember collapse\` on the perf text above, 999 Hz, dwarf):"
  echo "time of the symbolize + pprof build phase, cold (empty symbol cache) then warm (same cache directory)."
  echo
  echo "| mode | run | symbolize ms | distinct frames | peak RSS (MB) |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${sym_rows[@]}"
} > "$here/RESULTS.md"
cat "$here/RESULTS.md"
