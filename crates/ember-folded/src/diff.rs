//! Differential folded stacks: two folded inputs → `stack before after` lines.
