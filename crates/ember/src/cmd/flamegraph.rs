//! `ember flamegraph`.

/// Options of `ember flamegraph`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `ember flamegraph`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("ember flamegraph is not implemented yet")
}
