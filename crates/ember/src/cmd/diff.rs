//! `ember diff`.

/// Options of `ember diff`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `ember diff`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("ember diff is not implemented yet")
}
