//! Ember's profile server: Pyroscope-compatible ingest, durable storage and queries over HTTP.
//!
//! Owns the HTTP layer (axum on tokio): routing, tenants, limits, error bodies and metrics,
//! with one small module per protocol: `pyroscope` (legacy `/ingest`, render), `push`
//! (`push.v1` over Connect), `grpc` (gRPC framing of the same), `querier` (`querier.v1`)
//! and `api` (`/api/v1`, its single-profile routes and call graph parameters in `single`);
//! `metrics` renders `/metrics`; the transport is `listen` (accept loop, timeouts, connection
//! cap) and `tls` (HTTPS, the exposure warning), the token file `auth`, tenant resolution
//! `tenants`. Ingest routes only turn a request into an
//! [`ember_store::IngestBatch`]: validation, limits and the write-ahead log are
//! [`ember_store::Store::ingest`]'s. What a read query means and how its answer is shaped
//! lives in `ember-query` (the read routes only translate requests and responses).
//!
//! # Routes
//!
//! Every route reads the tenant from `X-Scope-OrgID` (default `anonymous`); tenants never see
//! each other's data. With a token file (`ember server --auth-tokens FILE`, lines `token tenant`)
//! every data route requires `Authorization: Bearer <token>` (401 otherwise) and the token
//! decides the tenant; `/ready`, `/healthz` and `/metrics` stay open (`--metrics-auth`:
//! `/metrics` needs a token too). With `allowed_tenants` in the config, any other tenant gets
//! 403 on every data route. What is open by default and why: README, "Threat model". Errors
//! are JSON `{"code": "...", "message": "..."}` (the Connect error
//! shape) with a 4xx/5xx status.
//!
//! | Route | What |
//! |---|---|
//! | `GET /`, `GET /ui/{file}` | the web UI (crate `ember-ui`, feature `ui`, on by default): static files, no token needed |
//! | `GET /ready`, `GET /healthz` | 200 `ready` / `ok` once the log is replayed; `/ready` is 503 while shutting down or while the disk is full |
//! | `GET /metrics` | Prometheus text: `ember_ingested_profiles_total`, `ember_ingested_bytes_total`, `ember_rejected_total{reason}`, WAL/ingest/query latency sums, `ember_wal_records_skipped_total` (damaged log records skipped at start), `ember_blocks_quarantined`, connections (`ember_connections_open`, `ember_connections_closed_total{reason}` by timeout, `ember_request_body_timeouts_total`); open, or a token with `--metrics-auth` |
//! | `POST /ingest`, `POST /pyroscope/ingest` | Pyroscope legacy ingest: `name=app.cpu{k=v}`, `from`, `until` (unix s/ms/µs/ns), `sampleRate`, `spyName`, `units`, `aggregationType` (`sum`, the default, or `average`: the series gets the label `__aggregation_type__="average"` and queries average its profiles over the time range, per flame graph node and per timeline bucket, instead of adding them; any other value is a 400), `format=folded` (default), `lines` or `pprof` (multipart `profile` + optional `sample_type_config`, or a raw body) |
//! | `POST /push.v1.PusherService/Push` | Connect unary, `application/proto` or `application/json` body, optional `Content-Encoding: gzip`; or gRPC (`application/grpc` over cleartext HTTP/2 with prior knowledge, `grpc-encoding: gzip` accepted, status in the `grpc-status`/`grpc-message` trailers) |
//! | `GET /pyroscope/render?query=&from=&until=&maxNodes=` | merged flame graph as Pyroscope flamebearer JSON with a timeline; `maxNodes` defaults to 8,192 (`ember_query::DEFAULT_MAX_NODES`, also the default of `/api/v1/query` and `querier.v1`; 0 = no limit); always `single`, also for a selection holding a pushed `pprof -diff_base` profile (then the net values: Grafana's Pyroscope data source expects `single` from this route) |
//! | `GET /api/v1/query?query=&type=&from=&until=&format=&focus=` | merged profile (only the stacks through the call path `focus`, a JSON array of frame names, when given: the web UI's zoom, so the node limit is spent on that subtree) as `pprof` (gzip'd), `folded`, `svg`, `top`, `top-json` (every function with raw self and total values, for the web UI), `speedscope` (speedscope's JSON file format, one `sampled` profile), `callgraph` (the pprof-style call graph as JSON: `nodes` with `name`, `self`, `total` (each stack once per function), `edges` `from`→`to` with `weight` and `residual` (through dropped functions), and what was `dropped`; pruned like `go tool pprof` by `nodeFraction` (0.005), `edgeFraction` (0.001) and `nodeCount` (80, 0 = all)), `flamebearer` (default) or `flamebearer-bin` (the same flame graph, cut at the same `maxNodes`, in a compact binary layout a browser reads without parsing, what the web UI asks for: `EMFG`, a JSON header, the nodes depth by depth as little-endian `f64` total and self and `u32` name and parent columns, then the names; no timeline; `Content-Type: application/vnd.ember.flamegraph`; layout in `ember_query::flamebin`; with `minShare=` (0 to 1) only the nodes of at least that share of the whole, each with its x: the web UI's first paint, the nodes wide enough to draw, before the whole tree). A selection holding a pushed `pprof -diff_base` profile (samples labelled `pprof::base=true`) answers every format as the diff it is, base → the other samples: `top`/`top-json` against the base's total as `go tool pprof` does, `pprof` in the `-diff_base` form, `svg`/`folded` differential, and `flamebearer`/`flamebearer-bin` in the `double` form of `/api/v1/diff` (`leftTicks` the base's total; the JSON keeps its timeline; `minShare` is ignored: the whole diff is the first paint), which the web UI draws as a differential flame graph |
//! | `GET /api/v1/timeseries?query=&type=&from=&until=&step=&groupBy=a,b` | totals per `step` seconds, grouped by labels |
//! | `GET /api/v1/labels?query=&from=&until=` | label names |
//! | `GET /api/v1/label/{name}/values?query=&from=&until=` | values of one label |
//! | `GET /api/v1/profile_types` | profile type ids |
//! | `GET /api/v1/series?query=&from=&until=` | label sets of matching series |
//! | `GET /api/v1/profiles?query=&type=&from=&until=&limit=` | the individual profiles of the selection in the range, newest first, at most `limit` (500 by default, 10,000 at most): `profiles` with each one's `labels`, `series` (its labels as a selector), `time` (unix ns, a string), `timeMs`, `total`; and `matched`, how many the range holds |
//! | `GET /api/v1/profile?series=&time=&format=&focus=&maxNodes=` | exactly one profile: the series with exactly the labels of `series` (`{a="1", ...}`) at `time` (unix ns), in any format of `/api/v1/query` (a pushed `pprof -diff_base` profile as `double` too); the flamebearer also carries `profile` (labels, time, total); 404 when there is none |
//! | `GET /pyroscope/render-diff?leftQuery=&leftFrom=&leftUntil=&rightQuery=&rightFrom=&rightUntil=` | diff of two selections, flamebearer `double` format |
//! | `GET /api/v1/diff?leftQuery=&rightQuery=&type=&from=&until=&format=&focus=` | diff of the right selection against the left (baseline): `svg` (differential flame graph: widths from the right side, red = grew, blue = shrank), `pprof` (gzip'd, right minus left per stack, like `pprof -diff_base`), `folded` (`stack left right` lines), `top` (of the pprof diff), `top-json` (every function of either side with `leftSelf`, `leftTotal`, `rightSelf`, `rightTotal` and the changes `self`, `total`, largest |self change| first, plus both sides' totals: the web UI's movers) `speedscope` (two `sampled` profiles over one frame table: baseline and comparison) or `flamebearer` (default, as render-diff; cut at `maxNodes` like `/api/v1/query`'s, the cut children of a frame summed per side into `other`), or `flamebearer-bin` (the same `double` graph in `/api/v1/query`'s binary layout: left total, left self, right total, right self columns). `focus` (a JSON array of frame names) keeps only the stacks through that call path on both sides, before the node limit (the Compare view's zoom). Every `left*`/`right*` key (`leftQuery`, `leftFrom`, `leftUntil`, `leftType`, ...) falls back to the plain key, so `?query=X&leftFrom=..&leftUntil=..&rightFrom=..&rightUntil=..` compares two time ranges of one selection |
//! | `POST /querier.v1.QuerierService/{method}` | Connect unary (proto or JSON): `ProfileTypes`, `LabelNames`, `LabelValues`, `Series`, `SelectMergeStacktraces`, `SelectMergeSpanProfile` (samples of trace spans), `SelectMergeProfile` (proto only), `SelectSeries`, `Diff` |
//!
//! `query` is a selector `{service_name="api", region=~"eu-.*", pod!="x", x!~"y"}`, optionally
//! prefixed by a profile type id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds{...}`) or a legacy
//! Pyroscope name (`app.cpu{...}` = `service_name="app"` and sample type `cpu`). `type` may also
//! give the profile type. `from`/`until` are unix timestamps (s, ms, µs or ns) or `now`,
//! `now-1h`, `now-30m`, `now-7d`; defaults `now-1h` and `now`. Every `/api/v1` selection also
//! takes frame filters, applied to the merged stacks before `focus` and the node limit (a
//! filter moves values between frames, never drops them): `hide` (a regex; matching frames
//! are left out of every stack, their self value going to their caller), `collapseRecursion`
//! (`true`: a frame named like its caller merges into it) and `dropBelow` (a function name:
//! everything below its frames folds into them) and `focusFunction` (a function name: only
//! the stacks through it, each re-rooted at its outermost call, so all its call sites add up
//! under one root frame). One set applies to both sides of a diff.

