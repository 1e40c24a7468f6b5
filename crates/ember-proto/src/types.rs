//! `types.v1`: the messages Pyroscope's APIs share (labels, profile types, series, points).

/// `types.v1.LabelPair`: one label of a series. The only label message in the workspace:
/// pushes, queries and the store's write-ahead log record all carry this one.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct LabelPair {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Label value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `types.v1.ProfileType`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProfileType {
    /// `name:type:unit:period_type:period_unit`.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Profile name (`process_cpu`).
    #[prost(string, tag = "2")]
    pub name: String,
    /// Sample type.
    #[prost(string, tag = "4")]
    pub sample_type: String,
    /// Sample unit.
    #[prost(string, tag = "5")]
    pub sample_unit: String,
    /// Period type.
    #[prost(string, tag = "6")]
    pub period_type: String,
    /// Period unit.
    #[prost(string, tag = "7")]
    pub period_unit: String,
}

/// `types.v1.LabelValuesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelValuesRequest {
    /// Label name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Selectors (OR'd).
    #[prost(string, repeated, tag = "2")]
    pub matchers: Vec<String>,
    /// Start, unix ms.
    #[prost(int64, tag = "3")]
    pub start: i64,
    /// End, unix ms.
    #[prost(int64, tag = "4")]
    pub end: i64,
}

/// `types.v1.LabelNamesRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelNamesRequest {
    /// Selectors (OR'd).
    #[prost(string, repeated, tag = "1")]
    pub matchers: Vec<String>,
    /// Start, unix ms.
    #[prost(int64, tag = "2")]
    pub start: i64,
    /// End, unix ms.
    #[prost(int64, tag = "3")]
    pub end: i64,
}

/// `types.v1.LabelValuesResponse` and `types.v1.LabelNamesResponse` (the same shape).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NamesResponse {
    /// Names or values.
    #[prost(string, repeated, tag = "1")]
    pub names: Vec<String>,
}

/// `types.v1.Labels`: one label set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelSet {
    /// The labels.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
}

/// `types.v1.Point`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Point {
    /// Value.
    #[prost(double, tag = "1")]
    pub value: f64,
    /// Unix ms.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// `types.v1.Series` (named so it does not read as the store's series).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypesSeries {
    /// Group labels.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
    /// Points.
    #[prost(message, repeated, tag = "2")]
    pub points: Vec<Point>,
}
