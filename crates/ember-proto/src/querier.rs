//! `querier.v1`: `QuerierService`, the read API Grafana's Pyroscope data source calls.
//! Times are unix milliseconds; 0 means unbounded.

use crate::types::{LabelSet, ProfileType, TypesSeries};

/// `querier.v1.ProfileTypesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileTypesRequest {
    /// Start, unix ms.
    #[prost(int64, tag = "1")]
    pub start: i64,
    /// End, unix ms.
    #[prost(int64, tag = "2")]
    pub end: i64,
}

/// `querier.v1.ProfileTypesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileTypesResponse {
    /// The profile types.
    #[prost(message, repeated, tag = "1")]
    pub profile_types: Vec<ProfileType>,
}

/// `querier.v1.SeriesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SeriesRequest {
    /// Selectors (OR'd).
    #[prost(string, repeated, tag = "1")]
    pub matchers: Vec<String>,
    /// Only these label names in the result (all when empty).
    #[prost(string, repeated, tag = "2")]
    pub label_names: Vec<String>,
    /// Start, unix ms.
    #[prost(int64, tag = "3")]
    pub start: i64,
    /// End, unix ms.
    #[prost(int64, tag = "4")]
    pub end: i64,
}

/// `querier.v1.SeriesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SeriesResponse {
    /// Label sets.
    #[prost(message, repeated, tag = "2")]
    pub labels_set: Vec<LabelSet>,
}

/// `querier.v1.SelectMergeStacktracesRequest` (also the shape of `SelectMergeProfileRequest`'s
/// first five fields and of each side of a `DiffRequest`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SelectRequest {
    /// Profile type id.
    #[prost(string, tag = "1")]
    pub profile_type_id: String,
    /// Label selector.
    #[prost(string, tag = "2")]
    pub label_selector: String,
    /// Start, unix ms.
    #[prost(int64, tag = "3")]
    pub start: i64,
    /// End, unix ms.
    #[prost(int64, tag = "4")]
    pub end: i64,
    /// Node limit.
    #[prost(int64, optional, tag = "5")]
    pub max_nodes: Option<i64>,
}

/// `querier.v1.SelectMergeSpanProfileRequest`: a [`SelectRequest`] with the span ids whose
/// samples to merge (Grafana's "profiles for this span"). The answer is a
/// [`FlameGraphResponse`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct SelectMergeSpanProfileRequest {
    /// Profile type id.
    #[prost(string, tag = "1")]
    pub profile_type_id: String,
    /// Label selector.
    #[prost(string, tag = "2")]
    pub label_selector: String,
    /// Span ids (the pprof sample label `span_id`).
    #[prost(string, repeated, tag = "3")]
    pub span_selector: Vec<String>,
    /// Start, unix ms.
    #[prost(int64, tag = "4")]
    pub start: i64,
    /// End, unix ms.
    #[prost(int64, tag = "5")]
    pub end: i64,
    /// Node limit.
    #[prost(int64, optional, tag = "6")]
    pub max_nodes: Option<i64>,
}

/// `querier.v1.Level`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Level {
    /// Quadruples (or 7-tuples in a diff).
    #[prost(int64, repeated, tag = "1")]
    pub values: Vec<i64>,
}

/// `querier.v1.FlameGraph` (and `FlameGraphDiff` with the two tick fields).
#[derive(Clone, PartialEq, prost::Message)]
pub struct FlameGraph {
    /// Frame names.
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
    /// Levels.
    #[prost(message, repeated, tag = "2")]
    pub levels: Vec<Level>,
    /// Total.
    #[prost(int64, tag = "3")]
    pub total: i64,
    /// Largest self value.
    #[prost(int64, tag = "4")]
    pub max_self: i64,
    /// Diff only: left total.
    #[prost(int64, tag = "5")]
    pub left_ticks: i64,
    /// Diff only: right total.
    #[prost(int64, tag = "6")]
    pub right_ticks: i64,
}

/// `querier.v1.SelectMergeStacktracesResponse` / `DiffResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FlameGraphResponse {
    /// The flame graph.
    #[prost(message, optional, tag = "1")]
    pub flamegraph: Option<FlameGraph>,
}

/// `querier.v1.DiffRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DiffRequest {
    /// Baseline.
    #[prost(message, optional, tag = "1")]
    pub left: Option<SelectRequest>,
    /// Comparison.
    #[prost(message, optional, tag = "2")]
    pub right: Option<SelectRequest>,
}

/// `querier.v1.SelectSeriesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SelectSeriesRequest {
    /// Profile type id.
    #[prost(string, tag = "1")]
    pub profile_type_id: String,
    /// Label selector.
    #[prost(string, tag = "2")]
    pub label_selector: String,
    /// Start, unix ms.
    #[prost(int64, tag = "3")]
    pub start: i64,
    /// End, unix ms.
    #[prost(int64, tag = "4")]
    pub end: i64,
    /// Group-by labels.
    #[prost(string, repeated, tag = "5")]
    pub group_by: Vec<String>,
    /// Step, seconds.
    #[prost(double, tag = "6")]
    pub step: f64,
}

/// `querier.v1.SelectSeriesResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SelectSeriesResponse {
    /// Series.
    #[prost(message, repeated, tag = "1")]
    pub series: Vec<TypesSeries>,
}
