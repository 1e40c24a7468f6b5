//! `ember collapse`.

/// Options of `ember collapse`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `ember collapse`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("ember collapse is not implemented yet")
}
