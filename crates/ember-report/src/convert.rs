//! Input detection and conversions between pprof profiles and folded stacks.
//!
//! Ember commands accept either format for any profile argument; [`read_input`] decides by
//! content (a valid profile.proto message, gzip'd or not, else folded text), never by file name.

use crate::ReportError;
use ember_folded::Folded;
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
}

impl Format {
    /// Guesses an output format from a file name: `.json` → speedscope, `.folded`/`.txt`/
    /// `.collapsed` → folded, `.pb`/`.pb.gz`/`.pprof`/`.prof` → pprof.
    pub fn from_path(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_str()?.to_ascii_lowercase();
        if name.ends_with(".json") {
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

    /// Parses a `--to` value (`pprof`, `folded`, `speedscope`).
    pub fn from_name(name: &str) -> Option<Format> {
        match name.to_ascii_lowercase().as_str() {
            "pprof" | "proto" | "pb" => Some(Format::Pprof),
            "folded" | "collapsed" => Some(Format::Folded),
            "speedscope" | "json" => Some(Format::Speedscope),
            _ => None,
        }
    }
}

/// A decoded input file.
#[derive(Debug, Clone)]
pub enum Input {
    /// A pprof profile.
    Pprof(Box<Profile>),
    /// Folded stacks.
    Folded(Folded),
}

/// Reads a file and decides its format by content.
pub fn read_input(path: &Path) -> Result<Input, ReportError> {
    let bytes = std::fs::read(path).map_err(|source| ReportError::Io {
        path: path.display().to_string(),
        source,
    })?;
    detect(&bytes).map_err(|pprof| ReportError::UnknownFormat {
        path: path.display().to_string(),
        pprof,
    })
}

/// Decides the format of in-memory bytes: a profile when they decode and validate as one,
/// otherwise folded stacks when at least one line parses.
pub fn detect(bytes: &[u8]) -> Result<Input, ember_pprof::PprofError> {
    match ember_pprof::decode(bytes) {
        Ok(profile) => Ok(Input::Pprof(Box::new(profile))),
        Err(err) => {
            // gzip'd input that failed is a broken profile, not text, and a recognised legacy
            // pprof format is not folded stacks. ("text" only means "not protobuf".)
            if bytes.starts_with(&[0x1f, 0x8b])
                || matches!(err, ember_pprof::PprofError::LegacyFormat { kind } if kind != "text")
            {
                return Err(err);
            }
            let folded = ember_folded::parse_bytes(bytes);
            // Binary data yields a few accidental matches among many rejected lines.
            if folded.lines.is_empty() || folded.ignored_lines > folded.lines.len() {
                Err(err)
            } else {
                Ok(Input::Folded(folded))
            }
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

/// Turns any input into a profile (folded input gets type `samples/count`).
pub fn into_profile(input: Input) -> Profile {
    match input {
        Input::Pprof(p) => *p,
        Input::Folded(f) => folded_to_profile(&f, ("samples", "count")).0,
    }
}
