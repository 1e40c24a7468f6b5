//! Source: `perf script` text → folded stacks, compatible with `stackcollapse-perf.pl`.
