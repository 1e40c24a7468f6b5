//! `ember`: the command-line face of Ember, a continuous profiling platform.
//!
//! This binary is deliberately thin: each subcommand parses its options and
//! hands the work to the crate that owns it (see `ARCHITECTURE.md`).

#![forbid(unsafe_code)]
#![warn(missing_debug_implementations)]

mod cmd;
mod logging;

/// jemalloc as the process's allocator (feature `jemalloc`).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Ember: find where your programs burn CPU and memory, and what changed.
#[derive(Parser)]
#[command(name = "ember", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    log: logging::LogArgs,
}

// The enum is built once per run; boxing the larger option sets would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
// Each subcommand's options are declared only when that subcommand is the one being run: a
// single command then does not build (and fault in the code of) every other command's options.
#[command(defer = true)]
enum Command {
    /// Fold `perf script` output into folded stacks (like stackcollapse-perf.pl).
    Collapse(cmd::collapse::Args),
    /// Render folded stacks or a pprof profile as an interactive flame graph SVG.
    Flamegraph(cmd::flamegraph::Args),
    /// Compare two profiles: diff-folded text or a differential flame graph.
    Diff(cmd::diff::Args),
    /// Print the pprof "top" table: the heaviest functions by flat or cumulative value.
    Top(cmd::top::Args),
    /// Convert between pprof, folded stacks, speedscope JSON, perf script and Perfetto traces.
    Convert(cmd::convert::Args),
    #[cfg(feature = "record")]
    /// Sample a command, processes or the whole host with perf_event and write a profile.
    Record(cmd::record::Args),
    #[cfg(feature = "server")]
    /// Run the profile server: ingest (Pyroscope-compatible), storage and queries.
    Server(cmd::server::Args),
    #[cfg(feature = "client")]
    /// Push pprof files to an Ember or Pyroscope-compatible server (push.v1).
    Push(cmd::push::Args),
    #[cfg(feature = "client")]
    /// Query a running server: merged profile (or diff) of a selection as top, SVG, pprof or folded.
    Query(cmd::query::Args),
    #[cfg(feature = "agent")]
    /// The always-on agent: continuous profiling, scraping, exporters; describe/apply its config.
    #[command(long_about = cmd::agent::LONG_ABOUT)]
    Agent(cmd::agent::Args),
    #[cfg(all(feature = "agent", feature = "server"))]
    /// Server plus an agent profiling this host, in one command.
    Up(cmd::up::Args),
    #[cfg(feature = "agent")]
    /// On-demand actions against a running agent (e.g. a Perfetto snapshot).
    Profiling(cmd::profiling::Args),
}

impl Command {
    /// The log level when neither `--log-level` nor the environment sets one (see `logging`).
    fn default_log_level(&self) -> logging::LogLevel {
        match self {
            #[cfg(feature = "server")]
            Command::Server(_) => logging::LogLevel::Info,
            #[cfg(feature = "agent")]
            Command::Agent(_) => logging::LogLevel::Info,
            #[cfg(all(feature = "agent", feature = "server"))]
            Command::Up(_) => logging::LogLevel::Info,
            _ => logging::LogLevel::Warn,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(err) = logging::init(&cli.log, cli.command.default_log_level()) {
        eprintln!("ember: error: {}", error_chain(&err));
        return ExitCode::FAILURE;
    }
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    tracing::debug!(version = env!("CARGO_PKG_VERSION"), ?args, "starting");
    let result = match cli.command {
        Command::Collapse(args) => cmd::collapse::run(args),
        Command::Flamegraph(args) => cmd::flamegraph::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Top(args) => cmd::top::run(args),
        Command::Convert(args) => cmd::convert::run(args),
        #[cfg(feature = "record")]
        Command::Record(args) => cmd::record::run(args),
        #[cfg(feature = "server")]
        Command::Server(args) => cmd::server::run(args),
        #[cfg(feature = "client")]
        Command::Push(args) => cmd::push::run(args),
        #[cfg(feature = "client")]
        Command::Query(args) => cmd::query::run(args),
        #[cfg(feature = "agent")]
        Command::Agent(args) => cmd::agent::run(args),
        #[cfg(all(feature = "agent", feature = "server"))]
        Command::Up(args) => cmd::up::run(args),
        #[cfg(feature = "agent")]
        Command::Profiling(args) => cmd::profiling::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ember: error: {}", error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// Joins an error and its causes with `: `, skipping a cause whose text the message already
/// carries: many library errors print their source inline *and* expose it as `source()`.
fn error_chain(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}
