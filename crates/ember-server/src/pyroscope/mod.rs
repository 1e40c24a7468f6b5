//! Pyroscope-compatible routes.

pub(crate) mod render;
