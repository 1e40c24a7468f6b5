//! Ember's wire protocols: the prost types of push.v1, querier.v1 and types.v1, one set shared by every client and server
//!
//! (Being built: see ARCHITECTURE.md.)

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
