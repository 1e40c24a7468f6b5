#!/usr/bin/env bash
# Regenerate crates/ember/link-order.txt: the functions `ember collapse` executes, in the order
# the linker should lay them out first in the binary's .text (lld --symbol-ordering-file, wired
# up in crates/ember/build.rs).
#
# Why: `ember` is one large multi-command binary. A short `ember collapse` run touches ~0.5 MB
# of its code, but scattered over the 12 MB .text, so every page fault maps a different block of
# pages (the kernel's fault-around) and the code alone costs ~2.4 MB of resident memory. Laid out
# contiguously, the same code costs a fraction of that (bench/COLLAPSE-RESULTS.md, session 4).
#
# Usage: bench/collapse-link-order.sh [--check]
#   --check  only report how many of the listed symbols the current release binary still has
#            (fails below 90 %: time to regenerate); no build, no valgrind.
#   Builds the release binary, runs `ember collapse` under valgrind's callgrind on the
#   benchmark inputs (start-up only, 1 thread, default threads, stdin, gzip input; both
#   spellings of `-j`), and writes the executed symbols, start-up first. Then rebuild
#   (cargo build --release -p ember) to use it.
# Environment: CARGO_TARGET_DIR (default <repo>/target). Needs valgrind and the medium input
# (bench/run.sh data).
#
# The names are the exact (mangled) symbols of this build. Symbols that a later change renames
# simply drop out of the order (the link does not fail, the layout degrades); rerun this script
# after changes to the collapse path, clap or the standard library version, and after any
# change to the dependency graph of `ember`: a generic function's symbol carries a hash of the
# crates it was instantiated in, and those hashes move when a dependency is added anywhere in
# the graph (adding rustc-hash to ember-pprof left 472 of 552 names; start-up floor 2.0 -> 2.8
# MiB). With the release profile's fat LTO (one codegen unit) they do not drift after
# unrelated *code* changes; with ThinLTO they did (it renames promoted local functions
# NAME.llvm.<hash of their LTO module>, and the hash moves with any code change in that
# module: 18 lost names of 607 cost ~900 KiB of start-up RSS), which is why the profile is fat
# (bench/COLLAPSE-RESULTS.md, "Release profile").
# --check only fails below 90 %: regenerate whenever it reports fewer than all. Two runs
# differ by a few symbols (paths taken only under thread contention, e.g. a mutex's slow path):
# the threaded run is not deterministic, and those rare paths barely matter for the layout.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
ember="$CARGO_TARGET_DIR/release/ember"
medium="$here/out/data/medium.perf.txt"
order="$repo/crates/ember/link-order.txt"

if [[ "${1:-}" == --check ]]; then
    [[ -x "$ember" ]] || { echo "collapse-link-order.sh: no $ember; build it first" >&2; exit 1; }
    listed=$(grep -vc '^#' "$order")
    present=$(grep -v '^#' "$order" | grep -cFx -f <(nm --defined-only "$ember" | awk '{ print $NF }') || true)
    echo "collapse-link-order.sh: $present of $listed symbols of link-order.txt are in $ember"
    ((present * 10 >= listed * 9)) || { echo "collapse-link-order.sh: stale order, regenerate it" >&2; exit 1; }
    exit 0
fi

command -v valgrind >/dev/null || { echo "collapse-link-order.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
[[ -s "$medium" ]] || { echo "collapse-link-order.sh: no $medium; run bench/run.sh data" >&2; exit 1; }

(cd "$repo" && nice -n 19 cargo build --release -p ember)

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
head -c 3000000 "$medium" | gzip -c > "$tmp/small.perf.txt.gz"

# One callgrind profile per kind of run; --demangle=no keeps the symbol names as the linker
# sees them.
profile() { # name, ember arguments...
    local name="$1"; shift
    valgrind --tool=callgrind --demangle=no --callgrind-out-file="$tmp/$name.cg" \
        "$ember" "$@" > /dev/null 2> "$tmp/$name.log" ||
        { cat "$tmp/$name.log" >&2; exit 1; }
}
profile startup collapse -j1 /dev/null
profile one-thread collapse -j 1 "$medium"
profile threads collapse "$medium"
profile stdin collapse -j1 - < "$medium"
profile gzip collapse "$tmp/small.perf.txt.gz"

# Function names of each profile ("fn=(id) name" or "cfn=(id) name" on first use), without
# callgrind's recursion suffixes ('2) and without unnamed code (addresses, "(below main)"),
# each symbol once, in the order of the profiles above.
for name in startup one-thread threads stdin gzip; do
    grep -hoE '^c?fn=\([0-9]+\) .*' "$tmp/$name.cg" | sed -E "s/^c?fn=\([0-9]+\) //; s/'[0-9]+\$//" |
        grep -vE '^(0x|\()' | sort -u
done | awk '!seen[$0]++' > "$tmp/order"

# glibc picks its string functions (memmove, strlen...) at start-up by CPU model (IFUNC), and
# valgrind's virtual CPU is not the one the binary will run on: for each such function that ran,
# also list every variant of it in the binary (a few KB each). memcpy/mempcpy are memmove's.
families="$(grep -oE '^__[a-z]+_(sse|ssse|avx|evex|erms)' "$tmp/order" | sed -E 's/^__([a-z]+)_.*/\1/' |
    sed -E 's/^memp?cpy$/memmove/' | sort -u | paste -sd'|')"
if [[ -n "$families" ]]; then
    nm --defined-only "$ember" | awk '{ print $NF }' | grep -E "^__($families)_(sse|ssse|avx|evex|erms)" |
        sort -u >> "$tmp/order"
    awk '!seen[$0]++' "$tmp/order" > "$tmp/order.unique" && mv "$tmp/order.unique" "$tmp/order"
fi

{
    echo "# Generated by bench/collapse-link-order.sh from $(git -C "$repo" rev-parse --short HEAD): do not edit."
    cat "$tmp/order"
} > "$order"
echo "collapse-link-order.sh: $(wc -l < "$tmp/order") symbols -> $order"
