//! `ember profiling`: on-demand actions against a running agent's exporters;
//! `perfetto-snapshot` calls the perfetto_daemon's HTTP trigger.

use anyhow::Context;
use std::time::Duration;

/// On-demand actions against a running agent (e.g. a Perfetto snapshot).
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Ask the agent's perfetto_daemon (trigger: PERFETTO_TRIGGER_HTTP) for a
    /// Perfetto trace snapshot of its ring buffer now; prints the snapshot
    /// report (file, bucket key, samples, sched switches) as JSON.
    PerfettoSnapshot(SnapshotArgs),
}

#[derive(clap::Args)]
struct SnapshotArgs {
    /// URL of the trigger endpoint (the agent's
    /// exporters.perfetto_daemon.http_listen plus /trigger).
    #[arg(long, default_value = ember_export::DEFAULT_TRIGGER_URL)]
    url: String,
    /// Seconds to wait for the snapshot to be written and uploaded.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    timeout: u64,
}

/// Runs `ember profiling`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.action {
        Action::PerfettoSnapshot(a) => {
            let body =
                ember_export::request_snapshot(&a.url, Duration::from_secs(a.timeout.max(1)))
                    .context("perfetto-snapshot")?;
            println!("{}", body.trim_end());
            Ok(())
        }
    }
}
