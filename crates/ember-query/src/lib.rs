//! Ember's query layer: one request type, the operations on stored profiles (merge, diff, top, series, group-by) and the result shapes (call tree, flamebearer, pprof, folded, SVG)
//!
//! (Being built: see ARCHITECTURE.md.)

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
