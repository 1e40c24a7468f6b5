//! `ember query`: asks a running `ember server` for the merged profile of a selection (or the
//! diff of two selections) and writes it as a top table, SVG flame graph, pprof or folded stacks.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use ember_server::client::{HttpClient, url_encode};

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

/// Options of `ember query`.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  ember query '{service_name=\"api\"}' --type cpu --from now-1h
  ember query 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\", region=~\"eu-.*\"}' --format svg -o api.svg
  ember query '{service_name=\"api\"}' --from now-1h --baseline-from now-2h --baseline-until now-1h --format svg -o diff.svg

Times are unix timestamps (seconds, milliseconds, microseconds or nanoseconds, told apart by
magnitude), `now`, or `now-<N><s|m|h|d|w>`.")]
pub struct Args {
    /// Label selector, e.g. '{service_name="api", region=~"eu-.*", pod!="x"}'. It may start
    /// with a profile type id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds{...}`) or a
    /// Pyroscope app name (`api.cpu{...}`).
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
}

/// Runs the query and writes the answer.
pub fn run(args: Args) -> anyhow::Result<()> {
    let diff =
        args.baseline.is_some() || args.baseline_from.is_some() || args.baseline_until.is_some();
    let mut params: Vec<(&str, String)> = Vec::new();
    if diff {
        params.push(("rightQuery", args.selector.clone()));
        params.push((
            "leftQuery",
            args.baseline
                .clone()
                .unwrap_or_else(|| args.selector.clone()),
        ));
        params.push(("rightFrom", args.from.clone()));
        params.push(("rightUntil", args.until.clone()));
        params.push((
            "leftFrom",
            args.baseline_from
                .clone()
                .unwrap_or_else(|| args.from.clone()),
        ));
        params.push((
            "leftUntil",
            args.baseline_until
                .clone()
                .unwrap_or_else(|| args.until.clone()),
        ));
    } else {
        params.push(("query", args.selector.clone()));
        params.push(("from", args.from.clone()));
        params.push(("until", args.until.clone()));
    }
    if let Some(t) = &args.profile_type {
        params.push(("type", t.clone()));
    }
    params.push(("format", args.format.as_str().to_string()));
    let query: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", url_encode(v)))
        .collect();
    let route = if diff {
        "/api/v1/diff"
    } else {
        "/api/v1/query"
    };
    let path = format!("{route}?{}", query.join("&"));

    if args.format == Format::Pprof && args.output.is_none() && std::io::stdout().is_terminal() {
        bail!("pprof output is binary: pass --output FILE or redirect standard output");
    }
    let mut client = HttpClient::new(&args.server)?;
    let mut headers = Vec::new();
    let auth = args.token.as_ref().map(|t| format!("Bearer {t}"));
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    if let Some(t) = &args.tenant {
        headers.push(("X-Scope-OrgID", t.as_str()));
    }
    let response = client
        .request("GET", &path, &headers, b"")
        .with_context(|| format!("querying {}", args.server))?;
    if response.status != 200 {
        let body = String::from_utf8_lossy(&response.body);
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| body.trim().to_string());
        bail!("server answered HTTP {}: {message}", response.status);
    }
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
