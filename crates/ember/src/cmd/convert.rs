//! `ember convert`: pprof, folded stacks, speedscope JSON, `perf script` text or a Perfetto
//! trace in (one input detector), the same five out; several inputs are merged into one
//! profile first. The conversion table is `ember_formats::convert`'s; Perfetto's field mapping
//! is `ember_formats::perfetto`'s. (OTLP profiles do not exist in Ember yet.)

use anyhow::{Context, bail};
use ember_formats::{Format, Input, folded_to_profile, read_input, select_sample_index};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::merge_inputs::{inputs_name, read_merged};

/// Convert a profile between formats (pprof, folded stacks, speedscope JSON, perf script,
/// Perfetto trace).
#[derive(clap::Args)]
#[command(
    long_about = "Convert a profile between formats. The input (pprof, gzip'd or raw; folded \
                  stacks; speedscope JSON, sampled or evented, from any program; `perf script` \
                  text from Linux perf or Android simpleperf, folded like `ember collapse`; a \
                  Perfetto trace, native protobuf, whose perf samples (traced_perf, Chrome's \
                  sampler) become a samples/count profile, plus cpu/nanoseconds when its \
                  timebase says what a sample is, or else whose heapprofd dumps become an \
                  alloc/inuse heap profile; pid and tid become labels) is detected by content; \
                  the output format comes from --to or the \
                  output file's extension: .pb.gz/.pprof/.pb → pprof (gzip'd), \
                  .folded/.txt/.collapsed → folded stacks, .json → speedscope, \
                  .perf/.perf-script/.perf.txt → perf script (one block per sample: a count \
                  sample type as it is, a time through the profile's period; --sample-index \
                  picks the type, default the first count type), .perfetto-trace/.pftrace → \
                  Perfetto trace (a CPU profile as one PerfSample packet per counted sample, \
                  spread over the profile's time range, at most 1,000,000 of them: a larger \
                  profile is scaled down and a warning says by how much; a heap profile as one \
                  heapprofd dump; open it in ui.perfetto.dev or trace_processor).\n\n\
                  Several inputs (any mix of these; folded and perf script ones become \
                  profiles of --sample-type) are merged into one profile, like `go tool pprof \
                  -proto a.pb.gz b.pb.gz`: identical mappings, functions and locations are \
                  shared, values of identical stacks (and labels) are summed, and every input \
                  must have the same sample types. They are read and merged one at a time, so \
                  thousands of profiles take memory in proportion to the merged result, not to \
                  the inputs.\n\n\
                  The output is written to a temporary file beside it and renamed into place \
                  once complete: on any error the output is left untouched."
)]
pub struct Args {
    /// Input profiles; several are merged into one.
    #[arg(value_name = "INPUT", required = true)]
    inputs: Vec<PathBuf>,
    /// Output file.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Output format (`pprof`, `folded`, `speedscope`, `perf-script`, `perfetto`). Default:
    /// from the output's extension.
    #[arg(long, value_name = "FORMAT")]
    to: Option<String>,
    /// pprof input: the sample type to convert, by index or name. Default for folded output:
    /// the profile's default sample type, else its last; default for speedscope: all of them.
    #[arg(long, value_name = "NAME|N")]
    sample_index: Option<String>,
    /// Folded input → pprof (or merged with other inputs): the sample type as `type/unit`.
    #[arg(long, value_name = "TYPE/UNIT", default_value = "samples/count")]
    sample_type: String,
}

/// Runs `ember convert`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let format = match &args.to {
        Some(name) => Format::from_name(name).with_context(|| {
            format!("unknown format {name:?} (pprof, folded, speedscope, perf-script, perfetto)")
        })?,
        None => Format::from_path(&args.output).with_context(|| {
            format!(
                "cannot tell the output format from {}; pass --to",
                args.output.display()
            )
        })?,
    };
    let mut output = PendingOutput::create(&args.output)?;
    let input = match args.inputs.as_slice() {
        [one] => read_input(one)?,
        many => {
            let merged = read_merged(many, sample_type(&args.sample_type)?)?;
            warn_fractional(merged.fractional);
            Input::Pprof(Box::new(merged.profile))
        }
    };
    convert(&args, input, format, output.writer())
        .with_context(|| format!("writing {}", args.output.display()))?;
    output.commit()
}

/// `--sample-type` split into type and unit.
fn sample_type(arg: &str) -> anyhow::Result<(&str, &str)> {
    match arg.split_once('/') {
        Some(pair) => Ok(pair),
        None => bail!("--sample-type must be TYPE/UNIT, e.g. samples/count"),
    }
}

fn warn_fractional(fractional: usize) {
    if fractional > 0 {
        eprintln!("ember: warning: {fractional} fractional counts truncated to integers");
    }
}

