//! `ember server`: runs the profile server (ingest, storage, queries) until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

/// Run the profile server: ingest (Pyroscope-compatible), storage and queries.
#[derive(clap::Args)]
#[command(
    long_about = "Run the profile server: ingest (Pyroscope-compatible), storage and queries, \
                  until SIGINT or SIGTERM (which flush the log into a block first).\n\n\
                  Ingest: POST /ingest (Pyroscope legacy: folded, lines or pprof), \
                  /push.v1.PusherService/Push (Grafana Alloy's pyroscope.write; Connect or gRPC). \
                  A push is answered 200 only once it is in the write-ahead log and fsync'd; \
                  while the disk is full pushes get 503 with Retry-After.\n\
                  Queries: the web UI at /, GET /api/v1/query (flame graph, top, pprof, folded, \
                  SVG, speedscope, call graph), /api/v1/diff, /api/v1/timeseries, /api/v1/labels, \
                  /api/v1/series, /api/v1/profiles, Pyroscope's /pyroscope/render, and \
                  querier.v1 (Grafana). Health: /ready, /healthz; Prometheus metrics: /metrics. \
                  The full route table is in the ember-server crate docs.\n\n\
                  Storage: everything lives in --data-dir (a write-ahead log and immutable \
                  blocks); restarting with the same --data-dir serves it all again, e.g. after \
                  `ember up` was stopped: `ember server --data-dir ./ember-data`. Profiles are \
                  kept retention_days (30) and profiles older than that are refused at ingest.\n\n\
                  Limits (body and decompressed sizes, samples, labels, series per tenant and in \
                  all, allowed tenants, rates, timeouts, connections, flush and cache sizes, \
                  retention) are keys of the --config JSON file, every one optional; see --config \
                  below for each key and its default.\n\n\
                  Security: without --auth-tokens every data route is open to whoever can reach \
                  --listen, so the default listens on loopback only; on another address without \
                  tokens the server logs a warning at start. --tls-cert/--tls-key serve HTTPS."
)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4040")]
    pub listen: SocketAddr,
    /// Directory for the write-ahead log and data (created if missing).
    #[arg(long, default_value = "./ember-data")]
    pub data_dir: PathBuf,
    /// JSON file of settings, every key optional (default): max_body_bytes (16 MiB),
    /// max_decompressed_bytes (64 MiB, one profile), max_request_decompressed_bytes (128 MiB,
    /// all profiles of a request), max_tenant_decompressed_bytes_in_flight (256 MiB) and
    /// max_decompressed_bytes_in_flight (512 MiB: decompressed profiles held by requests
    /// being stored, per tenant and in all), max_samples_per_profile (1000000),
    /// max_labels_per_series (30), max_label_name_length (1024), max_label_value_length
    /// (2048), max_series_per_tenant (100000), max_series_total (200000, all tenants; 0 =
    /// unlimited), allowed_tenants (a list; unset = any), max_push_requests_per_second (0 = unlimited),
    /// flush_interval_seconds (300), flush_wal_mib (128: flush early once the log holds this
    /// much), block_cache_mib (128: decoded blocks kept for queries), retention_days (30;
    /// older profiles are refused), max_future_skew_seconds (3600: profiles further ahead
    /// are refused; 0 = no limit), header_read_timeout_seconds (10: TLS handshake and request
    /// head), body_read_timeout_seconds (60: a request's whole body, 408 beyond),
    /// idle_timeout_seconds (60: a connection without requests), max_connections (4096:
    /// beyond, new connections wait); 0 disables each of the last four.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Enable bearer-token auth: file of `token tenant` lines; requests need `Authorization: Bearer <token>`.
    #[arg(long)]
    pub auth_tokens: Option<PathBuf>,
    /// `/metrics` needs a bearer token of --auth-tokens too (it is open by default, like
    /// /ready and /healthz, for scrapers without credentials).
    #[arg(long, requires = "auth_tokens")]
    pub metrics_auth: bool,
    /// Serve HTTPS (HTTP/1.1 and HTTP/2, chosen by ALPN) with this PEM certificate chain.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// Runs the server until a shutdown signal, then drains requests and flushes the log.
pub fn run(args: Args) -> anyhow::Result<()> {
    let limits = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading config {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("parsing config {}", path.display()))?
        }
        None => ember_server::Limits::default(),
    };
    let config = ember_server::Config {
        listen: args.listen,
        data_dir: args.data_dir,
        limits,
        tokens: match &args.auth_tokens {
            Some(path) => Some(ember_server::read_tokens(path)?),
            None => None,
        },
        tls: match (args.tls_cert, args.tls_key) {
            (Some(cert), Some(key)) => Some(ember_server::TlsFiles { cert, key }),
            _ => None,
        },
        metrics_auth: args.metrics_auth,
    };
    let runtime = super::runtime(super::Threads::PerCore)?;
    runtime.block_on(async move {
        let server = ember_server::Server::bind(config.clone())
            .await
            .context("starting ember server")?;
        let (segments, records, failed) = server.replayed();
        let addr = server.local_addr().unwrap_or(config.listen);
        eprintln!(
            "ember server: listening on {}://{addr}, data in {} (replayed {records} records from {segments} WAL segments{})",
            server.scheme(),
            config.data_dir.display(),
            if failed > 0 { format!(", {failed} unreadable") } else { String::new() }
        );
        server.run(shutdown_signal()).await?;
        eprintln!("ember server: stopped, log flushed");
        anyhow::Ok(())
    })
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let sigterm = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = sigterm => {}
    }
}
