//! `ember convert`: pprof ↔ folded stacks, and either → speedscope JSON.

use anyhow::{Context, bail};
use ember_formats::{Format, Input, folded_to_profile, read_input, select_sample_index};
use std::io::Write;
use std::path::PathBuf;

/// Options of `ember convert`.
#[derive(clap::Args)]
#[command(
    long_about = "Convert a profile between formats. The input (pprof, gzip'd or raw, or folded \
                  stacks) is detected by content; the output format comes from --to or the \
                  output file's extension: .pb.gz/.pprof/.pb → pprof (gzip'd), \
                  .folded/.txt/.collapsed → folded stacks, .json → speedscope."
)]
pub struct Args {
    /// Input profile.
    input: PathBuf,
    /// Output file.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Output format (`pprof`, `folded`, `speedscope`). Default: from the output's extension.
    #[arg(long, value_name = "FORMAT")]
    to: Option<String>,
    /// pprof input: the sample type to convert, by index or name. Default for folded output:
    /// the profile's default sample type, else its last; default for speedscope: all of them.
    #[arg(long, value_name = "NAME|N")]
    sample_index: Option<String>,
    /// Folded input → pprof: the sample type as `type/unit`.
    #[arg(long, value_name = "TYPE/UNIT", default_value = "samples/count")]
    sample_type: String,
}

/// Runs `ember convert`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let format = match &args.to {
        Some(name) => Format::from_name(name)
            .with_context(|| format!("unknown format {name:?} (pprof, folded, speedscope)"))?,
        None => Format::from_path(&args.output).with_context(|| {
            format!(
                "cannot tell the output format from {}; pass --to",
                args.output.display()
            )
        })?,
    };
    let input = read_input(&args.input)?;
    let name = args
        .input
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let write = |bytes: &[u8]| -> anyhow::Result<()> {
        let mut file = std::fs::File::create(&args.output)
            .with_context(|| format!("creating {}", args.output.display()))?;
        file.write_all(bytes)?;
        Ok(())
    };
    match (input, format) {
        (Input::Pprof(profile), Format::Pprof) => ember_pprof::write_file(&profile, &args.output)?,
        (Input::Pprof(profile), Format::Folded) => {
            let index = select_sample_index(&profile, args.sample_index.as_deref())?;
            let stacks = ember_pprof::folded_stacks(&profile, index);
            let mut out = Vec::new();
            ember_formats::write(stacks, &mut out)?;
            write(&out)?;
        }
        (Input::Pprof(profile), Format::Speedscope) => {
            let file = ember_formats::profile_to_speedscope(
                &profile,
                args.sample_index.as_deref(),
                &name,
            )?;
            write(file.to_json().as_bytes())?;
        }
        (Input::Folded(folded), Format::Pprof) => {
            let Some((ty, unit)) = args.sample_type.split_once('/') else {
                bail!("--sample-type must be TYPE/UNIT, e.g. samples/count");
            };
            let (profile, fractional) = folded_to_profile(&folded, (ty, unit));
            if fractional > 0 {
                eprintln!("ember: warning: {fractional} fractional counts truncated to integers");
            }
            ember_pprof::write_file(&profile, &args.output)?;
        }
        (Input::Folded(folded), Format::Folded) => {
            let mut out = Vec::new();
            ember_formats::write(
                folded
                    .lines
                    .iter()
                    .map(|l| (l.stack.as_str(), l.count as i64)),
                &mut out,
            )?;
            write(&out)?;
        }
        (Input::Folded(folded), Format::Speedscope) => {
            write(
                ember_formats::folded_to_speedscope(&folded, &name)
                    .to_json()
                    .as_bytes(),
            )?;
        }
    }
    Ok(())
}