//!
//! # Configuration
//!
//! `ember server --listen 127.0.0.1:4040 --data-dir ./ember-data [--config FILE.json]
//! [--auth-tokens FILE [--metrics-auth]] [--tls-cert FILE --tls-key FILE]` (HTTPS with
//! HTTP/1.1 and HTTP/2 by ALPN: `tls`). The JSON config holds [`Limits`] (every key optional):
//! `max_body_bytes` (16 MiB), `max_decompressed_bytes` (64 MiB, one profile),
//! `max_request_decompressed_bytes` (128 MiB, all profiles of a request together; 413),
//! `max_tenant_decompressed_bytes_in_flight` (256 MiB; 429) and
//! `max_decompressed_bytes_in_flight` (512 MiB, all tenants; 503): decompressed profiles
//! held by requests being stored, `max_samples_per_profile`
//! (1,000,000), `max_labels_per_series` (30), `max_label_name_length` (1024),
//! `max_label_value_length` (2048), `max_series_per_tenant` (100,000), `max_series_total`
//! (200,000 over all tenants; 0 = no limit), `allowed_tenants` (a list; unset = any),
//! `max_push_requests_per_second` (0 = unlimited; per tenant, 429 with `Retry-After` beyond),
//! the connection bounds of `listen` (0 disables each): `header_read_timeout_seconds` (10),
//! `body_read_timeout_seconds` (60, 408 beyond), `idle_timeout_seconds` (60) and
//! `max_connections` (4,096; beyond, new connections wait in the listen backlog),
//! `flush_interval_seconds` (300; the log is also flushed into a block at start and at
//! graceful shutdown), `flush_wal_mib` (128: flush early once the log holds this much, so a
//! burst never builds a head that takes long to flush or holds much memory),
//! `block_cache_mib` (128: decoded blocks kept for queries), `retention_days` (30; 0 keeps
//! everything; profiles older than that are refused at ingest with a 400 naming their time
//! and the window) and `max_future_skew_seconds` (3600; profiles timestamped further ahead
//! of the server's clock are refused with a 400; 0 = no limit). Small blocks are compacted
//! after each flush. Replay of the log at start flushes into a block every `flush_wal_mib`
//! too, so a large log after a crash never builds a larger head.
//!
//! # Full disk
//!
//! A push whose write-ahead log write fails for lack of space is refused with 503 and
//! `Retry-After: 10`, and nothing of it is kept (the partial write is truncated away); `/ready`
//! answers 503 until a probe write succeeds again. Records acknowledged before and after are
//! all kept: a torn or corrupt record found at replay is skipped (logged with its segment
//! and offset, counted in `ember_wal_records_skipped_total`) and replay goes on.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
mod api;
mod auth;
#[doc(hidden)]
pub mod fuzzing;
mod grpc;
mod ingest;
mod listen;
mod metrics;
mod push;
mod pyroscope;
pub mod querier;
mod query;
mod single;
mod tenants;
mod tls;

