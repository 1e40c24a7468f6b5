//! How Ember reports on itself: the one Prometheus metrics writer
//!
//! (Being built: see ARCHITECTURE.md.)

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
