//! Pyroscope's own HTTP front end: the legacy `/ingest` route ([`ingest`]) and the
//! flame graph reads Grafana and Pyroscope's UI make (`render`).

pub(crate) mod ingest;
pub(crate) mod render;