pub use auth::read_tokens;
pub use tls::TlsFiles;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ember_store::{IngestLimits, Store, StoreOptions};
pub(crate) use tenants::tenant;

/// Request and data limits; every one has a default.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request body as received (413 beyond).
    pub max_body_bytes: usize,
    /// Largest profile after decompression (gzip bombs are cut off here; 400/413).
    pub max_decompressed_bytes: u64,
    /// Most bytes all the profiles of one request may decompress to together (raw ones
    /// count their size); 413 beyond, nothing of the request stored. Without it a small
    /// request of many gzip bombs, each under `max_decompressed_bytes`, held gigabytes.
    /// Never more than the two in-flight limits. 0 = no limit.
    pub max_request_decompressed_bytes: u64,
    /// Most decompressed profile bytes the requests of one tenant may hold while they are
    /// being stored; a request beyond gets 429 with `Retry-After`. 0 = no limit.
    pub max_tenant_decompressed_bytes_in_flight: u64,
    /// The same over all tenants; 503 with `Retry-After` beyond. 0 = no limit.
    pub max_decompressed_bytes_in_flight: u64,
    /// Most samples one profile may carry.
    pub max_samples_per_profile: usize,
    /// Most labels one series may carry.
    pub max_labels_per_series: usize,
    /// Longest label name.
    pub max_label_name_length: usize,
    /// Longest label value.
    pub max_label_value_length: usize,
    /// Most series one tenant may hold (429 beyond).
    pub max_series_per_tenant: usize,
    /// Most series all tenants may hold together (429 beyond; 0 = no limit): without it
    /// every new `X-Scope-OrgID` brought its own `max_series_per_tenant`.
    pub max_series_total: usize,
    /// When set, the only tenants served (`anonymous` is the tenant of requests without
    /// `X-Scope-OrgID`); any other gets 403 on every data route.
    pub allowed_tenants: Option<Vec<String>>,
    /// Push requests per second one tenant may make, with bursts of as many (at least 1);
    /// beyond, 429 with `Retry-After`. 0 = unlimited.
    pub max_push_requests_per_second: f64,
    /// Seconds a connection has for its TLS handshake and first request head, and an
    /// HTTP/1.1 connection for each later head after the previous answer (0 = no limit).
    pub header_read_timeout_seconds: f64,
    /// Seconds a request's body may take to arrive after its head (408 beyond; 0 = no limit).
    pub body_read_timeout_seconds: f64,
    /// Seconds a connection may stay without a request before it is closed (0 = no limit).
    pub idle_timeout_seconds: f64,
    /// Most connections open at once; beyond, new ones wait in the listen backlog (0 = no cap).
    pub max_connections: usize,
    /// Seconds between flushes of the write-ahead log into a block (0 = only at shutdown).
    pub flush_interval_seconds: u64,
    /// Flush before the interval is up once the log holds this many MiB (bounds the memory of
    /// the head and the time of the shutdown flush; ignored when the interval is 0).
    pub flush_wal_mib: u64,
    /// Memory budget, in MiB, for decoded blocks kept between queries.
    pub block_cache_mib: usize,
    /// Days of data kept; older blocks are deleted (0 = keep forever). Profiles older than
    /// this are refused at ingest (400) rather than acknowledged and then deleted.
    pub retention_days: f64,
    /// Profiles timestamped more than this many seconds ahead of the server's clock are
    /// refused (400): a far-future time would make a block that never expires. 0 = no limit.
    pub max_future_skew_seconds: f64,
}

