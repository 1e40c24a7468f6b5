//! Conversions between pprof profiles, folded stacks, speedscope JSON, Perfetto traces and
//! perf script.
//!
//! Every Ember command that takes a profile accepts pprof (gzip'd or raw), folded stacks,
//! speedscope JSON, perf script text or a Perfetto trace, decided by content
//! ([`crate::detect`]). The conversions (rows: input, columns: output; perf script output is
//! [`crate::perf_script`]'s, Perfetto output [`crate::perfetto::profile_to_trace`], both from a
//! profile, folded input becoming one first):
//!
//! | from \\ to  | pprof | folded | speedscope |
//! |-------------|-------|--------|------------|
//! | pprof       | re-encoded, gzip'd | [`ember_pprof::folded_stacks`] (one sample type; [`pprof_stacks`] drops negative values; a `-diff_base` profile: [`pprof_diff_folded_ref`]) | [`crate::profile_to_speedscope`] (every sample type, or one) |
//! | folded      | [`folded_to_profile`] (one `type/unit`, counts truncated) | rewritten (counts truncated) | [`crate::folded_to_speedscope`] |
//! | perf script | folded by `ember-collapse` ([`crate::read_input`]), then folded → pprof | `ember-collapse` | folded, then folded → speedscope |
//! | speedscope  | [`crate::speedscope_to_profile`] | through pprof | through pprof |
//! | Perfetto trace | [`crate::perfetto::trace_to_profile`] (perf samples: `samples/count`, and `cpu/nanoseconds` with a known timebase; else heapprofd: `alloc_*`/`inuse_*`) | through pprof | through pprof |
//!
//! pprof or folded → Perfetto: a CPU-type profile becomes `PerfSample` packets (one per
//! counted sample, at most [`crate::perfetto::MAX_PERF_SAMPLES`]), a heap profile one
//! heapprofd dump; the field mapping and what is lost are in [`crate::perfetto`].
//!
//! pprof → folded exists once, as `ember_pprof::folded_stacks` (the pprof model's folded
//! view); everything here builds on it.

use crate::detect::Input;
use crate::folded::{Folded, FoldedLineRef, FoldedRef};
use ember_pprof::{Profile, ProfileBuilder};
use std::path::Path;

/// The file formats Ember converts between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// profile.proto, gzip'd on output.
    Pprof,
    /// Folded stacks (`a;b;c 12`).
    Folded,
    /// Speedscope JSON.
    Speedscope,
    /// `perf script` text (written from a profile: [`crate::perf_script`]).
    PerfScript,
    /// A Perfetto trace, native protobuf (written from a profile: [`crate::perfetto`]).
    Perfetto,
}

impl Format {
    /// Guesses an output format from a file name: `.json` → speedscope, `.perf`/
    /// `.perf-script`/`.perf.txt` → perf script, `.perfetto-trace`/`.pftrace`/`.perfetto` →
    /// Perfetto trace, `.folded`/`.txt`/`.collapsed` → folded, `.pb`/`.pb.gz`/`.pprof`/
    /// `.prof` → pprof.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if [".perfetto-trace", ".pftrace", ".perfetto"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            Some(Format::Perfetto)
        } else if [".perf", ".perf-script", ".perf.txt"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            Some(Format::PerfScript)
        } else if name.ends_with(".json") {
            Some(Format::Speedscope)
        } else if [".folded", ".txt", ".collapsed", ".stacks"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            Some(Format::Folded)
        } else if [".pb", ".pb.gz", ".pprof", ".prof", ".gz", ".proto"]
            .iter()
            .any(|e| name.ends_with(e))
        {
            Some(Format::Pprof)
        } else {
            None
        }
    }

    /// Parses a `--to` value (`pprof`, `folded`, `speedscope`, `perf-script`, `perfetto`).
    pub fn from_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "perfetto" | "perfetto-trace" | "pftrace" => Some(Format::Perfetto),
            "perf-script" | "perf" | "perfscript" => Some(Format::PerfScript),
            "pprof" | "proto" | "pb" => Some(Format::Pprof),
            "folded" | "collapsed" => Some(Format::Folded),
            "speedscope" | "json" => Some(Format::Speedscope),
            _ => None,
        }
    }
}

