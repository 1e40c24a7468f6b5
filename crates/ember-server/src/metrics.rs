//! `GET /metrics`: the server's counters, the store's (log, disk, heads, block cache,
//! replay) and the rejected requests by reason, in the Prometheus text format.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::response::{IntoResponse, Response};

use crate::AppState;

pub(crate) async fn metrics(
    axum::extract::State(s): axum::extract::State<Arc<AppState>>,
    headers: axum::http::HeaderMap,
) -> Response {
    use ember_telemetry::{Exposition, MetricType};
    if s.metrics_auth
        && let Err(e) = crate::tenant(&s, &headers)
    {
        return e.into_response();
    }
    let m = &s.metrics;
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let seconds = |micros: u64| micros as f64 / 1e6;
    let mut e = Exposition::new();
    e.counter(
        "ember_ingested_profiles_total",
        "Profiles accepted and durably stored.",
        load(&m.ingested_profiles),
    )
    .counter(
        "ember_ingested_bytes_total",
        "Request body bytes of accepted profiles.",
        load(&m.ingested_bytes),
    );
    {
        let rejected = e.family(
            "ember_rejected_total",
            MetricType::Counter,
            "Rejected ingest requests by reason.",
        );
        for (reason, n) in m.rejected.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            rejected.sample(&[("reason", reason)], *n);
        }
    }
    let w = s.store.wal_stats();
    let (blocks, block_bytes, wal_bytes) = s.store.disk_usage();
    let (series, profiles, strings, nodes) = s.store.head_stats();
    e.counter(
        "ember_ingest_requests_total",
        "Accepted ingest requests.",
        load(&m.ingest_requests),
    )
    .counter(
        "ember_ingest_seconds_total",
        "Time spent in accepted ingest requests (including the WAL fsync).",
        seconds(load(&m.ingest_micros)),
    )
    .counter("ember_queries_total", "Queries answered.", load(&m.queries))
    .counter(
        "ember_query_seconds_total",
        "Time spent answering queries.",
        seconds(load(&m.query_micros)),
    )
    .counter(
        "ember_wal_records_total",
        "Records written to the write-ahead log.",
        w.records,
    )
    .counter(
        "ember_wal_bytes_total",
        "Bytes written to the write-ahead log.",
        w.bytes,
    )
    .counter(
        "ember_wal_fsyncs_total",
        "fsync calls of the write-ahead log (one per group commit).",
        w.fsyncs,
    )
    .counter(
        "ember_wal_sync_seconds_total",
        "Time spent writing and fsyncing the log.",
        seconds(w.sync_micros),
    )
    .counter(
        "ember_flushes_total",
        "Flushes of the log into blocks.",
        load(&m.flushes),
    )
    .counter(
        "ember_flush_seconds_total",
        "Time spent flushing.",
        seconds(load(&m.flush_micros)),
    );
    let (replay, replay_errors) = s.store.replay_stats();
    e.counter(
        "ember_wal_records_skipped_total",
        "Torn or corrupt write-ahead log records skipped by the replay at start (each logged with its segment and offset).",
        replay.skipped_records,
    )
    .counter(
        "ember_wal_bytes_skipped_total",
        "Bytes of torn or corrupt write-ahead log records skipped by the replay at start.",
        replay.skipped_bytes,
    )
    .counter(
        "ember_wal_records_unreadable_total",
        "Intact write-ahead log records whose profile could not be applied at start (their segment is kept as .corrupt).",
        replay_errors,
    );
    e.gauge(
        "ember_blocks_quarantined",
        "Blocks found corrupt at start and set aside as <name>.corrupt (their profiles are not served).",
        s.store.quarantined_blocks().len() as u64,
    );
    e.family("ember_disk_bytes", MetricType::Gauge, "Bytes on disk.")
        .sample(&[("kind", "blocks")], block_bytes)
        .sample(&[("kind", "wal")], wal_bytes);
    let (cached, cached_bytes, hits, misses) = s.store.cache_stats();
    e.gauge(
        "ember_block_cache_sections",
        "Decoded block sections cached.",
        cached,
    )
    .gauge(
        "ember_block_cache_bytes",
        "Estimated memory of the cached block sections.",
        cached_bytes,
    )
    .counter(
        "ember_block_cache_hits_total",
        "Block section reads from the cache.",
        hits,
    )
    .counter(
        "ember_block_cache_misses_total",
        "Block section reads that decoded the section.",
        misses,
    );
    s.connections.describe(&mut e);
    e.gauge("ember_blocks", "Block files on disk.", blocks)
        .gauge("ember_head_series", "Series in memory.", series)
        .gauge("ember_head_profiles", "Profiles in memory.", profiles);
    e.family(
        "ember_head_symbols",
        MetricType::Gauge,
        "De-duplicated frame names and call-tree nodes in memory.",
    )
    .sample(&[("kind", "strings")], strings)
    .sample(&[("kind", "stack_nodes")], nodes);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            ember_telemetry::CONTENT_TYPE,
        )],
        e.render(),
    )
        .into_response()
}
