#!/bin/sh
# Regenerates expected/ from the samples with Brendan Gregg's stackcollapse-perf.pl
# (FlameGraph, CDDL-1.0; not vendored here). Usage: ./expected.sh /path/to/stackcollapse-perf.pl
#
# Ember counts the last sample of a file that does not end with an empty line (as inferno and
# FlameGraph PR #231 do; the unpatched script drops it), so the script is given each input
# with the empty line it lacks appended.
set -eu
perl_script=$1
mkdir -p expected
for input in *.txt; do
    stem=${input%.txt}
    for opt in default pid tid kernel jit all addrs; do
        flag="--$opt"
        [ "$opt" = default ] && flag=
        {
            cat "$input"
            # The empty line that ends the last sample (two newlines when even the last
            # line's own newline is missing).
            if [ -n "$(tail -c 1 "$input")" ]; then printf '\n\n'
            elif [ -n "$(tail -c 2 "$input" | head -c 1)" ]; then printf '\n'
            fi
        } | perl "$perl_script" $flag > "expected/$stem-$opt.txt"
    done
done
