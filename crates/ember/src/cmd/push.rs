//! `ember push`: send pprof files to an Ember (or any Pyroscope-compatible) server with the
//! `push.v1.PusherService/Push` call, after checking every file locally.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use ember_push::{Client, PushConfig, PushProfile};

use super::progress::{Progress, Unit};

/// Push pprof files to an Ember or Pyroscope-compatible server (push.v1).
#[derive(clap::Args)]
#[command(
    long_about = "Push pprof profiles (gzip'd or raw) to an Ember or Pyroscope-compatible server \
                  with the push.v1 Push call over the Connect protocol (the call Grafana Alloy's \
                  pyroscope.write makes).\n\n\
                  Every file is decoded and validated locally first; if any is not a valid pprof \
                  profile nothing is sent and the error names the file. Each file is then sent \
                  as one profile of its own series, labelled service_name=SERVICE plus the \
                  --label pairs. The server splits it into one series per sample type. Busy \
                  answers (429, 503, other 5xx) and connection errors are retried --retries times \
                  with exponential backoff, honouring Retry-After; 4xx answers are final.\n\n\
                  Each profile is stored at its own time (pprof time_nanos) unless --at says \
                  otherwise: a file taken long ago lands where `ember query --from now-1h` does \
                  not look (a warning says so); --at now stores it as of now.\n\n\
                  Example: ember push cpu.pb.gz --service api --label region=eu-west \
                  --at now --server http://127.0.0.1:4040"
)]
pub struct Args {
    /// pprof files to push (gzip'd or raw protobuf).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Service the profiles belong to (the `service_name` label).
    #[arg(long, value_name = "S")]
    service: String,
    /// Extra series label `name=value`; repeat for more.
    #[arg(long = "label", value_name = "K=V", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Server base URL, http:// or https:// (HTTPS_PROXY, HTTP_PROXY and NO_PROXY apply, as
    /// with curl).
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:4040")]
    server: String,
    /// For https:// servers: PEM file of extra certificates to trust (a private CA or the
    /// server's self-signed certificate), besides the system roots. Default: none.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// Profile name (the `__name__` label): process_cpu, memory, block, mutex, goroutine, ...
    /// Default: chosen by the server from the first sample type (cpu -> process_cpu,
    /// alloc_*/inuse_* -> memory, contentions/delay -> mutex, goroutine -> goroutine).
    #[arg(long = "type", value_name = "NAME")]
    profile_type: Option<String>,
    /// Tenant, sent as the X-Scope-OrgID header. Default: none (the server's `anonymous`).
    #[arg(long, value_name = "ID")]
    tenant: Option<String>,
    /// Bearer token for servers with auth enabled. Default: the EMBER_TOKEN environment
    /// variable, else none.
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
    /// Read the bearer token from this file (first line) instead.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// Time limit of each request, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    timeout: f64,
    /// Retries of a busy answer or connection error per file.
    #[arg(long, value_name = "N", default_value_t = 3)]
    retries: u32,
    /// Store the profiles as taken at this time: `now`, or unix seconds. Default: each
    /// profile's own time (its `time_nanos`). A file recorded long ago (a test corpus, an
    /// old capture) lands at that old time, where `ember query --from now-1h` does not look
    /// and which a server refuses once it is past its retention (30 days by default); `--at
    /// now` stores it as of now.
    #[arg(long, value_name = "TIME", value_parser = parse_at)]
    at: Option<i64>,
}

/// `--at`: `now` or unix seconds, as unix nanoseconds.
fn parse_at(text: &str) -> Result<i64, String> {
    let secs = match text.trim() {
        "now" => return Ok(now_nanos()),
        t => t.parse::<i64>().map_err(|_| {
            format!("--at {text:?}: expected `now` or unix seconds (e.g. 1767225600)")
        })?,
    };
    secs.checked_mul(1_000_000_000)
        .ok_or_else(|| format!("--at {text:?}: out of range"))
}

/// Now as unix nanoseconds.
fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// How old a profile may be before `ember push` warns that it lands outside the default
/// time range of queries and may be past the server's retention.
const OLD_PROFILE_NANOS: i64 = 30 * 86_400 * 1_000_000_000;

