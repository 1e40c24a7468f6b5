//! `ember server`: runs the profile server (ingest, storage, queries) until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

/// Options of `ember server`.
#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4040")]
    pub listen: SocketAddr,
    /// Directory for the write-ahead log and data (created if missing).
    #[arg(long, default_value = "./ember-data")]
    pub data_dir: PathBuf,
    /// JSON file with limits, e.g. {"max_body_bytes": 16777216, "max_series_per_tenant": 100000}.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Enable bearer-token auth: file of `token tenant` lines; requests need `Authorization: Bearer <token>`.
    #[arg(long)]
    pub auth_tokens: Option<PathBuf>,
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
    };
    let runtime = super::runtime(super::Threads::PerCore)?;
    runtime.block_on(async move {
        let server = ember_server::Server::bind(config.clone())
            .await
            .context("starting ember server")?;
        let (segments, records, failed) = server.replayed();
        let addr = server.local_addr().unwrap_or(config.listen);
        eprintln!(
            "ember server: listening on http://{addr}, data in {} (replayed {records} records from {segments} WAL segments{})",
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
