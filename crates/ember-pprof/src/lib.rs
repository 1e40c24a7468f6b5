//! The pprof data model that every part of Ember builds on.
//!
//! This crate owns `profile.proto` (the generated prost types live in
//! [`proto`]), decoding and encoding (raw or gzip'd, with size limits),
//! validation of every cross-reference, and the operations the rest of Ember
//! performs on profiles: building, merging, scaling, filtering and deltas.
//!
//! Every decoded profile has been validated, so its ids and string indices
//! can be trusted; the operations nevertheless never panic on unvalidated
//! profiles (dangling references read as empty/unknown).

pub mod proto;

mod builder;
mod codec;
mod error;
mod ids;
mod merge;
mod query;
mod transform;
mod validate;

pub use builder::{ProfileBuilder, SampleLabel};
pub use codec::{
    DecodeLimits, decode, decode_with_limits, encode, encode_gzip, read_file, write_file,
};
pub use error::PprofError;
pub use merge::{compact, delta, merge};
pub use proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};
pub use query::{folded_stacks, folded_to_string, sample_index, string};
pub use transform::{filter_sample_types, focus, hide, ignore, prune_from, scale};
pub use validate::validate;