impl Limits {
    /// The store's options for these limits: the one mapping from the server's
    /// configuration to [`StoreOptions`], for [`Server::bind`] and the fuzz targets.
    pub(crate) fn store_options(&self) -> StoreOptions {
        // A request over an in-flight limit alone could never be stored: the smallest of
        // the three is the request's real limit.
        let per_request = [
            self.max_request_decompressed_bytes,
            self.max_tenant_decompressed_bytes_in_flight,
            self.max_decompressed_bytes_in_flight,
        ]
        .into_iter()
        .filter(|&n| n != 0)
        .min()
        .unwrap_or(0);
        StoreOptions {
            max_series_per_tenant: self.max_series_per_tenant,
            max_series_total: self.max_series_total,
            retention_nanos: (self.retention_days.max(0.0) * 86_400e9) as i64,
            ingest: IngestLimits {
                max_decompressed_bytes: self.max_decompressed_bytes,
                max_samples_per_profile: self.max_samples_per_profile,
                max_labels_per_series: self.max_labels_per_series,
                max_label_name_length: self.max_label_name_length,
                max_label_value_length: self.max_label_value_length,
                max_batch_decompressed_bytes: per_request,
                max_tenant_decompressed_bytes_in_flight: self
                    .max_tenant_decompressed_bytes_in_flight,
                max_decompressed_bytes_in_flight: self.max_decompressed_bytes_in_flight,
                max_future_skew_nanos: (self.max_future_skew_seconds.max(0.0) * 1e9) as i64,
                refuse_expired: true,
            },
            cache_bytes: self.block_cache_mib.saturating_mul(1 << 20),
            // Replay after a crash flushes into blocks at the same size as ingest does, so
            // a large log never builds a head larger than a flush's.
            replay_flush_bytes: self.flush_wal_mib.saturating_mul(1 << 20),
            ..StoreOptions::default()
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 << 20,
            max_decompressed_bytes: 64 << 20,
            // Two largest profiles per request; a tenant's requests may hold twice that at
            // once and all tenants together twice again, so a flood of bombs stays within
            // ~0.5 GiB of decompressed profiles (plus what their parsing takes).
            max_request_decompressed_bytes: 128 << 20,
            max_tenant_decompressed_bytes_in_flight: 256 << 20,
            max_decompressed_bytes_in_flight: 512 << 20,
            max_samples_per_profile: 1_000_000,
            max_labels_per_series: 30,
            max_label_name_length: 1024,
            max_label_value_length: 2048,
            max_series_per_tenant: 100_000,
            // ~2.9 KB of memory per series in a head (4 tenants of 100,000 series took
            // 1.15 GB): two full tenants.
            max_series_total: 200_000,
            allowed_tenants: None,
            max_push_requests_per_second: 0.0,
            header_read_timeout_seconds: 10.0,
            body_read_timeout_seconds: 60.0,
            idle_timeout_seconds: 60.0,
            max_connections: 4096,
            flush_interval_seconds: 300,
            // 128 MiB of log is ~3,300 realistic 74 KB Go profiles, a head of ~150 MiB; with
            // the cache's 128 MiB that keeps the server near 512 MiB at peak (BENCHMARKS.md).
            flush_wal_mib: 128,
            block_cache_mib: 128,
            retention_days: 30.0,
            max_future_skew_seconds: 3600.0,
        }
    }
}

