//! What every ingest route shares: reading a request body within the limits, running the
//! conversion to an [`IngestBatch`] and [`ember_store::Store::ingest`] off the async
//! workers, the metrics of accepted and refused requests, and the HTTP mapping of
//! [`IngestError`].
//!
//! The protocol modules ([`crate::pyroscope::ingest`], [`crate::push`], [`crate::grpc`])
//! only turn a request into a batch; validation, limits and durability (answered only after
//! the write-ahead log's fsync) belong to the store.
//!
//! Threads: decompressing and parsing profiles is CPU work measured in milliseconds, and
//! `Store::ingest` blocks until the log's group commit is fsync'd, so both run on tokio's
//! blocking pool ([`store_batch`]); the async workers only move bytes and answer.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ember_store::{IngestBatch, IngestError};

use crate::{ApiError, AppState};

/// Reads the body up to `max_body_bytes` (413 beyond) and undoes `Content-Encoding: gzip`
/// (on the blocking pool, capped at `max_decompressed_bytes`).
pub(crate) async fn read_body(
    s: &Arc<AppState>,
    headers: &HeaderMap,
    body: Body,
) -> Result<Vec<u8>, ApiError> {
    let limit = s.limits.max_body_bytes;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::too_large(
            "body_too_large",
            format!("request body exceeds the limit of {limit} bytes"),
        )
    })?;
    let encoding = crate::header(headers, "content-encoding")
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match encoding.as_str() {
        // Into a Vec without a copy when the body arrived as one buffer (hyper's usual case).
        "" | "identity" => Ok(Vec::from(bytes)),
        "gzip" => {
            let max = s.limits.max_decompressed_bytes;
            tokio::task::spawn_blocking(move || gunzip(&bytes, max, "gzip body", "body"))
                .await
                .map_err(|e| ApiError::internal(format!("decompressing the body: {e}")))?
        }
        other => Err(ApiError::bad_request(
            "bad_encoding",
            format!("unsupported Content-Encoding {other:?} (use gzip or none)"),
        )),
    }
}

/// Decompresses gzip (every member) up to `max` bytes: 400 on bad gzip (the message starts
/// with `what`), 413 past the cap (naming the `noun` that exceeded it).
pub(crate) fn gunzip(data: &[u8], max: u64, what: &str, noun: &str) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(data)
        .take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| ApiError::bad_request("bad_encoding", format!("{what}: {e}")))?;
    if out.len() as u64 > max {
        return Err(ApiError::too_large(
            "decompressed_too_large",
            format!("decompressed {noun} exceeds the limit of {max} bytes"),
        ));
    }
    Ok(out)
}

/// A request converted for the store: the batch, and the request bytes it counts as in
/// `ember_ingested_bytes_total`.
pub(crate) struct Converted {
    pub(crate) batch: IngestBatch,
    pub(crate) body_bytes: usize,
}

/// Runs `convert` (the protocol's request → batch: decoding, parsing) and then
/// `Store::ingest_async` for `tenant`; returns once the batch is durable.
pub(crate) async fn store_batch<F>(
    s: &Arc<AppState>,
    tenant: String,
    convert: F,
) -> Result<(), ApiError>
where
    F: FnOnce(&AppState, &str) -> Result<Converted, ApiError> + Send + 'static,
{
    // Decoding runs on this task, as it did before the store owned ingest: the body and
    // decompression limits bound it, and the wait for the log's group commit is an await,
    // so many requests in flight do not hold one blocking thread each (measured: a thread
    // per request cost ~15 % more CPU per profile and twice the resident memory).
    let converted = convert(s, &tenant)?;
    let body_bytes = converted.body_bytes;
    let receipt = s.store.ingest_async(&tenant, converted.batch).await?;
    let m = &s.metrics;
    m.ingested_profiles
        .fetch_add(receipt.profiles as u64, Ordering::Relaxed);
    m.ingested_bytes
        .fetch_add(body_bytes as u64, Ordering::Relaxed);
    Ok(())
}

/// Counts one accepted ingest request and its latency.
pub(crate) fn count_success(s: &AppState, started: Instant) {
    s.metrics.ingest_requests.fetch_add(1, Ordering::Relaxed);
    s.metrics
        .ingest_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
}

/// The response of an HTTP (non-gRPC) ingest route, counted in the metrics.
pub(crate) fn finish(
    s: &AppState,
    started: Instant,
    result: Result<Response, ApiError>,
) -> Response {
    match result {
        Ok(r) => {
            count_success(s, started);
            r
        }
        Err(e) => {
            s.metrics.reject(e.reason);
            e.into_response()
        }
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> Self {
        use IngestError as E;
        let message = e.to_string();
        let bad = |reason| ApiError::bad_request(reason, message.clone());
        match e {
            E::Store(inner) => inner.into(),
            E::TooLarge { .. } => ApiError::too_large("decompressed_too_large", message),
            E::SeriesLimit { .. } => ApiError {
                retry_after_secs: None,
                status: StatusCode::TOO_MANY_REQUESTS,
                code: "resource_exhausted",
                reason: "series_limit",
                message,
            },
            E::BadProfile { .. } | E::NoSampleTypes { .. } => bad("bad_profile"),
            E::TooManySamples { .. } => bad("too_many_samples"),
            E::TooOld { .. } | E::TooNew { .. } => bad("time_out_of_window"),
            E::TooManyLabels { .. } => bad("too_many_labels"),
            E::BadLabelName { .. } => bad("bad_label"),
            E::LabelNameTooLong { .. } | E::LabelValueTooLong { .. } => bad("label_too_long"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_statuses() {
        let e = ApiError::from(IngestError::TooManyLabels { count: 3, limit: 2 });
        assert_eq!(
            (e.status, e.reason),
            (StatusCode::BAD_REQUEST, "too_many_labels")
        );
        let e = ApiError::from(IngestError::SeriesLimit {
            tenant: "t".into(),
            limit: 1,
        });
        assert_eq!(
            (e.status, e.reason),
            (StatusCode::TOO_MANY_REQUESTS, "series_limit")
        );
        let e = ApiError::from(IngestError::Store(ember_store::StoreError::Closed));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
    }
}