/// Writes `input` in `format` to `out`. Inputs are consumed so that they can be dropped as
/// soon as what is written has been derived from them (a day of merged profiles is hundreds
/// of MB).
fn convert(args: &Args, input: Input, format: Format, out: &mut impl Write) -> anyhow::Result<()> {
    let name = inputs_name(&args.inputs);
    match (input, format) {
        (Input::Pprof(profile), Format::Pprof) => {
            out.write_all(&ember_pprof::encode_gzip(&profile))?
        }
        (Input::Pprof(profile), Format::Folded) => {
            let index = select_sample_index(&profile, args.sample_index.as_deref())?;
            // A `-diff_base` profile is two profiles in one: written as the differential
            // `stack before after` lines `ember diff` writes, which read back as the same
            // difference (and draw as its differential flame graph).
            if let Some(diff) = ember_formats::convert::pprof_diff_folded_ref(&profile, index) {
                drop(profile);
                return write_differential(
                    diff.lines
                        .iter()
                        .map(|l| (l.stack.as_ref(), l.count, l.second_count.unwrap_or(0.0))),
                    out,
                );
            }
            let stacks = ember_pprof::folded_stacks(&profile, index);
            drop(profile);
            ember_formats::write(stacks, out)?;
        }
        (Input::Pprof(profile), Format::Speedscope) => {
            let file = ember_formats::profile_to_speedscope(
                &profile,
                args.sample_index.as_deref(),
                &name,
            )?;
            drop(profile);
            out.write_all(file.to_json().as_bytes())?;
        }
        (Input::Folded(folded), Format::Pprof) => {
            let (profile, fractional) = folded_to_profile(&folded, sample_type(&args.sample_type)?);
            warn_fractional(fractional);
            out.write_all(&ember_pprof::encode_gzip(&profile))?;
        }
        // Differential (three-column) input keeps both columns.
        (Input::Folded(folded), Format::Folded)
            if folded.lines.iter().any(|l| l.second_count.is_some()) =>
        {
            write_differential(
                folded
                    .lines
                    .iter()
                    .map(|l| (l.stack.as_ref(), l.count, l.second_count.unwrap_or(0.0))),
                out,
            )?
        }
        (Input::Folded(folded), Format::Folded) => ember_formats::write(
            folded
                .lines
                .iter()
                .map(|l| (l.stack.as_ref(), l.count as i64)),
            out,
        )?,
        (Input::Folded(folded), Format::Speedscope) => out.write_all(
            ember_formats::folded_to_speedscope(&folded, &name)
                .to_json()
                .as_bytes(),
        )?,
        (Input::Pprof(profile), Format::PerfScript) => {
            ember_formats::perf_script::profile_to_perf_script(
                &profile,
                args.sample_index.as_deref(),
                out,
            )?;
        }
        // Folded counts are samples: each line becomes that many blocks.
        (Input::Folded(folded), Format::PerfScript) => {
            let (profile, fractional) = folded_to_profile(&folded, ("samples", "count"));
            warn_fractional(fractional);
            ember_formats::perf_script::profile_to_perf_script(&profile, None, out)?;
        }
        (Input::Pprof(profile), Format::Perfetto) => write_trace(&profile, out)?,
        // Folded counts are samples: each line becomes that many perf samples.
        (Input::Folded(folded), Format::Perfetto) => {
            let (profile, fractional) = folded_to_profile(&folded, ("samples", "count"));
            warn_fractional(fractional);
            write_trace(&profile, out)?;
        }
    }
    Ok(())
}

/// Writes `profile` as a Perfetto trace, saying what the trace could not hold.
fn write_trace(profile: &ember_pprof::Profile, out: &mut impl Write) -> anyhow::Result<()> {
    let (bytes, summary) = ember_formats::perfetto::profile_to_trace(profile);
    if summary.negative > 0 {
        eprintln!(
            "ember: warning: {} samples with negative values left out (a trace cannot hold them)",
            summary.negative
        );
    }
    if let Some(factor) = summary.scaled {
        eprintln!(
            "ember: warning: more than {} samples: every stack's count scaled by {factor:.6} \
             (the timebase period by its inverse, so CPU time stays about the same)",
            ember_formats::perfetto::MAX_PERF_SAMPLES
        );
    }
    out.write_all(&bytes)?;
    Ok(())
}

/// Writes differential folded lines, `stack before after` (counts truncated to integers).
fn write_differential<'a>(
    lines: impl Iterator<Item = (&'a str, f64, f64)>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    for (stack, before, after) in lines {
        writeln!(out, "{stack} {} {}", before as i64, after as i64)?;
    }
    Ok(())
}

/// The output being written: a temporary file beside it, renamed into place by
/// [`PendingOutput::commit`] once complete and removed when dropped before that, so the output
/// is either left as it was or holds the complete result, never a partial one. Created before
/// the inputs are read, so that an unwritable output fails before thousands of inputs are.
struct PendingOutput {
    tmp: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
}

impl PendingOutput {
    fn create(path: &Path) -> anyhow::Result<Self> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let file_name = path
            .file_name()
            .with_context(|| format!("{} is not a file name", path.display()))?;
        let tmp = dir.join(format!(
            ".{}.ember-tmp-{}",
            file_name.to_string_lossy(),
            std::process::id()
        ));
        let file = std::fs::File::create(&tmp)
            .with_context(|| format!("creating {} (beside the output)", tmp.display()))?;
        Ok(PendingOutput {
            tmp,
            file: std::io::BufWriter::with_capacity(1 << 16, file),
            path: path.to_path_buf(),
        })
    }

    /// Where the output goes until [`PendingOutput::commit`].
    fn writer(&mut self) -> &mut std::io::BufWriter<std::fs::File> {
        &mut self.file
    }

    /// Flushes the output to disk and renames it into place.
    fn commit(mut self) -> anyhow::Result<()> {
        self.file
            .flush()
            .and_then(|()| self.file.get_ref().sync_all())
            .and_then(|()| std::fs::rename(&self.tmp, &self.path))
            .with_context(|| format!("writing {}", self.path.display()))?;
        // Renamed: nothing left to clean up.
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Drop for PendingOutput {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            // Best effort: the run failed and this is only its leftover.
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
