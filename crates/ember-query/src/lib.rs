//! Ember's query layer: one request type ([`QueryRequest`]), the operations on stored
//! profiles ([`Querier`]: merge, diff, top, time series with group-by, labels and series) and
//! the result shapes (call tree, Pyroscope flamebearer JSON, pprof, folded, SVG, top table,
//! the pprof-style call graph).
//!
//! Every read front end of Ember — the HTTP API (`/api/v1/*`), the Pyroscope-compatible routes
//! (`/pyroscope/render`, `/pyroscope/render-diff`), Grafana's `querier.v1` and the web UI —
//! translates its own request format into a [`QueryRequest`] with the parsing helpers of
//! [`parse`], calls one [`Querier`] operation, and encodes the result it gets back. So the
//! defaults (one node limit, [`DEFAULT_MAX_NODES`]; `now-1h`..`now`; the automatic step), the
//! selector rules and the 404 of an empty selection are decided here once.
//!
//! This crate reads through `ember-store`'s public query API (merged stacks, time series of
//! totals, series and labels); it never writes to the store and knows nothing of HTTP.
//! Averaging is the store's: a series labelled `__aggregation_type__="average"` contributes
//! the mean of its profiles, per call-tree node and per time bucket, instead of their sum.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod callgraph;
mod cut;
mod filters;
mod flamebearer;
pub mod flamebin;
mod focus;
mod ops;
pub mod parse;
mod profiles;
mod render;
mod request;
mod top;
mod tree;

pub use callgraph::{
    CallGraph, CallGraphOptions, DEFAULT_EDGE_FRACTION, DEFAULT_GRAPH_NODES, DEFAULT_NODE_FRACTION,
    GraphEdge, GraphNode, call_graph,
};
pub use ember_store::{Labels, Merged, ProfileList, ProfileRef, TimeSeries};
pub use filters::FrameFilters;
pub use flamebearer::units;
pub use ops::{Diff, Querier};
pub use profiles::{DEFAULT_PROFILE_LIST, parse_series, selector_text};
pub use render::{Format, Output, diff_stacks, folded_text, pprof_profile};
pub use request::{DEFAULT_MAX_NODES, NameRule, QueryRequest, SPAN_ID_LABEL};
pub use top::{TOP_JSON_ROWS, diff_top, merged_top};
pub use tree::{DiffNode, DiffTree, Node, Tree};

/// Why a query could not be answered. Each variant maps to one client-visible error class
/// (the server turns them into HTTP statuses: 400, 404, 501 or 500).
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueryError {
    /// The label selector could not be parsed.
    #[error("{0}")]
    Selector(String),
    /// A time bound could not be parsed, or the range is reversed.
    #[error("{0}")]
    Time(String),
    /// The step of a time series is not a positive number of seconds.
    #[error("{0}")]
    Step(String),
    /// Another request argument is invalid (node limit, output format, missing field).
    #[error("{0}")]
    Invalid(String),
    /// The request asks for something this build cannot answer: it is refused rather than
    /// silently answered another way.
    #[error("{0}")]
    Unsupported(String),
    /// Nothing matches the selection in its time range (only for answers that would be an
    /// empty file: pprof, folded, SVG, top, and diffs).
    #[error("{0}")]
    NotFound(String),
    /// Encoding the result failed (an SVG or top table writer error).
    #[error("{0}")]
    Render(String),
}
