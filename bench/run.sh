#!/usr/bin/env bash
# Ember vs inferno 0.12 benchmarks, in one command:  bench/run.sh
#
# Builds `ember` (release, current checkout) and the pprof bench program, installs what is missing
# (hyperfine, GNU time and linux-perf via apt; inferno 0.12 via cargo), prepares the inputs under
# bench/out/data, times every case with hyperfine, measures peak RSS with /usr/bin/time -v, checks
# that Ember and inferno print the same folded output, and writes bench/out/results.md (+ .json).
#
# Stages can be run alone: bench/run.sh [tools|build|data|collapse|flamegraph|pprof|report]...
# Environment:
#   CARGO_TARGET_DIR  where cargo builds (default: <repo>/target)
#   BENCH_OUT         output directory (default: <repo>/bench/out, git-ignored)
#   EMBER_CORPORA     the shared test corpora (default: tests/data/corpora in the repository)
#   RUNS              hyperfine runs per command (default 5; 1 warm-up run is added)
#   RECORD_SECONDS    length of the perf recording of the big input (default 45)
#   RERECORD=1        record the big perf input again even if bench/out/data/big.perf.txt exists
#   NICE              niceness for everything measured (default -10 when root, else 0): on a
#                     shared machine this gives both tools the same, larger share of the CPUs
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
out="${BENCH_OUT:-$here/out}"
data="$out/data"
raw="$out/raw"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
runs="${RUNS:-5}"
record_seconds="${RECORD_SECONDS:-45}"
export PATH="$out/tools/bin:$HOME/.cargo/bin:$PATH"
mkdir -p "$data" "$raw"

corpora="${EMBER_CORPORA:-}"
if [[ -z "$corpora" ]]; then
    for candidate in "$repo/tests/data/corpora" "$repo/../shared/corpora"; do
        if [[ -f "$candidate/INDEX.md" ]]; then corpora="$candidate"; break; fi
    done
fi
[[ -n "$corpora" && -f "$corpora/INDEX.md" ]] || { echo "run.sh: corpora not found; set EMBER_CORPORA" >&2; exit 1; }

if [[ -z "${NICE:-}" ]]; then NICE=0; [[ $(id -u) == 0 ]] && NICE=-10; fi
measure=(nice -n "$NICE")

ember="$CARGO_TARGET_DIR/release/ember"
pprof_bench="$CARGO_TARGET_DIR/release/ember-bench-pprof-merge"

log() { printf '\n== %s\n' "$*" >&2; }

