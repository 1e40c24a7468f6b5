//! Ember's profile file formats, one module per format, and the one input detector.
//!
//! - [`folded`]: folded stacks (`root;...;leaf count`, and the three-column differential
//!   variant): lenient parsing (owned or borrowing the input) and writing.
//! - [`diff_folded`]: two folded inputs → `stack before after` lines (`difffolded.pl`).
//! - [`speedscope`]: speedscope JSON output.
//! - [`mod@top`]: the `go tool pprof -top` table, byte for byte; [`units`] its value formatting.
//! - [`convert`]: conversions between pprof, folded stacks, speedscope, perf script and
//!   Perfetto traces (the matrix is in that module's documentation).
//! - [`perfetto`]: Perfetto traces (native protobuf): CPU and heap samples in, a profile out
//!   as perf samples or a heapprofd dump, with the mapping table in its documentation.
//! - [`input`] and [`detect`]: reading a path or stdin (memory-mapping large files,
//!   gunzipping under a size cap) and deciding by content whether the bytes are a pprof
//!   profile, folded stacks, `perf script` output, speedscope JSON or a Perfetto trace.
//!
//! The pprof model itself (decoding, validation, and THE pprof → folded view,
//! [`ember_pprof::folded_stacks`]) belongs to `ember-pprof`; `perf script` → folded belongs to
//! `ember-collapse`; drawing SVG belongs to `ember-flamegraph`. This crate does no logging:
//! warnings are returned to the caller.

// `deny` rather than `forbid`: the one memory mapping in `mmap` needs a scoped `allow`.
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod convert;
pub mod detect;
pub mod diff_folded;
pub mod folded;
pub mod input;
mod mmap;
pub mod perf_script;
pub mod perfetto;
pub mod speedscope;
pub mod top;
pub mod units;

pub use convert::{Format, folded_to_profile, into_profile, pprof_folded_ref, pprof_stacks};
pub use detect::Kind;
pub use detect::{Input, decode_as, read_input};
pub use folded::{
    Folded, FoldedError, FoldedLine, FoldedLineRef, FoldedRef, parse, parse_borrowed, parse_bytes,
    write,
};
pub use input::InputBytes;
pub use speedscope::{folded_to_speedscope, profile_to_speedscope, speedscope_to_profile};
pub use top::{
    FrameTree, FunctionTotals, SortBy, TopOptions, TopRow, TopTable, select_sample_index, top,
    top_of_functions, top_of_tree,
};

/// Errors of reading, detecting and converting profiles.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
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
        /// The file involved (`-` for stdin).
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Gunzipping an input failed or exceeded the size cap.
    #[error("{path}: {source}")]
    Decompress {
        /// The file involved (`-` for stdin).
        path: String,
        /// Why (a gzip error, or the decompressed size limit).
        source: ember_pprof::PprofError,
    },
    /// The input is neither a pprof profile nor folded stacks.
    #[error("{path}: neither folded stacks nor a valid pprof profile: {pprof}")]
    UnknownFormat {
        /// The file involved.
        path: String,
        /// Why decoding it as pprof failed.
        pprof: ember_pprof::PprofError,
    },
    /// The input is speedscope JSON that does not follow the file format.
    #[error("{path}: not a readable speedscope file: {reason}")]
    BadSpeedscope {
        /// The file involved.
        path: String,
        /// What does not follow the format.
        reason: String,
    },
    /// The input is a Perfetto trace that could not be read.
    #[error("{path}: Perfetto trace: {source}")]
    BadPerfetto {
        /// The file involved.
        path: String,
        /// Why.
        #[source]
        source: perfetto::PerfettoError,
    },
    /// The input is `perf script` text that could not be folded.
    #[error("{path}: perf script output: {reason}")]
    BadPerfScript {
        /// The file involved.
        path: String,
        /// Why it could not be folded.
        reason: String,
    },
    /// The input is in a format this operation does not read (e.g. `perf script` output where
    /// folded stacks are expected).
    #[error("{path}: {kind} is not accepted here; {hint}")]
    Unsupported {
        /// The file involved.
        path: String,
        /// What the input was detected as.
        kind: detect::Kind,
        /// What to do instead.
        hint: &'static str,
    },
}