fn parse_label(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("label {text:?} is not name=value"))?;
    let name = name.trim();
    let valid = name
        .chars()
        .enumerate()
        .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
    if name.is_empty() || !valid {
        return Err(format!(
            "label name {name:?} must match [a-zA-Z_][a-zA-Z0-9_]*"
        ));
    }
    if name == "service_name" || name == "__name__" {
        return Err(format!(
            "use --service / --type instead of --label {name}=..."
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Validates every file, then pushes them one request each and reports what was accepted.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.service.trim().is_empty() {
        bail!("--service must not be empty");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading token file {}", path.display()))?
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
        ),
        None => args
            .token
            .clone()
            .or_else(|| std::env::var("EMBER_TOKEN").ok()),
    };
    let mut labels = vec![("service_name".to_string(), args.service.clone())];
    if let Some(t) = &args.profile_type {
        labels.push(("__name__".to_string(), t.clone()));
    }
    labels.extend(args.labels.iter().cloned());

    // Check everything before sending anything: a batch is pushed whole or not at all.
    let mut checked = Vec::new();
    let files = args.files.len() as u64;
    let mut progress = Progress::new("reading", Unit::Files, Some(files));
    for path in &args.files {
        progress.add(1, &path.display());
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let mut profile = ember_pprof::decode(&bytes)
            .with_context(|| format!("{}: not a valid pprof profile", path.display()))?;
        if profile.sample.is_empty() {
            progress.clear();
            eprintln!("ember push: warning: {} has no samples", path.display());
        }
        let bytes = match args.at {
            Some(at) => {
                profile.time_nanos = at;
                ember_pprof::encode_gzip(&profile)
            }
            None => {
                let age = now_nanos().saturating_sub(profile.time_nanos);
                if profile.time_nanos != 0 && age > OLD_PROFILE_NANOS {
                    progress.clear();
                    eprintln!(
                        "ember push: warning: {} was taken {} days ago; it is stored at that time \
                         (past a server's default 30-day retention it is refused). \
                         `--at now` stores it as of now",
                        path.display(),
                        age / 86_400_000_000_000
                    );
                }
                bytes
            }
        };
        let types: Vec<String> = profile
            .sample_type
            .iter()
            .map(|t| ember_pprof::type_name(&profile, t))
            .collect();
        checked.push((path, bytes, profile.sample.len(), types));
    }

    let config = PushConfig {
        url: args.server.clone(),
        tenant_id: args.tenant.clone(),
        bearer_token: token,
        timeout: Duration::from_secs_f64(args.timeout),
        tls_ca_file: args.ca_file.clone(),
        ..PushConfig::default()
    };
    let client = Client::new(&config).context("--server / --ca-file")?;
    let runtime = super::runtime(super::Threads::Caller)?;
    let total = checked.len();
    let mut accepted = 0usize;
    let mut bytes_sent = 0usize;
    let mut first_error = None;
    drop(progress);
    let mut progress = Progress::new("pushing", Unit::Files, Some(files));
    for (path, bytes, samples, types) in checked {
        progress.add(1, &path.display());
        let size = bytes.len();
        let profile = PushProfile {
            labels: labels.clone(),
            raw_profile: bytes,
        };
        let pushed = client.push_with_retries(
            std::slice::from_ref(&profile),
            args.retries,
            |e, delay, attempt| {
                // Over the progress line, if one is drawn (it is redrawn at the next file).
                if std::io::stderr().is_terminal() {
                    eprint!("\r\x1b[2K");
                }
                eprintln!(
                    "ember push: {e}; retrying in {delay:?} ({attempt}/{})",
                    args.retries
                );
            },
        );
        let result = runtime.block_on(pushed);
        progress.clear();
        match result {
            Ok(()) => {
                accepted += 1;
                bytes_sent += size;
                println!(
                    "accepted {}: {samples} samples, {size} bytes, sample types {}",
                    path.display(),
                    types.join(", ")
                );
            }
            Err(e) => {
                eprintln!("ember push: {}: {e}", path.display());
                first_error.get_or_insert_with(|| format!("{}: {e}", path.display()));
            }
        }
    }
    let label_text: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    println!(
        "pushed {accepted} of {total} profiles ({bytes_sent} bytes) to {} as {{{}}}",
        client.url(),
        label_text.join(", ")
    );
    match first_error {
        Some(e) => bail!(
            "{} of {total} profiles not accepted; first: {e}",
            total - accepted
        ),
        None => Ok(()),
    }
}