stage_tools() {
    local missing=()
    command -v hyperfine >/dev/null || missing+=(hyperfine)
    [[ -x /usr/bin/time ]] || missing+=(time)
    command -v perf >/dev/null || missing+=(linux-perf)
    command -v python3 >/dev/null || missing+=(python3)
    if ((${#missing[@]})); then
        log "apt-get install ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
    # The inferno binaries have no --version; ask cargo which version it installed where.
    local installed
    installed="$(cargo install --list; cargo install --list --root "$out/tools" 2>/dev/null || true)"
    if ! grep -q '^inferno v0\.12\.' <<< "$installed"; then
        log "cargo install inferno ~0.12 into $out/tools"
        cargo install inferno --version '~0.12' --locked --root "$out/tools"
    fi
}

# Builds from a pristine export of the committed HEAD (git archive), not from the work tree, so
# the figures belong to a known commit even while the tree has uncommitted edits.
stage_build() {
    local commit src
    commit="$(git -C "$repo" rev-parse HEAD)"
    src="$out/src"
    log "export HEAD $commit to $src; cargo build --release -p ember (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
    rm -rf "$src"
    mkdir -p "$src"
    git -C "$repo" archive HEAD | tar -x -C "$src"
    mkdir -p "$src/bench"
    rm -rf "$src/bench/pprof-merge"
    cp -r "$here/pprof-merge" "$src/bench/pprof-merge"
    (cd "$src" && cargo build --release -p ember)
    (cd "$src/bench/pprof-merge" && cargo build --release)
    echo "$commit" > "$out/commit"
}

# Inputs. Everything is derived from the shared corpora or recorded here, never downloaded.
stage_data() {
    # ≥ 25 MB: FlameGraph's example-perf-stacks (a real perf script) concatenated with itself.
    if [[ ! -s "$data/medium.perf.txt" ]]; then
        log "medium.perf.txt: example-perf-stacks.txt.gz × N ≥ 25 MB"
        local once="$data/example-perf-stacks.txt"
        gzip -dc "$corpora/FlameGraph/example-perf-stacks.txt.gz" > "$once"
        # A blank line between copies keeps the last sample of one copy apart from the next.
        : > "$data/medium.perf.txt.tmp"
        while (( $(stat -c %s "$data/medium.perf.txt.tmp") < 25 * 1000 * 1000 )); do
            cat "$once" >> "$data/medium.perf.txt.tmp"
            echo >> "$data/medium.perf.txt.tmp"
        done
        mv "$data/medium.perf.txt.tmp" "$data/medium.perf.txt"
        rm -f "$once"
    fi

    # ≥ 200 MB: a system-wide perf recording of a real parallel build (this repository's release
    # build, from scratch, in a throw-away target dir), cut off after RECORD_SECONDS.
    if [[ ! -s "$data/big.perf.txt" || "${RERECORD:-0}" == 1 ]]; then
        log "big.perf.txt: perf record -F 4999 -a -g over a ${record_seconds}s parallel cargo build"
        local scratch="$out/workload-target"
        rm -rf "$scratch"
        # Frame-pointer call graphs cost ~500 bytes of perf script per sample here, so 999 Hz
        # over ~30 s gives only ~30 MB; 4999 Hz keeps the recording short and the input ≥ 200 MB.
        perf record -F 4999 -a -g -o "$data/big.perf.data" -- \
            timeout "$record_seconds" env CARGO_TARGET_DIR="$scratch" \
            cargo build --release -p ember --manifest-path "$out/src/Cargo.toml" -j 2 \
            > "$raw/perf-record.log" 2>&1 || true
        perf script -i "$data/big.perf.data" > "$data/big.perf.txt" 2> "$raw/perf-script.log"
        rm -rf "$scratch" "$data/big.perf.data"
    fi

    # ≥ 100,000 distinct stacks for the flame graph, generated deterministically.
    if [[ ! -s "$data/synthetic-100k.folded" ]]; then
        log "synthetic-100k.folded"
        python3 "$here/gen_folded.py" 100000 > "$data/synthetic-100k.folded"
    fi

    # 1,000 Go CPU profiles: the corpus's nine Go CPU profiles (samples/count + cpu/nanoseconds,
    # 7 to 20,430 samples each) repeated round-robin.
    awk -F'\t' 'NR > 1 && $4 == "samples/count,cpu/nanoseconds" { print $1 }' \
        "$corpora/pprof-cases.tsv" | sed "s|^|$corpora/|" > "$data/go-cpu.list"
    [[ -s "$data/go-cpu.list" ]] || { echo "no Go CPU profiles found" >&2; exit 1; }
    local i=0 files=()
    mapfile -t files < "$data/go-cpu.list"
    : > "$data/pprof-1000.list"
    while (( i < 1000 )); do
        echo "${files[i % ${#files[@]}]}" >> "$data/pprof-1000.list"
        i=$((i + 1))
    done
    ls -l "$data" >&2
}

# Peak RSS (kB) of one run of "$@" with stdout to $RSS_OUT; appends "name<TAB>kB" to rss.tsv.
peak_rss() {
    local name="$1"; shift
    "${measure[@]}" /usr/bin/time -v -o "$raw/$name.time" "$@" > "$RSS_OUT" 2> "$raw/$name.stderr"
    local kb
    kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$raw/$name.time")
    printf '%s\t%s\n' "$name" "$kb" >> "$raw/rss.tsv"
}

# Times commands with hyperfine; $1 = case name, then pairs of (label, command).
timeit() {
    local name="$1"; shift
    local args=()
    while (($#)); do args+=(--command-name "$1" "$2"); shift 2; done
    echo "$name $(cat /proc/loadavg)" >> "$raw/load.log"
    "${measure[@]}" hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$raw/$name.json" "${args[@]}" >&2
}

stage_collapse() {
    local input threads tag
    for input in medium big; do
        local file="$data/$input.perf.txt"
        [[ -s "$file" ]] || continue
        for threads in 0 1; do
            # threads 0 = both tools' default (one worker per core); 1 = single-threaded.
            if [[ $threads == 0 ]]; then tag=default; ie=""; ii="";
            else tag=1t; ie="-j 1"; ii="--nthreads 1"; fi
            log "collapse $input ($tag)"
            timeit "collapse-$input-$tag" \
                ember "$ember collapse $ie $file > /dev/null" \
                inferno "inferno-collapse-perf $ii $file > /dev/null"
            RSS_OUT="$raw/collapse-$input-$tag.ember.folded" \
                peak_rss "collapse-$input-$tag.ember" "$ember" collapse $ie "$file"
            RSS_OUT="$raw/collapse-$input-$tag.inferno.folded" \
                peak_rss "collapse-$input-$tag.inferno" inferno-collapse-perf $ii "$file"
            if cmp -s "$raw/collapse-$input-$tag.ember.folded" "$raw/collapse-$input-$tag.inferno.folded"; then
                printf 'collapse-%s-%s\tidentical\n' "$input" "$tag" >> "$raw/equal.tsv"
            else
                printf 'collapse-%s-%s\tDIFFERENT\n' "$input" "$tag" >> "$raw/equal.tsv"
            fi
        done
    done
    # The big recording's folded stacks are a second, real flame graph input.
    if [[ -s "$raw/collapse-big-1t.inferno.folded" ]]; then
        cp "$raw/collapse-big-1t.inferno.folded" "$data/big.folded"
    fi
}

stage_flamegraph() {
    local input
    for input in synthetic-100k big; do
        local file="$data/$input.folded"
        [[ -s "$file" ]] || continue
        log "flamegraph $input"
        timeit "flamegraph-$input" \
            ember "$ember flamegraph $file > /dev/null" \
            inferno "inferno-flamegraph $file > /dev/null"
        RSS_OUT="$raw/flamegraph-$input.ember.svg" peak_rss "flamegraph-$input.ember" "$ember" flamegraph "$file"
        RSS_OUT="$raw/flamegraph-$input.inferno.svg" peak_rss "flamegraph-$input.inferno" inferno-flamegraph "$file"
    done
}

stage_pprof() {
    log "pprof decode + merge of 1,000 Go CPU profiles"
    : > "$raw/pprof.jsonl"
    local i
    echo "pprof $(cat /proc/loadavg)" >> "$raw/load.log"
    # Each run takes seconds; three are enough for a median.
    for ((i = 0; i < (runs < 3 ? runs : 3); i++)); do
        "${measure[@]}" "$pprof_bench" "$data/pprof-1000.list" >> "$raw/pprof.jsonl"
    done
    RSS_OUT="$raw/pprof.stdout" peak_rss pprof.ember "$pprof_bench" "$data/pprof-1000.list"
    cat "$raw/pprof.jsonl" >&2
}

stage_report() {
    python3 "$here/report.py" "$out" "$repo" "$ember" > "$out/results.md"
    cat "$out/results.md"
}

stages=("$@")
if ((${#stages[@]} == 0)); then
    stages=(tools build data collapse flamegraph pprof report)
    rm -f "$raw"/*.json "$raw/rss.tsv" "$raw/equal.tsv" "$raw/pprof.jsonl" "$raw/load.log"
fi
for stage in "${stages[@]}"; do
    case "$stage" in
        tools|build|data|collapse|flamegraph|pprof|report) "stage_$stage" ;;
        *) echo "run.sh: unknown stage $stage" >&2; exit 2 ;;
    esac
done
