//! Ember's one HTTP client: https through rustls with ring, timeouts, proxies, CA files, bounded bodies
//!
//! (Being built: see ARCHITECTURE.md.)

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
