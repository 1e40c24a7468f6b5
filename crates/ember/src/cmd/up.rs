//! `ember up`: the one-command experience, an embedded server with local storage plus an agent
//! profiling this host and pushing to it, until Ctrl-C/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use ember_agent::{Agent, config};

/// Server plus an agent profiling this host, in one command.
#[derive(clap::Args)]
#[command(
    long_about = "Start an Ember server (data in --data-dir) and an agent that profiles every \
                  process on this host at 19 Hz and pushes a profile per process every 15 s to \
                  that server. Prints the server's API/UI address and the agent's admin address. \
                  Ctrl-C or SIGTERM stop both cleanly within 5 s: the agent cuts and sends a last \
                  profile, then the server flushes its log."
)]
pub struct Args {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1:4040")]
    listen: SocketAddr,
    /// Server data directory (created if missing).
    #[arg(long, default_value = "./ember-data")]
    data_dir: PathBuf,
    /// Agent admin address (/metrics, /api/v1/config).
    #[arg(long, default_value = "127.0.0.1:4041")]
    agent_listen: SocketAddr,
    /// Agent configuration file; its exporters.server.url is pointed at the embedded server.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// CPU samples per second per CPU (overrides the configuration).
    #[arg(long, value_name = "HZ")]
    sample_rate: Option<u64>,
    /// Upload interval in seconds (overrides the configuration).
    #[arg(long, value_name = "SECONDS")]
    upload_interval: Option<u64>,
    /// The agent's admin token file, as `ember agent --admin-token-file` (without it the
    /// agent's configuration cannot be changed over HTTP).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
}

/// Runs server and agent until a signal.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut agent_config = match &args.config {
        Some(p) => config::load(p)
            .map_err(|e| anyhow::anyhow!("invalid configuration {}:\n{e}", p.display()))?,
        None => config::Config::default(),
    };
    if let Some(hz) = args.sample_rate {
        agent_config.profiling.cpu.sample_rate_hz = hz;
    }
    if let Some(s) = args.upload_interval {
        agent_config.profiling.upload_interval = config::Dur::secs(s);
    }
    let server_config = ember_server::Config {
        listen: args.listen,
        data_dir: args.data_dir.clone(),
        limits: ember_server::Limits::default(),
        tokens: None,
        tls: None,
        metrics_auth: false,
    };
    let admin_options = super::agent::admin_options(args.admin_token_file.as_deref())?;
    let runtime = super::runtime(super::Threads::Workers(2))?;
    runtime.block_on(async move {
        let server = ember_server::Server::bind(server_config.clone())
            .await
            .context("starting the embedded server")?;
        let addr = server.local_addr().unwrap_or(args.listen);
        let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
        let server_task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        let mut exporter = agent_config.exporters.server.clone().unwrap_or_default();
        exporter.url = format!("http://{addr}");
        agent_config.exporters.server = Some(exporter);
        agent_config.admin.listen = args.agent_listen.to_string();
        let listener = tokio::net::TcpListener::bind(args.agent_listen)
            .await
            .with_context(|| format!("agent admin address {}", args.agent_listen))?;
        let admin = listener.local_addr()?;
        let agent = Agent::start(agent_config).map_err(|e| anyhow::anyhow!("{e}"))?;
        eprintln!(
            "ember up: server (UI/API) on http://{addr}, data in {}; agent admin on http://{admin}; Ctrl-C stops",
            args.data_dir.display()
        );
        println!("UI/API: http://{addr}");
        super::agent::run_until_signal(agent, listener, admin_options, args.config.clone(), Duration::from_millis(3000)).await?;
        let _ = stop_server.send(());
        match tokio::time::timeout(Duration::from_millis(1800), server_task).await {
            Ok(Ok(Ok(()))) => eprintln!(
                "ember up: server stopped, log flushed; the profiles stay in {dir}: \
                 `ember server --data-dir {dir}` serves them again",
                dir = args.data_dir.display()
            ),
            Ok(Ok(Err(e))) => eprintln!("ember up: server error: {e}"),
            _ => eprintln!("ember up: server did not stop in time"),
        }
        anyhow::Ok(())
    })
}