/// Server configuration (the `--config` JSON file holds the [`Limits`], flags the rest).
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Directory of the write-ahead log and data.
    pub data_dir: PathBuf,
    /// Limits.
    pub limits: Limits,
    /// Bearer token → tenant; `None` disables auth (tenant from `X-Scope-OrgID`).
    pub tokens: Option<std::collections::HashMap<String, String>>,
    /// Serve HTTPS with this certificate and key; `None` = plain HTTP.
    pub tls: Option<TlsFiles>,
    /// Whether `/metrics` needs a bearer token of `tokens` too (requires `tokens`).
    pub metrics_auth: bool,
}

/// Errors of the server's own setup (binding, opening storage).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Opening the storage failed.
    #[error("opening storage: {0}")]
    Store(#[from] ember_store::StoreError),
    /// The configuration is inconsistent (a bad value, a flag that needs another).
    #[error("configuration: {0}")]
    Config(String),
    /// The TLS certificate or key could not be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// A socket operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
}

/// Counters exported at `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    ingested_profiles: AtomicU64,
    ingested_bytes: AtomicU64,
    ingest_requests: AtomicU64,
    ingest_micros: AtomicU64,
    queries: AtomicU64,
    query_micros: AtomicU64,
    flushes: AtomicU64,
    flush_micros: AtomicU64,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    fn reject(&self, reason: &'static str) {
        *self
            .rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(reason)
            .or_insert(0) += 1;
    }
}

/// State shared by all handlers.
#[derive(Debug)]
pub struct AppState {
    store: Store,
    limits: Limits,
    tokens: Option<std::collections::HashMap<String, String>>,
    metrics: Metrics,
    /// Where ingest requests decode and store (see [`ingest::Pool`]).
    pool: ingest::Pool,
    connections: listen::ConnectionStats,
    metrics_auth: bool,
    ready: AtomicBool,
    /// Push token buckets per tenant: (tokens, last refill).
    push_buckets: Mutex<std::collections::HashMap<String, (f64, std::time::Instant)>>,
}

