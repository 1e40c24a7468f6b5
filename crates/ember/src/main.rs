//! `ember`: the command-line face of Ember, a continuous profiling platform.
//!
//! This binary is deliberately thin: each subcommand parses its options and
//! hands the work to the crate that owns it (see `ARCHITECTURE.md`).

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Ember: find where your programs burn CPU and memory, and what changed.
#[derive(Parser)]
#[command(name = "ember", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// Convert between pprof, folded stacks and speedscope JSON.
    Convert(cmd::convert::Args),
    /// Sample a command, processes or the whole host with perf_event and write a profile.
    Record(cmd::record::Args),
    /// Run the profile server: ingest (Pyroscope-compatible), storage and queries.
    Server(cmd::server::Args),
    /// Push pprof files to an Ember or Pyroscope-compatible server (push.v1).
    Push(cmd::push::Args),
    /// Query a running server: merged profile (or diff) of a selection as top, SVG, pprof or folded.
    Query(cmd::query::Args),
    /// The always-on agent: continuous profiling, scraping, exporters; describe/apply its config.
    #[command(long_about = cmd::agent::LONG_ABOUT)]
    Agent(cmd::agent::Args),
    /// Server plus an agent profiling this host, in one command.
    Up(cmd::up::Args),
    /// On-demand actions against a running agent (e.g. a Perfetto snapshot).
    Profiling(cmd::profiling::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Collapse(args) => cmd::collapse::run(args),
        Command::Flamegraph(args) => cmd::flamegraph::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Top(args) => cmd::top::run(args),
        Command::Convert(args) => cmd::convert::run(args),
        Command::Record(args) => cmd::record::run(args),
        Command::Server(args) => cmd::server::run(args),
        Command::Push(args) => cmd::push::run(args),
        Command::Query(args) => cmd::query::run(args),
        Command::Agent(args) => cmd::agent::run(args),
        Command::Up(args) => cmd::up::run(args),
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
