//! What every ingest route shares: reading a request body within the limits, running the
//! conversion to an [`IngestBatch`] and [`ember_store::Store::ingest_async`] on the ingest
//! [`Pool`], the metrics of accepted and refused requests, and the HTTP mapping of
//! [`IngestError`].
//!
//! The protocol modules ([`crate::pyroscope::ingest`], [`crate::push`], [`crate::grpc`])
//! only turn a request into a batch; validation, limits and durability (answered only after
//! the write-ahead log's fsync) belong to the store.
//!
//! Threads: decompressing and parsing profiles is CPU work, milliseconds for a usual
//! profile and up to a second or so for a request at the decompression limits. On the
//! server's async workers it stalled every other request, `/ready` included (5 s behind a
//! request of 64 gzip bombs), so all of it runs on the ingest [`Pool`], a runtime of its own
//! with one thread per core: the CPU work of ingest is bounded by the cores, and the wait for
//! the log's group commit is an `.await` there, so requests waiting for it hold no thread.
//! The async workers only move bytes and answer.

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
            s.pool
                .run(async move { gunzip(&bytes, max, "gzip body", "body") })
                .await
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
/// `Store::ingest_async` for `tenant`, both on the ingest [`Pool`]; returns once the batch
/// is durable.
pub(crate) async fn store_batch<F>(
    s: &Arc<AppState>,
    tenant: String,
    convert: F,
) -> Result<(), ApiError>
where
    F: FnOnce(&AppState, &str) -> Result<Converted, ApiError> + Send + 'static,
{
    let state = s.clone();
    s.pool
        .run(async move {
            let converted = convert(&state, &tenant)?;
            let body_bytes = converted.body_bytes;
            let receipt = state.store.ingest_async(&tenant, converted.batch).await?;
            let m = &state.metrics;
            m.ingested_profiles
                .fetch_add(receipt.profiles as u64, Ordering::Relaxed);
            m.ingested_bytes
                .fetch_add(body_bytes as u64, Ordering::Relaxed);
            Ok(())
        })
        .await
}

/// The threads ingest requests decode and store on: a multi-threaded tokio runtime of its
/// own, one worker per core (no I/O or timer driver: nothing there needs one).
///
/// Not `spawn_blocking`: the store's ingest awaits the log's group commit, and a blocking
/// thread would be held through that wait (measured before: a thread per request cost ~15 %
/// more CPU per profile and twice the resident memory), while a bounded blocking pool would
/// let only as many requests as cores share a group commit. Here a request waiting for the
/// fsync holds no thread, so any number share one, and only the CPU work is bounded.
/// A task handed over runs to its end even if the client goes away, so a batch whose record
/// is in the log is always applied too.
#[derive(Debug)]
pub(crate) struct Pool {
    /// `None` only while dropping.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Pool {
    /// Starts the threads (`ember-ingest`, as many as cores).
    pub(crate) fn new() -> std::io::Result<Pool> {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("ember-ingest")
            .build()?;
        Ok(Pool {
            runtime: Some(runtime),
        })
    }

