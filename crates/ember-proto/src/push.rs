//! `push.v1`: `PusherService/Push`, the ingest protocol of Pyroscope clients, Grafana Alloy
//! and `ember push`/the agent.

use crate::types::LabelPair;

/// `push.v1.PushRequest`: a batch of raw pprof profiles with their labels.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PushRequest {
    /// The series pushed.
    #[prost(message, repeated, tag = "1")]
    pub series: Vec<RawProfileSeries>,
}

/// `push.v1.RawProfileSeries`: labels shared by the samples, and the samples.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawProfileSeries {
    /// Series labels (`__name__`, `service_name`, ...).
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<LabelPair>,
    /// Profiles of this series.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<RawSample>,
}

/// `push.v1.RawSample`: one pprof profile, gzip'd or raw.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawSample {
    /// The pprof bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub raw_profile: Vec<u8>,
    /// Client-chosen profile id.
    #[prost(string, tag = "2")]
    pub id: String,
}

/// `push.v1.PushResponse` (empty).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PushResponse {}
