//! `ember top`.

/// Options of `ember top`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `ember top`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("ember top is not implemented yet")
}
