#!/usr/bin/env bash
# Count the duplicate-code pairs in NON-TEST code of `crates/` (issue 10's last proof line).
#
# Usage: bench/dups/count.sh [extra duplicates options, e.g. --seconds 300]
#   run from anywhere inside the repository; prints `pairs: N` and then the tool's rows.
#
# Counting rule (the same every session, so counts compare):
#   1. copy `crates/` as git tracks it (plus untracked, unignored files) to a temporary folder;
#   2. delete what is test or not code: every `tests/`, `benches/` and `examples/` folder,
#      every `tests.rs` file and the web UI assets (`crates/ember-ui/assets`: HTML/JS/CSS the
#      tool would otherwise read);
#   3. blank every `#[cfg(test)]` module (strip_tests.py; the lines stay, empty, so the line
#      numbers in the rows are those of the real files);
#   4. run `duplicates --repo <copy> --most 200` (outside a git checkout it reads every file).
# The count is the number in the tool's first line. Rows are `crate/path:lines ~ crate/path:lines`.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
command -v duplicates >/dev/null || { echo "count.sh: the 'duplicates' command is not on PATH" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/crates"
mkdir -p "$copy"

# Tracked and untracked-but-not-ignored files, as the tool itself would read them in the checkout.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard -- crates) |
    (cd "$repo" && xargs -0 -r cp --parents -t "$tmp" 2>/dev/null || true)

find "$copy" -type d \( -name tests -o -name benches -o -name examples \) -prune -exec rm -rf {} +
find "$copy" -type f -name tests.rs -delete
rm -rf "$copy/ember-ui/assets"
python3 "$here/strip_tests.py" "$copy" 2>/dev/null

out=$(cd "$tmp" && duplicates --repo "$copy" --most 200 --seconds 120 "$@")
# The first line counts the pairs: "N pairs ..." or "no duplicates ...".
first=$(printf '%s\n' "$out" | head -n 1)
n=$(printf '%s\n' "$first" | grep -oE '^[0-9]+' || echo 0)
echo "pairs: $n"
printf '%s\n' "$out" | sed "s#$copy/##g"
