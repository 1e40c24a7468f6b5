//! Ember's recording model: samples captured by the sampler and every operation on them (merge, split by process, symbolize, to pprof, perf script)
//!
//! (Being built: see ARCHITECTURE.md.)

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