impl AppState {
    /// The state of a server over `store`: fresh metrics, ready, its ingest threads started.
    pub(crate) fn new(
        store: Store,
        limits: Limits,
        tokens: Option<std::collections::HashMap<String, String>>,
        metrics_auth: bool,
    ) -> Result<AppState, ServerError> {
        let pool = ingest::Pool::new().map_err(|source| ServerError::Io {
            context: "starting the ingest threads".into(),
            source,
        })?;
        Ok(AppState {
            store,
            limits,
            tokens,
            metrics: Metrics::default(),
            pool,
            connections: listen::ConnectionStats::default(),
            metrics_auth,
            ready: AtomicBool::new(true),
            push_buckets: Mutex::new(std::collections::HashMap::new()),
        })
    }

    /// Takes one push request token of `tenant` (`max_push_requests_per_second`); the error
    /// is a 429 whose `Retry-After` is the whole seconds until a token is back.
    pub(crate) fn take_push_token(&self, tenant: &str) -> Result<(), ApiError> {
        let rate = self.limits.max_push_requests_per_second;
        if rate <= 0.0 || !rate.is_finite() {
            return Ok(());
        }
        let burst = rate.max(1.0);
        let now = std::time::Instant::now();
        let mut buckets = self.push_buckets.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, last) = buckets.entry(tenant.to_string()).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*last).as_secs_f64() * rate).min(burst);
        *last = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            return Ok(());
        }
        let wait = ((1.0 - *tokens) / rate).ceil().max(1.0) as u64;
        Err(ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            code: "resource_exhausted",
            reason: "rate_limit",
            message: format!(
                "tenant {tenant:?} is over max_push_requests_per_second ({rate}); retry in {wait} s"
            ),
            retry_after_secs: Some(wait),
        })
    }
}

/// `Retry-After` of a push refused because the disk is full.
const DISK_FULL_RETRY_SECS: u64 = 10;

/// An API error: HTTP status, Connect-style code and message, and the metrics reason.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    reason: &'static str,
    message: String,
    /// Sent as `Retry-After` (seconds) when set.
    retry_after_secs: Option<u64>,
}

impl ApiError {
    pub(crate) fn bad_request(reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            retry_after_secs: None,
            status: StatusCode::BAD_REQUEST,
            code: "invalid_argument",
            reason,
            message: message.into(),
        }
    }

    pub(crate) fn too_large(reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            retry_after_secs: None,
            status: StatusCode::PAYLOAD_TOO_LARGE,
            code: "resource_exhausted",
            reason,
            message: message.into(),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        ApiError {
            retry_after_secs: None,
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal",
            reason: "internal",
            message: message.into(),
        }
    }
}

impl From<ember_store::StoreError> for ApiError {
    fn from(e: ember_store::StoreError) -> Self {
        use ember_store::StoreError as E;
        match e {
            E::Selector(_) => ApiError::bad_request("bad_query", e.to_string()),
            E::Closed => ApiError {
                retry_after_secs: None,
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "unavailable",
                reason: "shutting_down",
                message: e.to_string(),
            },
            // Nothing of the refused write was kept: the client retries once space is freed.
            E::NoSpace { .. } => ApiError {
                retry_after_secs: Some(DISK_FULL_RETRY_SECS),
                status: StatusCode::SERVICE_UNAVAILABLE,
                code: "unavailable",
                reason: "disk_full",
                message: e.to_string(),
            },
            E::Io { .. } | E::Locked { .. } | E::NewerFormat { .. } => {
                ApiError::internal(e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "code": self.code, "message": self.message });
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from(secs));
        }
        response
    }
}

/// Header `name` as text (`None` when it is absent or not visible ASCII).
pub(crate) fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A bound, ready server.
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    tls: Option<Arc<rustls::ServerConfig>>,
    connections: listen::ConnectionOptions,
}

