//! Sinks that summarise profiles: the `top` table, speedscope JSON, and
//! conversions between pprof and folded stacks.
//!
//! Everything here works on a decoded [`ember_pprof::Profile`]; folded input is first turned into
//! a profile ([`convert::folded_to_profile`]) so that every report has one code path.

#![warn(missing_docs)]
pub mod convert;
pub mod speedscope;
pub mod top;
pub mod units;

pub use convert::{Format, Input, folded_to_profile, read_input};
pub use speedscope::{folded_to_speedscope, profile_to_speedscope};
pub use top::{SortBy, TopOptions, TopRow, TopTable, select_sample_index, top};

/// Errors of the report sinks.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The profile declares no sample types, so there is nothing to report.
    #[error("profile has no samples")]
    NoSampleTypes,
    /// The requested sample type does not exist.
    #[error("{0}")]
    SampleIndex(String),
    /// The profile could not be read or decoded.
    #[error(transparent)]
    Pprof(#[from] ember_pprof::PprofError),
    /// Reading an input failed.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The input is neither a pprof profile nor folded stacks.
    #[error("{path}: neither folded stacks nor a valid pprof profile: {pprof}")]
    UnknownFormat {
        /// The file involved.
        path: String,
        /// Why decoding it as pprof failed.
        pprof: ember_pprof::PprofError,
    },
}