    /// Runs `work` on the pool and waits for its result (a panic there is a 500).
    pub(crate) async fn run<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        F: Future<Output = Result<T, ApiError>> + Send + 'static,
        T: Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return Err(ApiError::internal("the ingest threads are stopped"));
        };
        runtime
            .spawn(work)
            .await
            .map_err(|e| ApiError::internal(format!("ingest task failed: {e}")))?
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The server's state is dropped on an async worker, where a runtime may not block
        // waiting for its threads; they end by themselves once their tasks are done.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
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
            E::BatchTooLarge { limit } => ApiError::too_large(
                "request_decompressed_too_large",
                format!(
                    "the request's profiles decompress to more than {limit} bytes together \
                     (max_request_decompressed_bytes); nothing was stored: send fewer or \
                     smaller profiles per request"
                ),
            ),
            E::Busy { tenant, limit } => {
                let (status, code, reason, message) = match tenant {
                    Some(t) => (
                        StatusCode::TOO_MANY_REQUESTS,
                        "resource_exhausted",
                        "tenant_busy",
                        format!(
                            "tenant {t:?} already has close to {limit} bytes of decompressed \
                             profiles being stored (max_tenant_decompressed_bytes_in_flight); \
                             nothing was stored: retry shortly"
                        ),
                    ),
                    None => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "unavailable",
                        "server_busy",
                        format!(
                            "the server already has close to {limit} bytes of decompressed \
                             profiles being stored (max_decompressed_bytes_in_flight); \
                             nothing was stored: retry shortly"
                        ),
                    ),
                };
                ApiError {
                    retry_after_secs: Some(1),
                    status,
                    code,
                    reason,
                    message,
                }
            }
            E::TotalSeriesLimit { .. } => ApiError {
                retry_after_secs: None,
                status: StatusCode::TOO_MANY_REQUESTS,
                code: "resource_exhausted",
                reason: "series_total_limit",
                message: format!("{message} (max_series_total)"),
            },
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

    /// A task the client gave up on runs on after the server is gone and may hold the last
    /// reference to the server's state, so the pool can be dropped by one of its own
    /// threads: that must neither panic nor hang.
    #[test]
    fn the_pool_may_be_dropped_by_its_own_task() {
        let pool = Arc::new(Pool::new().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let last = pool.clone();
        pool.runtime.as_ref().unwrap().spawn(async move {
            // Wait until the test has dropped its reference, then drop the last one here.
            while Arc::strong_count(&last) > 1 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            drop(last);
            let _ = tx.send(());
        });
        drop(pool);
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the task that dropped the pool finished");
    }

    /// CPU time of this process so far (user + system), µs, from `/proc/self/stat`.
    fn cpu_micros() -> u64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let after_name = stat.rsplit(')').next().unwrap_or("");
        let ticks: u64 = after_name
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|t| t.parse::<u64>().ok())
            .sum();
        // Clock ticks are 100 per second on Linux.
        ticks * 10_000
    }

    /// What handing a request's work to the ingest pool costs: the round trip of an empty
    /// task from a server-like runtime, one at a time and 64 at once. Run with
    /// `cargo test -p ember-server --lib pool_hop -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn pool_hop_costs_microseconds() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        runtime.block_on(async {
            let pool = Arc::new(Pool::new().unwrap());
            let n = 20_000u32;
            for _ in 0..1000 {
                pool.run(async { Ok(()) }).await.unwrap();
            }
            let (started, cpu) = (Instant::now(), cpu_micros());
            for _ in 0..n {
                pool.run(async { Ok(()) }).await.unwrap();
            }
            let one = started.elapsed() / n;
            let one_cpu = (cpu_micros() - cpu) as f64 / f64::from(n);
            let (started, cpu) = (Instant::now(), cpu_micros());
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let pool = pool.clone();
                    tokio::spawn(async move {
                        for _ in 0..n / 64 {
                            pool.run(async { Ok(()) }).await.unwrap();
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let concurrent = started.elapsed() / (n / 64 * 64);
            let concurrent_cpu = (cpu_micros() - cpu) as f64 / f64::from(n / 64 * 64);
            // For comparison, tokio's blocking pool (what the gzip'd body used before).
            let started = Instant::now();
            for _ in 0..n {
                tokio::task::spawn_blocking(|| ()).await.unwrap();
            }
            let blocking = started.elapsed() / n;
            println!(
                "pool hop: {one:?} ({one_cpu:.1} µs CPU) one at a time, {concurrent:?} \
                 ({concurrent_cpu:.1} µs CPU) per task with 64 at once; spawn_blocking \
                 {blocking:?} one at a time"
            );
        });
    }

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
        let e = ApiError::from(IngestError::BatchTooLarge { limit: 9 });
        assert_eq!(
            (e.status, e.reason, e.retry_after_secs),
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                "request_decompressed_too_large",
                None
            )
        );
        assert!(e.message.contains("max_request_decompressed_bytes"));
        // Busy is transient: the client is told to come back.
        let e = ApiError::from(IngestError::Busy {
            tenant: Some("t".into()),
            limit: 9,
        });
        assert_eq!(
            (e.status, e.reason, e.retry_after_secs),
            (StatusCode::TOO_MANY_REQUESTS, "tenant_busy", Some(1))
        );
        assert!(
            e.message
                .contains("max_tenant_decompressed_bytes_in_flight")
        );
        let e = ApiError::from(IngestError::Busy {
            tenant: None,
            limit: 9,
        });
        assert_eq!(
            (e.status, e.reason, e.retry_after_secs),
            (StatusCode::SERVICE_UNAVAILABLE, "server_busy", Some(1))
        );
        let e = ApiError::from(IngestError::TotalSeriesLimit { limit: 9 });
        assert_eq!(
            (e.status, e.reason),
            (StatusCode::TOO_MANY_REQUESTS, "series_total_limit")
        );
    }
}
