//! The pprof data model that every part of Ember builds on.
//!
//! This crate owns `profile.proto` (the generated prost types live in
//! [`proto`]), decoding and encoding (raw or gzip'd, with size limits),
//! validation of every cross-reference, and the operations the rest of Ember
//! performs on profiles: building, merging, scaling, filtering and deltas.

pub mod proto;

pub use proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};
