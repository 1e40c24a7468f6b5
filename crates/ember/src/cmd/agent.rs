//! `ember agent`: the always-on daemon (continuous profiling, scraping, exporters), plus
//! `describe` and `apply` that talk to a running agent over its admin endpoint.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use ember_agent::{Agent, config};

/// The long help of `ember agent` (also used by the subcommand's entry in `ember --help`).
pub const LONG_ABOUT: &str = "Run the Ember agent: continuous CPU profiling of this host (perf_event, 19 Hz by \
    default; off-CPU time with profiling.off_cpu, episodes shorter than its min_duration \
    ignored), pull scraping of pprof endpoints, and exporters: push to an Ember or Pyroscope \
    server (http or https; exporters.server.tls.ca_file names the CA to trust, else the \
    system roots), exporters.perf_collector (gzip'd perf script dumps to a bucket) and \
    exporters.perfetto_daemon (Perfetto trace snapshots to a bucket; `ember profiling \
    perfetto-snapshot` calls its HTTP trigger). One sampler serves them all, at the highest \
    frequency any of them asks for; the bucket exporters see the whole host at their own \
    frequency. Without --config the documented defaults apply (print them with \
    --print-default-config). SIGHUP re-reads the file; an invalid file is rejected with the \
    field path and reason and the running configuration stays. SIGTERM/Ctrl-C cut a last \
    profile, flush the push queue, write the perf_collector's last dump and the \
    time-interval perfetto_daemon's last snapshot (at most 5 s in all). The admin endpoint \
    (admin.listen) shows the configuration with its secrets redacted, refuses requests from \
    a foreign web Origin, and accepts changes (`ember agent apply`) only with the token of \
    --admin-token-file.";

/// The always-on agent: continuous profiling, scraping, exporters; describe/apply its config.
#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    long_about = LONG_ABOUT
)]
pub struct Args {
    /// Configuration file (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print the documented default configuration and exit.
    #[arg(long)]
    print_default_config: bool,
    /// File whose first line is the admin token (keep it mode 600). With it, the admin
    /// endpoint's /api/v1 routes need `Authorization: Bearer <token>` and configuration
    /// changes over HTTP (`ember agent apply`) are allowed; without it they are refused.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Print the effective configuration of a running agent.
    Describe {
        /// Print JSON (default: YAML).
        #[arg(long)]
        json: bool,
        /// Admin URL of the running agent.
        #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:4041")]
        admin: String,
        /// The agent's admin token file (needed when the agent was started with one).
        #[arg(long, value_name = "FILE")]
        admin_token_file: Option<PathBuf>,
    },
    /// Validate a configuration, show the diff against a running agent, confirm, hot-reload.
    Apply {
        /// The new configuration file.
        #[arg(short = 'f', long = "file", value_name = "FILE")]
        file: PathBuf,
        /// Apply without asking.
        #[arg(long)]
        yes: bool,
        /// Admin URL of the running agent.
        #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:4041")]
        admin: String,
        /// The agent's admin token file (changes are refused without the token).
        #[arg(long, value_name = "FILE")]
        admin_token_file: Option<PathBuf>,
    },
}

/// The admin endpoint a client action talks to: its URL and, when given, its token.
struct AdminClient {
    url: String,
    token: Option<String>,
}

impl AdminClient {
    fn new(url: String, token_file: Option<PathBuf>) -> anyhow::Result<AdminClient> {
        let token = token_file
            .map(|f| ember_agent::admin::read_token_file(&f))
            .transpose()?;
        Ok(AdminClient { url, token })
    }
}

/// The admin options of the daemon (`ember agent`, `ember up`) from `--admin-token-file`.
pub fn admin_options(
    token_file: Option<&std::path::Path>,
) -> anyhow::Result<ember_agent::admin::AdminOptions> {
    Ok(ember_agent::admin::AdminOptions {
        token: token_file
            .map(ember_agent::admin::read_token_file)
            .transpose()?,
    })
}

