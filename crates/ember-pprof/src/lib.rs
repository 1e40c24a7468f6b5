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
//!
//! ```
//! use ember_pprof::{ProfileBuilder, SampleLabel};
//!
//! let mut b = ProfileBuilder::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
//! b.set_period(("cpu", "nanoseconds"), 10_000_000);
//! b.add_folded_stack(&["main", "work"], &[1, 10_000_000]);
//! let f = b.function("helper", "helper", "lib.rs");
//! let loc = b.location(0, 0x1234, &[(f, 7)]);
//! b.add_sample(&[loc], &[2, 20_000_000], &[SampleLabel::Str("thread", "worker")]);
//! let profile = b.build();
//!
//! let bytes = ember_pprof::encode_gzip(&profile);
//! let back = ember_pprof::decode(&bytes)?;
//! let idx = ember_pprof::sample_index(&back, Some("cpu"))?;
//! assert_eq!(
//!     ember_pprof::folded_stacks(&back, idx),
//!     [("helper".to_string(), 20_000_000), ("main;work".to_string(), 10_000_000)]
//! );
//! # Ok::<(), ember_pprof::PprofError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod proto;

mod builder;
mod codec;
mod diff_base;
mod error;
mod ids;
mod merge;
mod query;
mod transform;
mod validate;
mod view;

pub use builder::{ProfileBuilder, SampleLabel};
pub use codec::{
    DecodeLimits, decode, decode_with_limits, decompress, encode, encode_gzip, read_file,
    write_file,
};
pub use diff_base::{DIFF_BASE_LABEL, has_diff_base, is_diff_base_sample, report_total};
pub use error::PprofError;
pub use merge::{Merger, compact, delta, merge};
pub use proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};
pub use query::{folded_stacks, folded_to_string, sample_index, string, type_name};
pub use transform::{filter_sample_types, focus, hide, ignore, prune_from, scale};
pub use validate::validate;
pub use view::{LocationView, ProfileView, SampleView, ViewTables};
