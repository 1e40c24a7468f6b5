//! The server's routes in-process, for the fuzz targets in `fuzz/` (`ingest_legacy`,
//! `ingest_push`, `ingest_grpc`). Not a stable API: hidden from the docs.
//!
//! The targets drive every ingest decoder exactly as a client would (body limits,
//! `Content-Encoding`, multipart, Connect proto/JSON, gRPC framing, then the store's
//! decompression, parsing, checks and write-ahead log) without a socket, so each input costs
//! microseconds rather than a loopback round trip.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use ember_store::{IngestLimits, Store, StoreOptions};

use crate::{AppState, Limits, Metrics, ServerError};

/// Opens a store in `data_dir` with `limits` and returns every route of the server over it,
/// without authentication, as [`crate::Server::run`] serves them (no flush timer). Call it
/// inside a tokio runtime; dropping the router closes the store.
pub fn router(data_dir: &Path, limits: Limits) -> Result<axum::Router, ServerError> {
    // The same mapping of limits to store options as `Server::bind`.
    let options = StoreOptions {
        max_series_per_tenant: limits.max_series_per_tenant,
        retention_nanos: (limits.retention_days.max(0.0) * 86_400e9) as i64,
        ingest: IngestLimits {
            max_decompressed_bytes: limits.max_decompressed_bytes,
            max_samples_per_profile: limits.max_samples_per_profile,
            max_labels_per_series: limits.max_labels_per_series,
            max_label_name_length: limits.max_label_name_length,
            max_label_value_length: limits.max_label_value_length,
        },
        cache_bytes: limits.block_cache_mib.saturating_mul(1 << 20),
        ..StoreOptions::default()
    };
    let store = Store::open(data_dir, options)?;
    let state = Arc::new(AppState {
        store,
        limits,
        tokens: None,
        metrics: Metrics::default(),
        ready: AtomicBool::new(true),
        push_buckets: Mutex::new(std::collections::HashMap::new()),
    });
    Ok(crate::router(state))
}
