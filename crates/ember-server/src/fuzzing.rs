//! The server's routes in-process, for the fuzz targets in `fuzz/` (`ingest_legacy`,
//! `ingest_push`, `ingest_grpc`). Not a stable API: hidden from the docs.
//!
//! The targets drive every ingest decoder exactly as a client would (body limits,
//! `Content-Encoding`, multipart, Connect proto/JSON, gRPC framing, then the store's
//! decompression, parsing, checks and write-ahead log) without a socket, so each input costs
//! microseconds rather than a loopback round trip.

use std::path::Path;
use std::sync::Arc;

use ember_store::Store;

use crate::{AppState, Limits, ServerError};

/// Opens a store in `data_dir` with `limits` and returns every route of the server over it,
/// without authentication, as [`crate::Server::run`] serves them (no flush timer). Call it
/// inside a tokio runtime; dropping the router closes the store.
pub fn router(data_dir: &Path, limits: Limits) -> Result<axum::Router, ServerError> {
    let store = Store::open(data_dir, limits.store_options())?;
    let state = Arc::new(AppState::new(store, limits, None, false)?);
    Ok(crate::router(state))
}