impl Server {
    /// Opens the storage (replaying its log) and binds the listener. Must run inside a tokio runtime.
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        let limits = config.limits.clone();
        // Every setting is checked before the storage is opened or the port taken.
        let connections = listen::ConnectionOptions::from_limits(&limits)?;
        if config.metrics_auth && config.tokens.is_none() {
            return Err(ServerError::Config(
                "--metrics-auth needs --auth-tokens (the tokens /metrics accepts)".into(),
            ));
        }
        let tls = config.tls.as_ref().map(tls::server_config).transpose()?;
        let data_dir = config.data_dir.clone();
        let store_options = limits.store_options();
        let store = tokio::task::spawn_blocking(move || Store::open(&data_dir, store_options))
            .await
            .map_err(|e| ServerError::Io {
                context: "opening storage".into(),
                source: std::io::Error::other(e.to_string()),
            })??;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Io {
                context: format!("listening on {}", config.listen),
                source,
            })?;
        let state = Arc::new(AppState::new(
            store,
            limits,
            config.tokens,
            config.metrics_auth,
        )?);
        let tokens = state.tokens.is_some();
        let bound = listener.local_addr().unwrap_or(config.listen);
        tls::warn_if_exposed(bound, tokens, tls.is_some(), config.metrics_auth);
        Ok(Server {
            listener,
            state,
            tls,
            connections,
        })
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// `(WAL segments, records replayed, records that failed to apply)` at startup.
    pub fn replayed(&self) -> (usize, usize, usize) {
        let (r, errors) = self.state.store.replay_stats();
        (r.segments, r.records, errors)
    }

    /// Serves until `shutdown` completes, then finishes in-flight requests and flushes the log.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let state = self.state.clone();
        let interval = self.state.limits.flush_interval_seconds;
        let flusher = (interval > 0).then(|| {
            let s = self.state.clone();
            let wal_limit = self.state.limits.flush_wal_mib.saturating_mul(1 << 20);
            tokio::spawn(async move {
                // Checks the log's size every second (a directory listing); flushes when it
                // passed the limit or the interval is up, whichever comes first. A back-fill
                // writes ~35 MB of log a second: checking every 5 s let the head grow to twice
                // the limit before a flush.
                let tick = std::time::Duration::from_secs(1);
                let mut last = std::time::Instant::now();
                loop {
                    tokio::time::sleep(tick).await;
                    let due = last.elapsed().as_secs() >= interval;
                    if !due && s.store.disk_usage().2 < wal_limit {
                        continue;
                    }
                    let st = s.clone();
                    let _ = tokio::task::spawn_blocking(move || flush_and_expire(&st, true)).await;
                    last = std::time::Instant::now();
                }
            })
        });
        let st = self.state.clone();
        // Compaction is left to the timer: at start it would run before the first request
        // is answered (a chain of merges took ~3 s after a shutdown that skipped it).
        let _ = tokio::task::spawn_blocking(move || flush_and_expire(&st, false)).await;
        let app = router(self.state.clone());
        listen::serve(
            self.listener,
            app,
            self.state,
            self.tls,
            self.connections,
            shutdown,
        )
        .await;
        let drained = std::time::Instant::now();
        state.ready.store(false, Ordering::SeqCst);
        if let Some(f) = flusher {
            f.abort();
        }
        // A compaction the timer started goes on in its blocking thread (abort does not
        // reach it); it stops after its current merge instead of holding up the final flush.
        state.store.stop_compaction();
        let s = state.clone();
        // Shutdown flush: fold the log into a block so the next start loads it directly.
        // Each step is timed: how long a shutdown takes is mostly how much the head held.
        let _ = tokio::task::spawn_blocking(move || {
            let (_, profiles, _, _) = s.store.head_stats();
            // No compaction here: a chain of merges (about a second each for a live server's
            // blocks) would hold up the exit for what the next start's timer does as well.
            flush_and_expire(&s, false);
            let flushed = drained.elapsed();
            s.store.close();
            tracing::info!(
                head_profiles = profiles,
                flush_ms = flushed.as_millis() as u64,
                close_ms = (drained.elapsed() - flushed).as_millis() as u64,
                "shutdown: final flush done and the write-ahead log closed"
            );
        })
        .await;
        Ok(())
    }
}

/// One flush, then (with `compact`) a compaction, then a retention pass; failures are
/// counted and reported, never fatal: the log still holds the data.
fn flush_and_expire(s: &AppState, compact: bool) {
    let started = std::time::Instant::now();
    let flushed = s.store.flush();
    let flush_ms = started.elapsed().as_millis() as u64;
    match flushed {
        Ok(stats) => {
            s.metrics.flushes.fetch_add(1, Ordering::Relaxed);
            s.metrics
                .flush_micros
                .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            if let Some(path) = stats.block {
                tracing::info!(
                    records = stats.records,
                    wal_bytes = stats.wal_bytes,
                    block = %path.display(),
                    block_bytes = stats.block_bytes,
                    flush_ms,
                    "flushed the write-ahead log into a block"
                );
            }
        }
        Err(e) => {
            s.metrics.reject("flush_failed");
            tracing::error!(error = %e, "flush failed (data stays in the log)");
        }
    }
    let compacting = std::time::Instant::now();
    match if compact { s.store.compact() } else { Ok(0) } {
        Ok(0) => {}
        Ok(merged) => tracing::info!(
            blocks = merged,
            compact_ms = compacting.elapsed().as_millis() as u64,
            "compacted small blocks"
        ),
        Err(e) => tracing::error!(error = %e, "compaction failed (the blocks stay as they were)"),
    }
    let now = ember_store::now_nanos();
    match s.store.enforce_retention(now) {
        Ok(0) => {}
        Ok(deleted) => tracing::info!(blocks = deleted, "retention deleted expired blocks"),
        Err(e) => tracing::error!(error = %e, "retention failed"),
    }
}