/// Builds a profile from folded stacks with one sample type `(type, unit)`. Fractional counts
/// are truncated; differential lines keep their first count. Returns the profile and how many
/// lines had a fractional part.
pub fn folded_to_profile(folded: &Folded, sample_type: (&str, &str)) -> (Profile, usize) {
    let mut builder = ProfileBuilder::new(&[sample_type]);
    let mut fractional = 0;
    let mut frames: Vec<&str> = Vec::new();
    for line in &folded.lines {
        if line.count.fract() != 0.0 {
            fractional += 1;
        }
        frames.clear();
        frames.extend(line.stack.split(';'));
        builder.add_folded_stack(&frames, &[line.count as i64]);
    }
    (builder.build(), fractional)
}

/// The stacks of sample type `index` of `profile` (via [`ember_pprof::folded_stacks`]) with
/// their values, leaving out the negative ones (which folded stacks cannot show), and how many
/// were left out.
pub fn pprof_stacks(profile: &Profile, index: usize) -> (Vec<(String, u64)>, usize) {
    let mut negative = 0;
    let stacks = ember_pprof::folded_stacks(profile, index)
        .into_iter()
        .filter_map(|(stack, value)| match u64::try_from(value) {
            Ok(value) => Some((stack, value)),
            Err(_) => {
                negative += 1;
                None
            }
        })
        .collect();
    (stacks, negative)
}

/// [`pprof_stacks`] as a [`FoldedRef`] (the form the flame graph renderer takes), and how
/// many negative stacks were left out.
pub fn pprof_folded_ref(profile: &Profile, index: usize) -> (FoldedRef<'static>, usize) {
    let (stacks, negative) = pprof_stacks(profile, index);
    let lines = stacks
        .into_iter()
        .map(|(stack, value)| FoldedLineRef {
            stack: stack.into(),
            count: value as f64,
            second_count: None,
        })
        .collect();
    let folded = FoldedRef {
        lines,
        ..FoldedRef::default()
    };
    (folded, negative)
}

/// The stacks of a `pprof -diff_base` profile (see [`ember_pprof::has_diff_base`]) as
/// differential folded lines, `stack before after`: `before` is the base's value (its samples
/// are stored negated, labelled `pprof::base=true`), `after` the other samples' — what
/// `ember diff` writes for two profiles, so a flame graph of it is the differential one.
/// `None` when the profile has no diff-base samples.
pub fn pprof_diff_folded_ref(profile: &Profile, index: usize) -> Option<FoldedRef<'static>> {
    if !ember_pprof::has_diff_base(profile) {
        return None;
    }
    let (base, rest): (Vec<_>, Vec<_>) = profile
        .sample
        .iter()
        .cloned()
        .partition(|s| ember_pprof::is_diff_base_sample(profile, s));
    let mut side = Profile {
        sample: base,
        ..profile.clone()
    };
    let mut sums: std::collections::BTreeMap<String, (i64, i64)> = Default::default();
    for (stack, value) in ember_pprof::folded_stacks(&side, index) {
        sums.entry(stack).or_default().0 = value.wrapping_neg();
    }
    side.sample = rest;
    for (stack, value) in ember_pprof::folded_stacks(&side, index) {
        sums.entry(stack).or_default().1 = value;
    }
    let lines = sums
        .into_iter()
        .map(|(stack, (before, after))| FoldedLineRef {
            stack: stack.into(),
            count: before as f64,
            second_count: Some(after as f64),
        })
        .collect();
    Some(FoldedRef {
        lines,
        ..FoldedRef::default()
    })
}

/// Turns any input into a profile (folded input gets type `samples/count`).
pub fn into_profile(input: Input) -> Profile {
    match input {
        Input::Pprof(p) => *p,
        Input::Folded(f) => folded_to_profile(&f, ("samples", "count")).0,
    }
}
