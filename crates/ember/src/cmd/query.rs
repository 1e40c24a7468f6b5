//! `ember query`: asks a running `ember server` for the merged profile of a selection (or the
//! diff of two selections) and writes it as a top table, SVG flame graph, pprof or folded stacks.
//!
//! A thin client of the server's HTTP API (`/api/v1/query`, `/api/v1/diff`): the options map
//! one to one onto its parameters, the server's `ember-query` layer answers, and the request
//! goes through `ember-http`, the workspace's one HTTP client.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};

/// How long one query may take: merging a large selection (days of profiles) is slow, so
/// longer than the HTTP client's 30 s default.
const QUERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);
/// Largest answer read: an SVG or pprof of a large merged selection can be big.
const MAX_ANSWER_BYTES: u64 = 1 << 30;

/// Output formats of `ember query`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// pprof-style top table of the heaviest functions (text).
    Top,
    /// Interactive flame graph (differential with --baseline).
    Svg,
    /// gzip'd pprof protobuf (with --baseline: this selection minus the baseline).
    Pprof,
    /// Folded stacks `frame;frame;... value` (with --baseline: `stack baseline this`).
    Folded,
    /// Pyroscope flamebearer JSON.
    Flamebearer,
}

impl Format {
    fn as_str(self) -> &'static str {
        match self {
            Format::Top => "top",
            Format::Svg => "svg",
            Format::Pprof => "pprof",
            Format::Folded => "folded",
            Format::Flamebearer => "flamebearer",
        }
    }
}

/// Query a running server: merged profile (or diff) of a selection as top, SVG, pprof or folded.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ember query --list                      # the services and profile types of the last hour
  ember query --list --from now-7d        # ... of the last week
  ember query '{service_name=\"api\"}' --type cpu --from now-1h
  ember query 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\", region=~\"eu-.*\"}' --format svg -o api.svg
  ember query '{service_name=\"api\"}' --from now-1h --baseline-from now-2h --baseline-until now-1h --format svg -o diff.svg

Times are unix timestamps (seconds, milliseconds, microseconds or nanoseconds, told apart by
magnitude), `now`, or `now-<N><s|m|h|d|w>`. A service is named by its `service_name` label: for
`ember up` and `ember agent` the process's systemd unit, container or executable name (e.g.
python3.11, not python3); `--list` shows the real names.")]
pub struct Args {
    /// Label selector, e.g. '{service_name="api", region=~"eu-.*", pod!="x"}'. It may start
    /// with a profile type id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds{...}`) or a
    /// Pyroscope app name (`api.cpu{...}`). A matcher on a pprof sample label the series do
    /// not carry (`span_id`, `endpoint`, `thread_name`) selects the samples that have it.
    #[arg(default_value = "{}")]
    pub selector: String,
    /// Profile type: a full id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`) or a sample type
    /// (`cpu`, `alloc_space`, ...). Without it (and without one in the selector) every matching
    /// series is merged, whatever its type.
    #[arg(long = "type", short = 't', value_name = "TYPE")]
    pub profile_type: Option<String>,
    /// Start of the time range (inclusive).
    #[arg(long, default_value = "now-1h", value_name = "TIME")]
    pub from: String,
    /// End of the time range (inclusive).
    #[arg(long, default_value = "now", value_name = "TIME")]
    pub until: String,
    /// List what the server holds instead of querying: the services (`service_name` values,
    /// busiest first with their CPU seconds) and profile types of the selection in the time
    /// range, and a query that runs as printed.
    #[arg(long, conflicts_with_all = ["format", "output", "baseline", "baseline_from", "baseline_until", "profile_type"])]
    pub list: bool,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = Format::Top)]
    pub format: Format,
    /// Server base URL.
    #[arg(long, default_value = "http://127.0.0.1:4040", value_name = "URL")]
    pub server: String,
    /// Write the result to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Diff mode: compare the selection against this baseline selector (the baseline is the
    /// "before" side). Setting only --baseline-from/--baseline-until compares two time ranges
    /// of the same selector.
    #[arg(long, value_name = "SELECTOR")]
    pub baseline: Option<String>,
    /// Start of the baseline's time range [default: --from].
    #[arg(long, value_name = "TIME")]
    pub baseline_from: Option<String>,
    /// End of the baseline's time range [default: --until].
    #[arg(long, value_name = "TIME")]
    pub baseline_until: Option<String>,
    /// Tenant to query (sent as X-Scope-OrgID) [default: the server's `anonymous`].
    #[arg(long, value_name = "ID")]
    pub tenant: Option<String>,
    /// Bearer token, for a server started with --auth-tokens.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
    /// For https:// servers: PEM file of extra certificates to trust (a private CA or the
    /// server's self-signed certificate), besides the system roots. Default: none.
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