/// Dispatches to the daemon or to a client action.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.print_default_config {
        print!("{}", config::DEFAULT_CONFIG_YAML);
        return Ok(());
    }
    match args.action {
        Some(Action::Describe {
            json,
            admin,
            admin_token_file,
        }) => describe(&AdminClient::new(admin, admin_token_file)?, json),
        Some(Action::Apply {
            file,
            yes,
            admin,
            admin_token_file,
        }) => apply(&AdminClient::new(admin, admin_token_file)?, &file, yes),
        None => daemon(args.config, args.admin_token_file),
    }
}

fn load(path: &Option<PathBuf>) -> anyhow::Result<config::Config> {
    match path {
        Some(p) => config::load(p)
            .map_err(|e| anyhow::anyhow!("invalid configuration {}:\n{e}", p.display())),
        None => Ok(config::Config::default()),
    }
}

fn daemon(path: Option<PathBuf>, admin_token_file: Option<PathBuf>) -> anyhow::Result<()> {
    let config = load(&path)?;
    let options = admin_options(admin_token_file.as_deref())?;
    let runtime = super::runtime(super::Threads::Workers(2))?;
    runtime.block_on(async move {
        let listen = config.admin.listen.clone();
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .with_context(|| format!("admin.listen {listen}"))?;
        let admin_addr = listener.local_addr()?;
        let agent = Agent::start(config).map_err(|e| anyhow::anyhow!("{e}"))?;
        tracing::info!(
            url = %format!("http://{admin_addr}"),
            paths = "/metrics,/api/v1/config",
            "admin listening"
        );
        let reload = Reload {
            path,
            adjust: Box::new(|_| {}),
        };
        run_until_signal(
            agent,
            listener,
            options,
            reload,
            Duration::from_millis(4500),
        )
        .await
    })
}

/// What SIGHUP reads again: the configuration file, and what the command sets over it (`ember
/// up` points the exporter at its own server), applied before the new file is validated.
pub struct Reload {
    /// The configuration file (`None`: SIGHUP is ignored with a warning).
    pub path: Option<PathBuf>,
    /// The command's own settings over the file's.
    pub adjust: Box<dyn Fn(&mut config::Config) + Send + Sync>,
}

impl Reload {
    /// The file read again, adjusted, not yet validated (the agent validates what it applies).
    fn read(&self, path: &std::path::Path) -> Result<config::Config, String> {
        let mut config = config::load_unchecked(path).map_err(|e| e.to_string())?;
        (self.adjust)(&mut config);
        Ok(config)
    }
}

