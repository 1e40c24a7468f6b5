//! Ember's profile formats, one module per format (folded, diff, speedscope, top, perf script input detection), with one input detector
//!
//! (Being built: see ARCHITECTURE.md.)

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