/// Runs the query and writes the answer.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.list {
        return list(&args);
    }
    let diff =
        args.baseline.is_some() || args.baseline_from.is_some() || args.baseline_until.is_some();
    // Each part of the selection: its parameter, or in a diff its `right*` one (the selector)
    // and its `left*` one (the baseline, which defaults to the selector's part).
    let parts = [
        ("Query", &args.selector, &args.baseline),
        ("From", &args.from, &args.baseline_from),
        ("Until", &args.until, &args.baseline_until),
    ];
    let mut params: Vec<(String, String)> = Vec::new();
    for (part, value, baseline) in parts {
        if diff {
            params.push((format!("right{part}"), value.clone()));
            let left = baseline.as_ref().unwrap_or(value);
            params.push((format!("left{part}"), left.clone()));
        } else {
            params.push((part.to_lowercase(), value.clone()));
        }
    }
    if let Some(t) = &args.profile_type {
        params.push(("type".to_string(), t.clone()));
    }
    params.push(("format".to_string(), args.format.as_str().to_string()));
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.extend_pairs(&params);
    let route = if diff {
        "/api/v1/diff"
    } else {
        "/api/v1/query"
    };
    let url = format!(
        "{}{route}?{}",
        args.server.trim_end_matches('/'),
        query.finish()
    );

    if args.format == Format::Pprof && args.output.is_none() && std::io::stdout().is_terminal() {
        bail!("pprof output is binary: pass --output FILE or redirect standard output");
    }
    let config = ember_http::ClientConfig {
        timeout: QUERY_TIMEOUT,
        max_body: MAX_ANSWER_BYTES,
        ca_file: args.ca_file.clone(),
        ..ember_http::ClientConfig::default()
    };
    let client = ember_http::BlockingClient::new(&config).context("setting up the HTTP client")?;
    let response = get_from_server(
        &client,
        url,
        args.token.as_deref(),
        args.tenant.as_deref(),
        ("querying", &args.server),
    )?;
    match &args.output {
        Some(path) => std::fs::write(path, &response.body)
            .with_context(|| format!("writing {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&response.body)
                .and_then(|()| out.flush())
                .context("writing to standard output")?;
        }
    }
    Ok(())
}

/// `--list`: the services and profile types of the selection, and a query to run.
fn list(args: &Args) -> anyhow::Result<()> {
    let config = ember_http::ClientConfig {
        timeout: QUERY_TIMEOUT,
        ca_file: args.ca_file.clone(),
        ..ember_http::ClientConfig::default()
    };
    let client = ember_http::BlockingClient::new(&config).context("setting up the HTTP client")?;
    let server = super::listing::Server {
        url: &args.server,
        tenant: args.tenant.as_deref(),
        token: args.token.as_deref(),
    };
    let holdings =
        super::listing::fetch(&client, &server, &args.selector, &args.from, &args.until)?;
    let mut out = std::io::stdout().lock();
    match super::listing::write(&mut out, &holdings, &args.server, &args.from, &args.until)
        .and_then(|()| out.flush())
    {
        // `ember query --list | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to standard output"),
    }
}

/// GETs `url` from an Ember server with the CLI's token and tenant. A failed connection
/// says what was being done (`doing`: the verb and the server's URL) and how stored profiles
/// are served again; an error answer becomes an error with the server's message.
pub(super) fn get_from_server(
    client: &ember_http::BlockingClient,
    url: String,
    token: Option<&str>,
    tenant: Option<&str>,
    doing: (&str, &str),
) -> anyhow::Result<ember_http::Response> {
    let mut request = ember_http::Request::get(url);
    if let Some(t) = token {
        request = request.bearer_token(t);
    }
    if let Some(t) = tenant {
        request = request.header("X-Scope-OrgID", t);
    }
    let response = client.send(request).with_context(|| {
        format!(
            "{} {} (is a server running there? stored profiles are served again by \
             `ember server --data-dir DIR`, e.g. ./ember-data after `ember up`)",
            doing.0, doing.1
        )
    })?;
    if !response.is_success() {
        let body = String::from_utf8_lossy(&response.body);
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| body.trim().to_string());
        bail!("server answered HTTP {}: {message}", response.status);
    }
    Ok(response)
}
