//! `ember convert`.

/// Options of `ember convert`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `ember convert`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("ember convert is not implemented yet")
}
