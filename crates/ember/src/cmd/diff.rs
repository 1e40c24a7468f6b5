//! `ember diff`: two profiles (folded stacks or pprof, detected by content) → diff-folded lines
//! (`stack before after`) or a differential flame graph.

use anyhow::{Context, bail};
use ember_formats::diff_folded::{DiffOptions, diff_folded, write_diff};
use ember_formats::{Input, select_sample_index};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Compare two profiles: diff-folded text or a differential flame graph.
#[derive(clap::Args)]
#[command(
    long_about = "Compare two profiles. Each input may be folded stacks or a pprof profile \
                  (gzip'd or raw), detected by content. The output is one `stack before after` \
                  line per stack seen in either input (the format of difffolded.pl / \
                  inferno-diff-folded), sorted by stack; with --svg, or an output file ending in \
                  .svg, a differential flame graph instead: widths are the `after` profile, red \
                  frames grew and blue frames shrank."
)]
pub struct Args {
    /// The baseline profile.
    before: PathBuf,
    /// The profile to compare with the baseline.
    after: PathBuf,
    /// Scale the before counts so both profiles have the same total.
    #[arg(short, long)]
    normalize: bool,
    /// Replace hexadecimal addresses (`0x1f3a`) in frame names by `0x...`.
    #[arg(short = 's', long)]
    strip_hex: bool,
    /// pprof inputs: the sample type to compare, by index or name (`cpu`, `alloc_space`).
    /// Default: the profile's default sample type, else its last.
    #[arg(long, value_name = "NAME|N")]
    sample_index: Option<String>,
    /// Write a differential flame graph SVG instead of diff-folded text.
    #[arg(long)]
    svg: bool,
    /// Flame graph: colour by the before profile's perspective (widths from `before`, red =
    /// shrank) like flamegraph.pl --negate.
    #[arg(long)]
    negate: bool,
    /// Flame graph title. Default: "Differential Flame Graph".
    #[arg(long)]
    title: Option<String>,
    /// Write here instead of stdout (an `.svg` name implies --svg).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `ember diff`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (before, before_name) = as_folded_text(&args.before, args.sample_index.as_deref())?;
    let (after, after_name) = as_folded_text(&args.after, args.sample_index.as_deref())?;
    // The tooltips name the values as every Ember flame graph does: a pprof side's unit.
    let count_name = after_name.or(before_name);
    let options = DiffOptions {
        normalize: args.normalize,
        strip_hex: args.strip_hex,
    };
    let diff = diff_folded(&before[..], &after[..], &options)?;
    for warning in &diff.warnings {
        eprintln!("ember: warning: {warning}");
    }
    // An empty side makes a diff of every stack appearing (or vanishing): say so rather than
    // print a plausible-looking result.
    for (side, path, empty) in [
        (
            "baseline",
            &args.before,
            diff.lines.iter().all(|l| l.before == 0),
        ),
        (
            "comparison",
            &args.after,
            diff.lines.iter().all(|l| l.after == 0),
        ),
    ] {
        if empty && !diff.lines.is_empty() {
            eprintln!(
                "ember: warning: the {side} {} has no samples: every stack shows as {}",
                path.display(),
                if side == "baseline" { "new" } else { "gone" }
            );
        }
    }
    let svg = args.svg
        || args
            .output
            .as_deref()
            .and_then(Path::extension)
            .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    if svg {
        if diff.lines.is_empty() {
            bail!("no stacks in either input");
        }
        let mut flame = ember_flamegraph::Options {
            title: args
                .title
                .unwrap_or_else(|| "Differential Flame Graph".to_owned()),
            negate_differentials: args.negate,
            ..Default::default()
        };
        if let Some(name) = count_name {
            flame.count_name = name;
        }
        if flame.title.is_empty() {
            flame.title = "Differential Flame Graph".to_owned();
        }
        let report = ember_flamegraph::render(&diff.to_folded(), &flame, &mut out)?;
        for warning in report.warnings {
            eprintln!("ember: warning: {warning}");
        }
    } else {
        write_diff(&diff.lines, &mut out)?;
    }
    out.flush()?;
    Ok(())
}

/// Reads one input as folded-stack text: folded files as they are (so malformed lines are
/// reported by the diff), pprof profiles folded by sample type, with the name of their values
/// ([`ember_formats::units::value_name`]).
fn as_folded_text(
    path: &Path,
    sample_index: Option<&str>,
) -> anyhow::Result<(Vec<u8>, Option<String>)> {
    let bytes = ember_formats::input::read_bytes(path)?;
    if bytes.trim_ascii().is_empty() {
        return Ok((bytes.to_vec(), None));
    }
    match ember_formats::detect::decode(&bytes) {
        Ok(Input::Folded(_)) => Ok((bytes.to_vec(), None)),
        Ok(Input::Pprof(profile)) => {
            let index = select_sample_index(&profile, sample_index)
                .with_context(|| path.display().to_string())?;
            let name = profile.sample_type.get(index).map(|t| {
                ember_formats::units::value_name(
                    ember_pprof::string(&profile, t.r#type),
                    ember_pprof::string(&profile, t.unit),
                )
            });
            let (stacks, negative) = ember_formats::pprof_stacks(&profile, index);
            if negative > 0 {
                eprintln!(
                    "ember: warning: {}: skipped {negative} stacks with negative values",
                    path.display()
                );
            }
            let mut text = Vec::new();
            ember_formats::write(
                stacks
                    .iter()
                    .map(|(stack, value)| (stack, i64::try_from(*value).unwrap_or(i64::MAX))),
                &mut text,
            )?;
            Ok((text, name))
        }
        Err(err) => Err(err).with_context(|| {
            format!(
                "{}: neither a pprof profile nor folded stacks",
                path.display()
            )
        }),
    }
}
