#!/usr/bin/env bash
# Builds the fuzz targets and runs one of them for a fixed time, single job, with an RSS limit.
#
# Usage: fuzz/run.sh TARGET [SECONDS]       (TARGET: pprof_decode | perf_script | folded | perfetto_decode |
#                                           ingest_legacy | ingest_push | ingest_grpc)
#
# Works on stable Rust: `-s none` skips AddressSanitizer (which needs -Zsanitizer); the code under
# test is safe Rust, so panics, overflow (-a keeps debug assertions and overflow checks on),
# timeouts and memory blow-ups are what we hunt. The log, with libFuzzer's final stats, goes to
# fuzz/artifacts/<target>/run.log; crashing inputs land in fuzz/artifacts/<target>/.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
target="${1:?usage: fuzz/run.sh TARGET [SECONDS]}"
seconds="${2:-600}"
cd "$here"

[[ -d "corpus/$target" ]] || ./seed.sh
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cargo fuzz build -O -a -s none "$target"

mkdir -p "artifacts/$target"
log="artifacts/$target/run.log"
rm -f fuzz-0.log
start=$(date +%s)
# -jobs=1 makes libFuzzer run one worker whose output goes to fuzz-0.log; we keep that log.
set +e
cargo fuzz run -O -a -s none "$target" "corpus/$target" -- \
    -jobs=1 -workers=1 -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -timeout=10 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="artifacts/$target/"
status=$?
set -e
end=$(date +%s)
cp fuzz-0.log "$log" 2>/dev/null || true
# The ingest targets keep their server's store on tmpfs; a killed run leaves it behind.
rm -rf /dev/shm/ember-fuzz-"$target"-*
rm -f fuzz-0.log
echo "target=$target seconds=$((end - start)) exit=$status" | tee -a "$log"
grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" || true
grep -E 'ERROR: libFuzzer|panicked|SUMMARY' "$log" | head -5 || true
exit "$status"
