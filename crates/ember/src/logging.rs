//! The binary's logging set-up: one `tracing` subscriber writing to stderr, so that log lines
//! never mix into the data a command writes on stdout (folded stacks, SVG, pprof...).
//!
//! The library crates only emit `tracing` events; which of them are shown, and how, is decided
//! here once per run. The filter comes from, first to last: `--log-level`, the `EMBER_LOG`
//! environment variable, `RUST_LOG` (both full `EnvFilter` directives such as
//! `warn,ember_store=debug`), then the command's default: `info` for the long-running
//! `server`, `agent` and `up`, whose start-up and reload lines are what an operator looks for,
//! and `warn` for the short commands, whose output is the result itself.

use std::io::IsTerminal;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// How much to log (`--log-level`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogLevel {
    /// Failures only.
    Error,
    /// Failures and things that were skipped or degraded.
    Warn,
    /// Also start-up, reloads and periodic summaries.
    Info,
    /// Also per-request and per-step detail.
    Debug,
    /// Everything.
    Trace,
}

impl LogLevel {
    /// The level as an `EnvFilter` directive.
    fn directive(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warn => "warn",
            Self::Info => "info",
            Self::Debug => "debug",
            Self::Trace => "trace",
        }
    }
}

/// How log lines are written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event (coloured when stderr is a terminal).
    #[default]
    Text,
    /// One JSON object per line, for log collectors (meant for `server`, `agent` and `up`).
    Json,
}

/// The logging options every subcommand accepts.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Log level [default: info for server, agent and up, warn otherwise; EMBER_LOG or
    /// RUST_LOG, as a tracing filter directive, apply when this is not given].
    #[arg(long, global = true, value_enum, value_name = "LEVEL")]
    log_level: Option<LogLevel>,
    /// Log line format (logs always go to stderr).
    #[arg(
        long,
        global = true,
        value_enum,
        value_name = "FORMAT",
        default_value = "text"
    )]
    log_format: LogFormat,
}

/// Installs the process-wide subscriber; `default` is the command's level when neither the
/// flag nor the environment says otherwise.
pub fn init(args: &LogArgs, default: LogLevel) -> anyhow::Result<()> {
    let filter = match args.log_level {
        Some(level) => EnvFilter::new(level.directive()),
        None => match env_directive() {
            Some((name, directive)) => EnvFilter::try_new(&directive)
                .with_context(|| format!("invalid {name} filter {directive:?}"))?,
            None => EnvFilter::new(default.directive()),
        },
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match args.log_format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("installing the log subscriber: {e}"))
}

/// The first non-empty of `EMBER_LOG` and `RUST_LOG`, with its name.
fn env_directive() -> Option<(&'static str, String)> {
    ["EMBER_LOG", "RUST_LOG"].into_iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (name, v))
    })
}