/// Serves the admin endpoint, reloads on SIGHUP, and on SIGINT/SIGTERM shuts the agent down
/// within `budget` (stop producers, last cut, flush the push queue).
pub async fn run_until_signal(
    agent: Arc<Agent>,
    listener: tokio::net::TcpListener,
    options: ember_agent::admin::AdminOptions,
    reload: Reload,
    budget: Duration,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let admin = tokio::spawn(ember_agent::admin::serve(
        agent.clone(),
        listener,
        options,
        async {
            let _ = stop_rx.await;
        },
    ));
    let mut hup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    loop {
        tokio::select! {
            _ = hup.recv() => {
                let Some(p) = &reload.path else {
                    tracing::warn!("SIGHUP ignored: started without --config");
                    continue;
                };
                // `Agent::apply` counts the configurations it finds invalid; the rest (a file
                // that does not parse, a component that cannot start) is counted here, once.
                let result = match reload.read(p) {
                    Ok(c) => {
                        let a = agent.clone();
                        match tokio::task::block_in_place(|| a.apply(c)) {
                            Ok(()) => Ok(()),
                            Err(e @ ember_agent::AgentError::Config(_)) => Err(e.to_string()),
                            Err(e) => {
                                agent.metrics().reload_failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                Err(e.to_string())
                            }
                        }
                    }
                    Err(e) => {
                        agent.metrics().reload_failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        Err(e)
                    }
                };
                match result {
                    Ok(()) => tracing::info!(file = %p.display(), "configuration reloaded"),
                    Err(e) => {
                        // One logfmt line (log collectors split on lines): the problems, each
                        // naming its fields, joined by "; ".
                        let errors = e.replace(":\n", ": ");
                        let errors = errors.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
                        tracing::error!(
                            file = %p.display(),
                            errors,
                            "reload rejected, running configuration kept"
                        );
                    }
                }
            }
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    tracing::info!("shutting down");
    let drained = agent.shutdown(budget).await;
    let stats = agent.outbox().push_stats().unwrap_or_default();
    tracing::info!(
        flushed = drained,
        sent_profiles = stats.sent_profiles,
        dropped_profiles = stats.dropped_profiles,
        queue_profiles = stats.queue_profiles,
        "stopped"
    );
    let _ = stop_tx.send(());
    let _ = tokio::time::timeout(Duration::from_millis(300), admin).await;
    Ok(())
}

fn admin_request(
    admin: &AdminClient,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> anyhow::Result<ember_http::Response> {
    let url = ember_http::join_url(&ember_http::parse_url(&admin.url).context("--admin")?, path);
    let client = ember_http::BlockingClient::new(&ember_http::ClientConfig {
        timeout: Duration::from_secs(30),
        ..ember_http::ClientConfig::default()
    })?;
    let mut request = ember_http::Request::new(method, url.as_str())
        .content_type("application/yaml")
        .body(body);
    if let Some(token) = &admin.token {
        request = request.bearer_token(token);
    }
    client.send(request).with_context(|| {
        format!(
            "asking the agent at {} (is it running? see --admin)",
            admin.url
        )
    })
}

fn describe(admin: &AdminClient, json: bool) -> anyhow::Result<()> {
    let path = if json {
        "/api/v1/config"
    } else {
        "/api/v1/config?format=yaml"
    };
    let response = admin_request(admin, "GET", path, Vec::new())?;
    if response.status != 200 {
        bail!(
            "agent answered {}: {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        );
    }
    let mut out = std::io::stdout().lock();
    if json {
        let v: serde_json::Value = serde_json::from_slice(&response.body)?;
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        out.write_all(&response.body)?;
    }
    Ok(())
}

fn errors_text(body: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(v) => v["errors"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        format!(
                            "  {}: {}",
                            e["path"].as_str().unwrap_or(""),
                            e["reason"].as_str().unwrap_or("")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_else(|| v.to_string()),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    }
}

fn apply(admin: &AdminClient, file: &PathBuf, yes: bool) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    // Validate locally first: the same rules the agent applies.
    if let Err(e) = config::parse(&text) {
        bail!(
            "{} is invalid; the running configuration is unchanged:\n{e}",
            file.display()
        );
    }
    let response = admin_request(
        admin,
        "POST",
        "/api/v1/config?dry_run=true",
        text.clone().into_bytes(),
    )?;
    if response.status != 200 {
        bail!(
            "the agent rejected {}; the running configuration is unchanged:\n{}",
            file.display(),
            errors_text(&response.body)
        );
    }
    let v: serde_json::Value = serde_json::from_slice(&response.body)?;
    let diff = v["diff"].as_str().unwrap_or("");
    // Secrets are redacted on both sides of the diff, so a changed one is only named.
    let secrets: Vec<&str> = v["secrets_changed"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str()).collect())
        .unwrap_or_default();
    if diff.is_empty() && secrets.is_empty() {
        println!("no changes: the running agent already has this configuration");
        return Ok(());
    }
    println!(
        "changes to the running agent (- running, + {}):\n{diff}",
        file.display()
    );
    for path in &secrets {
        println!("~ {path}: secret changed (not shown)");
    }
    if !yes {
        let stdin = std::io::stdin();
        if !stdin.is_terminal() {
            bail!("not applied: confirm interactively or pass --yes");
        }
        print!("apply these changes? [y/N] ");
        std::io::stdout().flush()?;
        let mut answer = String::new();
        stdin.lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("not applied");
            return Ok(());
        }
    }
    let response = admin_request(admin, "POST", "/api/v1/config", text.into_bytes())?;
    if response.status != 200 {
        bail!(
            "the agent rejected {}; the running configuration is unchanged:\n{}",
            file.display(),
            errors_text(&response.body)
        );
    }
    println!("applied");
    Ok(())
}
