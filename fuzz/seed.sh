#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ with seed inputs taken from the shared test corpora.
#
# The corpora are not ours to redistribute, and libFuzzer grows the corpus directories while it
# runs, so the copies live only in the git-ignored fuzz/corpus/ tree and are rebuilt by this script.
#
# Usage: fuzz/seed.sh [CORPORA_DIR]   (default: tests/data/corpora in the repository, or
#                                      $EMBER_CORPORA)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
corpora="${1:-${EMBER_CORPORA:-}}"
if [[ -z "$corpora" ]]; then
    for candidate in "$repo/tests/data/corpora" "$repo/../shared/corpora"; do
        if [[ -f "$candidate/INDEX.md" ]]; then corpora="$candidate"; break; fi
    done
fi
[[ -n "$corpora" && -f "$corpora/INDEX.md" ]] || { echo "seed.sh: corpora not found (pass the path)" >&2; exit 1; }
corpora="$(cd "$corpora" && pwd)"

# Seeds above this size mostly slow libFuzzer down (it would truncate them to -max_len, which
# breaks protobuf and gzip framing anyway), so they are skipped rather than cut.
max_seed_bytes=$((256 * 1024))

# Copies $1 into corpus dir $2 under a name derived from its path; gunzips it first when $3 = gunzip
# and the file is gzip, so mutations land on the protobuf/text structure rather than on deflate.
add_seed() {
    local src="$1" dir="$2" mode="${3:-}" name dest
    name="$(echo "${src#"$corpora"/}" | tr '/' '_')"
    if [[ "$mode" == gunzip ]] && gzip -t "$src" 2>/dev/null; then
        dest="$dir/${name%.gz}"
        gzip -dc "$src" > "$dest"
    else
        dest="$dir/$name"
        cp "$src" "$dest"
    fi
    if (( $(stat -c %s "$dest") > max_seed_bytes )); then rm -f "$dest"; fi
}

# pprof_decode: every profile listed in pprof-cases.tsv (proto and legacy alike: legacy ones must
# be rejected cleanly), decompressed; the fuzz target itself also tries each input gzip-wrapped.
dir="$here/corpus/pprof_decode"
mkdir -p "$dir"
tail -n +2 "$corpora/pprof-cases.tsv" | cut -f1 | while read -r path; do
    if [[ -f "$corpora/$path" ]]; then add_seed "$corpora/$path" "$dir" gunzip; fi
done

# perf_script: every perf-script input of the collapse test cases (FlameGraph and inferno).
dir="$here/corpus/perf_script"
mkdir -p "$dir"
tail -n +2 "$corpora/perf-cases.tsv" | cut -f1 | sort -u | while read -r path; do
    if [[ -f "$corpora/$path" ]]; then add_seed "$corpora/$path" "$dir" gunzip; fi
done
for path in "$corpora"/inferno/tests/data/collapse-perf/*.txt; do
    add_seed "$path" "$dir"
done

# folded: the flame graph inputs, the collapse expected outputs and the differential inputs.
dir="$here/corpus/folded"
mkdir -p "$dir"
for path in "$corpora"/inferno/tests/data/flamegraph/*/*.txt \
            "$corpora"/inferno/tests/data/diff-folded/*.txt \
            "$corpora"/inferno/tests/data/collapse-perf/results/*.txt \
            "$corpora"/derived/FlameGraph-results-lastsample/results/*-collapsed-all.txt; do
    if [[ -f "$path" ]]; then add_seed "$path" "$dir"; fi
done

# perfetto_decode: Perfetto's own test traces (tests/data/perfetto, encoded from its textprotos).
dir="$here/corpus/perfetto_decode"
mkdir -p "$dir"
for path in "$repo"/tests/data/perfetto/*.pftrace; do
    cp "$path" "$dir/"
done

# ingest_legacy, ingest_push, ingest_grpc: requests built around the small pprof files and
# folded stacks above, with nested compressed payloads and bombs (see seed_ingest.py).
python3 "$here/seed_ingest.py" "$corpora" "$here/corpus" >/dev/null

for target in pprof_decode perf_script folded perfetto_decode ingest_legacy ingest_push ingest_grpc; do
    printf '%-13s %4d seeds\n' "$target" "$(find "$here/corpus/$target" -type f | wc -l)"
done
