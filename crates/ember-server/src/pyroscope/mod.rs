//! Pyroscope-compatible routes: the legacy `/ingest` ([`ingest`]) and the flame graph reads
//! Grafana and Pyroscope's UI make (`render`).

pub(crate) mod ingest;
pub(crate) mod render;
