//! The error type shared by every operation in this crate.

use std::path::PathBuf;

/// Everything that can go wrong when reading, validating or combining profiles.
///
/// Messages name the offending field and index (for example
/// `sample[3].location_id[1]: location id 99 does not exist`) so that a user
/// can find the problem in a dump of the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PprofError {
    /// The input starts like gzip but could not be decompressed.
    #[error("gzip decompression failed: {0}")]
    Gzip(#[source] std::io::Error),
    /// The (decompressed) profile is larger than [`crate::DecodeLimits`] allows.
    #[error("profile exceeds the decompressed size limit of {limit} bytes")]
    TooLarge {
        /// The limit that was exceeded, in bytes.
        limit: u64,
    },
    /// Decoding the profile would take more memory than the caller allows
    /// ([`crate::ProfileView::parse_within`]).
    #[error("profile's tables would take more than {limit} bytes of memory decoded")]
    DecodedTooLarge {
        /// The limit that was exceeded, in bytes.
        limit: u64,
    },
    /// The input looks like one of pprof's pre-proto formats.
    #[error(
        "not a profile.proto file (legacy {kind} format?); convert it with `go tool pprof -proto` first"
    )]
    LegacyFormat {
        /// What the input looked like, e.g. "binary CPU profile" or "text heap profile".
        kind: &'static str,
    },
    /// The bytes are not a protobuf `Profile` message.
    #[error("not a valid profile.proto message: {0}")]
    Decode(#[from] prost::DecodeError),
    /// The message decoded but breaks a rule of profile.proto.
    #[error("malformed profile: {field}: {message}")]
    Malformed {
        /// Path of the offending field, e.g. `function[0].id`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A requested sample type does not exist in the profile.
    #[error("sample type {requested:?} not found; available: {available}")]
    UnknownSampleType {
        /// What was asked for.
        requested: String,
        /// The profile's sample types as `type/unit`, comma separated.
        available: String,
    },
    /// The profile has no sample types at all, so no index can be chosen.
    #[error("profile has no sample types")]
    NoSampleTypes,
    /// Profiles whose sample types differ cannot be merged or subtracted.
    #[error("incompatible profiles: sample types [{first}] vs [{second}]")]
    IncompatibleSampleTypes {
        /// Sample types of the first profile, as `type/unit` list.
        first: String,
        /// Sample types of the profile that differs.
        second: String,
    },
    /// Profiles whose period types differ cannot be merged.
    #[error("incompatible profiles: period types {first} vs {second}")]
    IncompatiblePeriodTypes {
        /// Period type of the first profile.
        first: String,
        /// Period type of the profile that differs.
        second: String,
    },
    /// `merge` was called with no profiles.
    #[error("no profiles to merge")]
    NothingToMerge,
    /// A sample-type index passed by the caller is out of range.
    #[error("sample type index {index} out of range (profile has {count} sample types)")]
    SampleIndexOutOfRange {
        /// The index given.
        index: usize,
        /// How many sample types exist.
        count: usize,
    },
}

impl PprofError {
    pub(crate) fn malformed(field: impl Into<String>, message: impl Into<String>) -> Self {
        PprofError::Malformed {
            field: field.into(),
            message: message.into(),
        }
    }
}
