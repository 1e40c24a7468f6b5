//! `ember up`: the one-command experience, an embedded server with local storage plus an agent
//! profiling this host and pushing to it, until Ctrl-C/SIGTERM. Before the agent starts, the
//! kernel is asked whether this user may sample the whole host (`host`); while it runs,
//! `status` says what arrived and how to query it.

mod host;
mod status;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use ember_agent::{Agent, config};

/// Whether `ember up` profiles this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HostProfiling {
    /// Profile it when this user may; otherwise say so once and serve without it.
    Auto,
    /// Profile it, or exit with an error when this user may not.
    On,
    /// Do not profile it (the server, and the configuration's scrape jobs, only).
    Off,
}

/// Server plus an agent profiling this host, in one command.
#[derive(clap::Args)]
#[command(
    long_about = "Start an Ember server (data in --data-dir) and an agent that profiles every \
                  process on this host at 19 Hz and pushes a profile per process every 15 s to \
                  that server. Prints the server's API/UI address and the agent's admin address; \
                  once profiles arrive, the services seen (each process's service_name: its \
                  systemd unit, container or executable name, e.g. python3.11) and an `ember \
                  query` command that runs as printed; on a terminal, a status line (services, \
                  profiles stored, last ingest) kept up to date. Ctrl-C or SIGTERM stop both \
                  cleanly within 5 s: the agent cuts and sends a last profile, then the server \
                  flushes its log; `ember server --data-dir DIR` serves the data again.\n\n\
                  Whole-host sampling needs root, CAP_PERFMON, or kernel.perf_event_paranoid <= 0. \
                  Without it, `ember up` says so and keeps serving (so \
                  profiles can still be pushed), unless host profiling was asked for: \
                  --host-profiling on, --sample-rate, --upload-interval, or a --config with \
                  profiling settings (profiling.enabled among them) or a bucket exporter; then \
                  it exits with an error."
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
    /// Agent configuration file; its exporters.server.url and admin.listen are set by `ember
    /// up` (the embedded server, --agent-listen).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Host profiling: `auto` profiles the host when this user may and otherwise serves
    /// without it; `on` exits with an error when it may not; `off` never profiles it.
    #[arg(long, value_enum, default_value_t = HostProfiling::Auto)]
    host_profiling: HostProfiling,
    /// CPU samples per second per CPU (overrides the configuration; asks for host profiling)
    /// [default: 19].
    #[arg(long, value_name = "HZ")]
    sample_rate: Option<u64>,
    /// Upload interval in seconds (overrides the configuration; asks for host profiling)
    /// [default: 15].
    #[arg(long, value_name = "SECONDS")]
    upload_interval: Option<u64>,
    /// The agent's admin token file, as `ember agent --admin-token-file` (without it the
    /// agent's configuration cannot be changed over HTTP).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
}

/// The agent's configuration: the file's (not yet validated), and whether it asks for host
/// profiling itself.
fn read_config(path: Option<&std::path::Path>) -> anyhow::Result<(config::Config, bool)> {
    let Some(p) = path else {
        return Ok((config::Config::default(), false));
    };
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let parsed = config::parse_unchecked(&text)
        .map_err(|e| anyhow::anyhow!("invalid configuration {}:\n{e}", p.display()))?;
    let asks = config::sets(&text, &["profiling", "enabled"])
        || parsed.profiling != config::ProfilingConfig::default()
        || parsed.exporters.perf_collector.is_some()
        || parsed.exporters.perfetto_daemon.is_some();
    Ok((parsed, asks))
}

/// Decides host profiling before anything starts: `Ok(false)` turns it off (said once),
/// an error stops `ember up`.
fn host_profiling_allowed(
    args: &Args,
    agent_config: &config::Config,
    file_asks: bool,
) -> anyhow::Result<bool> {
    if args.host_profiling == HostProfiling::Off || !agent_config.profiling.enabled {
        return Ok(false);
    }
    let Err(refused) = host::check(agent_config.profiling.off_cpu.enabled) else {
        return Ok(true);
    };
    let asked = if args.host_profiling == HostProfiling::On {
        Some("--host-profiling on".to_string())
    } else if args.sample_rate.is_some() {
        Some("--sample-rate".to_string())
    } else if args.upload_interval.is_some() {
        Some("--upload-interval".to_string())
    } else if file_asks {
        args.config
            .as_ref()
            .map(|p| format!("the configuration {}", p.display()))
    } else {
        None
    };
    let advice = if refused.permission {
        format!("; {}", host::advice())
    } else {
        String::new()
    };
    if let Some(who) = asked {
        bail!(
            "host profiling was asked for ({who}) but is not possible: {}{advice}",
            refused.reason
        );
    }
    eprintln!(
        "\n*** ember up: HOST PROFILING IS OFF ***\n  {}\n  {}\n  The server still runs: \
         push profiles to it with `ember push FILE --at now`, or scrape them with a \
         --config.\n",
        refused.reason,
        if refused.permission {
            host::advice()
        } else {
            "(not a permission problem: see the reason above)".to_string()
        }
    );
    Ok(false)
}

/// Runs server and agent until a signal.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (mut agent_config, file_asks) = read_config(args.config.as_deref())?;
    let sample_rate = args.sample_rate;
    let upload_interval = args.upload_interval;
    let host_on = host_profiling_allowed(&args, &agent_config, file_asks)?;
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
        let listener = tokio::net::TcpListener::bind(args.agent_listen)
            .await
            .with_context(|| format!("agent admin address {}", args.agent_listen))?;
        let admin = listener.local_addr()?;
        // What `ember up` sets over the file, at start and again at every SIGHUP.
        let url = format!("http://{addr}");
        let exporter_url = url.clone();
        let adjust = move |c: &mut config::Config| {
            let mut exporter = c.exporters.server.clone().unwrap_or_default();
            exporter.url = exporter_url.clone();
            c.exporters.server = Some(exporter);
            c.admin.listen = admin.to_string();
            if let Some(hz) = sample_rate {
                c.profiling.cpu.sample_rate_hz = hz;
            }
            if let Some(s) = upload_interval {
                c.profiling.upload_interval = config::Dur::secs(s);
            }
            if !host_on {
                c.profiling.enabled = false;
            }
        };
        adjust(&mut agent_config);
        if let Err(e) = agent_config.validate() {
            bail!(
                "invalid configuration{}:\n{e}",
                args.config
                    .as_ref()
                    .map(|p| format!(" {}", p.display()))
                    .unwrap_or_default()
            );
        }
        let agent = Agent::start(agent_config).map_err(|e| anyhow::anyhow!("{e}"))?;
        eprintln!(
            "ember up: server (UI/API) on {url}, data in {}; agent admin on http://{admin}; {}; \
             Ctrl-C stops",
            args.data_dir.display(),
            if host_on {
                "profiling this host (the first profiles arrive within the upload interval)"
            } else {
                "host profiling off"
            }
        );
        println!("UI/API: {url}");
        let (stop_status, status_stop) = tokio::sync::oneshot::channel::<()>();
        let status_task = tokio::spawn(status::watch(
            url.clone(),
            std::io::stderr().is_terminal(),
            status_stop,
        ));
        let reload = super::agent::Reload {
            path: args.config.clone(),
            adjust: Box::new(adjust),
        };
        let ran = super::agent::run_until_signal(
            agent,
            listener,
            admin_options,
            reload,
            Duration::from_millis(3000),
        )
        .await;
        let _ = stop_status.send(());
        let _ = status_task.await;
        ran?;
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
