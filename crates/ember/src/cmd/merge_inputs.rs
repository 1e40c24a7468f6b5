//! Reading several profiles into one for `ember top` and `ember convert`: each input is read,
//! decoded, merged into an accumulating profile ([`ember_pprof::Merger`]) and dropped before the
//! next is read, so memory follows the merged result (distinct stacks and symbols), not the sum
//! of the inputs.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use ember_formats::{Input, folded_to_profile, read_input};
use ember_pprof::{Merger, PprofError, Profile};

/// The merge of several inputs.
pub struct Merged {
    /// The merged profile.
    pub profile: Profile,
    /// How many folded-stack counts had a fractional part (truncated to integers).
    pub fractional: usize,
}

/// Reads `paths` (pprof, gzip'd or raw, or folded stacks; detected by content, and mixed
/// freely) one at a time and merges them like `go tool pprof` merges several profiles:
/// identical mappings, functions and locations are shared, samples with the same stack and
/// labels are summed, and every input must have the first one's sample types. Folded stacks
/// become a profile of `folded_type` (counted as samples). Errors name the file involved.
pub fn read_merged(paths: &[PathBuf], folded_type: (&str, &str)) -> anyhow::Result<Merged> {
    let mut merger = Merger::new();
    let mut fractional = 0;
    let mut first: Option<&Path> = None;
    let mut progress = super::progress::Progress::new(
        "merging",
        super::progress::Unit::Files,
        Some(paths.len() as u64),
    );
    for path in paths {
        progress.add(1, &path.display());
        let profile = match read_input(path)? {
            Input::Pprof(p) => *p,
            Input::Folded(f) => {
                let (p, frac) = folded_to_profile(&f, folded_type);
                fractional += frac;
                p
            }
        };
        merger.add(&profile).map_err(|e| match (&e, first) {
            (
                PprofError::IncompatibleSampleTypes { .. }
                | PprofError::IncompatiblePeriodTypes { .. },
                Some(first),
            ) => anyhow!(
                "{}: cannot be merged with {} (and the inputs before it): {e}",
                path.display(),
                first.display()
            ),
            _ => anyhow::Error::new(e).context(format!("merging {}", path.display())),
        })?;
        first.get_or_insert(path);
        // `profile` is dropped here, before the next input is read.
    }
    let profile = merger.finish().context("no input profiles")?;
    Ok(Merged {
        profile,
        fractional,
    })
}

/// A short name for the inputs, for formats that record one (speedscope): the single file's
/// name, or the first one's followed by how many more there are.
pub fn inputs_name(paths: &[PathBuf]) -> String {
    let name = |p: &Path| {
        p.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    };
    match paths {
        [] => String::new(),
        [one] => name(one),
        [first, rest @ ..] => format!("{} and {} more", name(first), rest.len()),
    }
}
