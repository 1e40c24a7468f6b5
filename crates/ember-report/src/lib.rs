//! Sinks that summarise profiles: the `top` table, speedscope JSON, and
//! conversions between pprof and folded stacks.