fn router(state: Arc<AppState>) -> Router {
    let routes = Router::new()
        .route("/ready", get(ready))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics::metrics))
        .route("/ingest", post(pyroscope::ingest::legacy))
        .route("/pyroscope/ingest", post(pyroscope::ingest::legacy))
        .route("/push.v1.PusherService/Push", post(push::push))
        .route("/pyroscope/render", get(pyroscope::render::render))
        .route("/api/v1/query", get(api::query))
        .route("/api/v1/timeseries", get(api::timeseries))
        .route("/api/v1/labels", get(api::labels))
        .route("/api/v1/label/{name}/values", get(api::label_values))
        .route("/api/v1/profile_types", get(api::profile_types))
        .route("/api/v1/series", get(api::series))
        .route("/api/v1/profiles", get(single::profiles))
        .route("/api/v1/profile", get(single::profile))
        .route(
            "/pyroscope/render-diff",
            get(pyroscope::render::render_diff),
        )
        .route("/api/v1/diff", get(api::diff))
        .route(
            "/querier.v1.QuerierService/{method}",
            post(querier::querier),
        );
    // The web UI (`GET /`, `GET /ui/{file}`): static files, open like `/ready` (they hold no
    // data; the page's API calls carry the tenant and token).
    #[cfg(feature = "ui")]
    let routes = routes.merge(ember_ui::router());
    // Without the UI, `/` says why there is no page instead of an empty 404.
    #[cfg(not(feature = "ui"))]
    let routes = routes.route("/", get(no_ui));
    routes
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}

async fn ready(axum::extract::State(s): axum::extract::State<Arc<AppState>>) -> Response {
    if !s.ready.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    // After a write failed for lack of space this probes the disk (a small write).
    let store = s.clone();
    let space = tokio::task::spawn_blocking(move || store.store.has_space())
        .await
        .unwrap_or(false);
    if !space {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", DISK_FULL_RETRY_SECS.to_string())],
            "disk full: the write-ahead log cannot be written; pushes are refused until space is freed\n",
        )
            .into_response();
    }
    (StatusCode::OK, "ready\n").into_response()
}

/// `GET /` of a server built without the `ui` feature: a plain-text note (404) naming the
/// feature and the API that still answers.
#[cfg(not(feature = "ui"))]
async fn no_ui() -> Response {
    (
        StatusCode::NOT_FOUND,
        [("content-type", "text/plain; charset=utf-8")],
        "This Ember server was built without its web UI (cargo feature `ui` of the `ember` \
         crate).\nThe HTTP API answers as usual: /api/v1/query, /api/v1/diff, \
         /api/v1/profile_types, /pyroscope/render, ...\nRebuild with the default features \
         (or `--features ui`) for the UI.\n",
    )
        .into_response()
}

async fn healthz() -> &'static str {
    "ok\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_keep_thirty_days_and_flush_every_five_minutes() {
        let from_empty: Limits = serde_json::from_str("{}").expect("empty config parses");
        assert_eq!(from_empty.retention_days, 30.0);
        assert_eq!(from_empty.flush_interval_seconds, 300);
        assert_eq!(Limits::default().retention_days, 30.0);
        // Setting one key keeps the others at their defaults.
        let one: Limits =
            serde_json::from_str(r#"{"max_body_bytes": 10}"#).expect("one key parses");
        assert_eq!(one.max_body_bytes, 10);
        assert_eq!(one.retention_days, 30.0);
        // Unknown keys are refused rather than silently ignored.
        assert!(serde_json::from_str::<Limits>(r#"{"retention": 7}"#).is_err());
    }
}
