//! Differential folded stacks: two folded inputs → `stack before after` lines.
//!
//! This module owns the "diff-folded" step (what `difffolded.pl` and `inferno-diff-folded` do):
//! read a *before* and an *after* profile as folded stacks, optionally scrub hexadecimal addresses so
//! that the same code at different load addresses lines up, optionally scale the *before* counts so
//! both sides have the same total, and emit one three-column line per stack seen on either side.
//! Those lines are the input of a differential flame graph.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};

/// How to combine the two inputs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiffOptions {
    /// Scale the *before* counts by `total_after / total_before` (truncating), so that a
    /// profile that merely ran longer does not look like a regression everywhere.
    pub normalize: bool,
    /// Replace every `0x<hex digits>` in frame names by `0x...`, so that stacks differing only in
    /// addresses merge.
    pub strip_hex: bool,
}

/// One output line: a stack and its count on each side (0 when absent on that side).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// Frames root first, separated by `;`.
    pub stack: String,
    /// The count in the *before* profile (after normalisation, if requested).
    pub before: u64,
    /// The count in the *after* profile.
    pub after: u64,
}

/// The result of a diff: the lines, sorted by stack (byte order), and non-fatal warnings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    /// One line per distinct stack, sorted by byte order of the stack.
    pub lines: Vec<DiffLine>,
    /// Human-readable warnings about skipped or altered input (one per malformed line, at most
    /// one about fractional counts).
    pub warnings: Vec<String>,
}

/// Errors of the diff step: only reading can fail, malformed lines are warnings.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// Reading one of the inputs failed.
    #[error("reading the {side} folded stacks: {source}")]
    Io {
        /// `"before"` or `"after"`.
        side: &'static str,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}

/// Diffs two folded-stack inputs (`stack count` per line).
///
/// Blank lines are ignored. A line whose last whitespace-separated field is not a number is
/// skipped with an `Unable to parse line: ...` warning. Fractional counts are truncated towards
/// zero, with a single warning for the whole diff.
pub fn diff_folded(
    before: impl BufRead,
    after: impl BufRead,
    options: &DiffOptions,
) -> Result<Diff, DiffError> {
    let mut warnings = Vec::new();
    let mut fractional = false;
    let before = read_side(before, "before", &mut warnings, &mut fractional)?;
    let after = read_side(after, "after", &mut warnings, &mut fractional)?;
    if fractional {
        warnings.push(
            "fractional sample counts were truncated to integers; scale the input up first if the \
             precision matters"
                .to_owned(),
        );
    }
    let mut diff = diff_stacks(before, after, options);
    warnings.append(&mut diff.warnings);
    diff.warnings = warnings;
    Ok(diff)
}

/// Diffs two already-folded inputs given as `(stack, count)` pairs (for example pprof profiles
/// folded by `ember_pprof::folded_stacks`). Repeated stacks are summed.
pub fn diff_stacks(
    before: impl IntoIterator<Item = (String, u64)>,
    after: impl IntoIterator<Item = (String, u64)>,
    options: &DiffOptions,
) -> Diff {
    let mut table: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut totals = (0u64, 0u64);
    for (stack, count) in before {
        let key = scrub(stack, options.strip_hex);
        let slot = table.entry(key).or_default();
        slot.0 = slot.0.saturating_add(count);
        totals.0 = totals.0.saturating_add(count);
    }
    for (stack, count) in after {
        let key = scrub(stack, options.strip_hex);
        let slot = table.entry(key).or_default();
        slot.1 = slot.1.saturating_add(count);
        totals.1 = totals.1.saturating_add(count);
    }
    let lines = table
        .into_iter()
        .map(|(stack, (before, after))| {
            let before = if options.normalize && totals.0 > 0 {
                // Same rule as difffolded.pl: int(c1 * total2 / total1), in floating point.
                (before as f64 * totals.1 as f64 / totals.0 as f64) as u64
            } else {
                before
            };
            DiffLine {
                stack,
                before,
                after,
            }
        })
        .collect();
    Diff {
        lines,
        warnings: Vec::new(),
    }
}

/// Writes diff lines as `stack before after`, one per line.
pub fn write_diff<'a>(
    lines: impl IntoIterator<Item = &'a DiffLine>,
    out: impl Write,
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out);
    for line in lines {
        writeln!(out, "{} {} {}", line.stack, line.before, line.after)?;
    }
    out.flush()
}

impl Diff {
    /// The diff as three-column folded input borrowing its stacks, ready for a differential
    /// flame graph.
    pub fn to_folded(&self) -> crate::folded::FoldedRef<'_> {
        crate::folded::FoldedRef {
            lines: self
                .lines
                .iter()
                .map(|l| crate::folded::FoldedLineRef {
                    stack: l.stack.as_str().into(),
                    count: l.before as f64,
                    second_count: Some(l.after as f64),
                })
                .collect(),
            ignored_lines: 0,
            has_fractional: false,
        }
    }
}

/// Replaces each `0x` followed by at least one hex digit (and all hex digits after it) by `0x...`.
pub fn strip_hex(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    if !text.contains("0x") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'0'
            && bytes.get(i + 1) == Some(&b'x')
            && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        {
            let mut end = i + 2;
            while bytes.get(end).is_some_and(u8::is_ascii_hexdigit) {
                end += 1;
            }
            // Every index here sits on an ASCII byte, so slicing stays on char boundaries.
            out.push_str(&text[copied..i]);
            out.push_str("0x...");
            copied = end;
            i = end;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

fn scrub(stack: String, strip: bool) -> String {
    if !strip {
        return stack;
    }
    match strip_hex(&stack) {
        Cow::Borrowed(_) => stack,
        Cow::Owned(s) => s,
    }
}

/// Reads one side into `(stack, count)` pairs, collecting warnings.
fn read_side(
    mut reader: impl BufRead,
    side: &'static str,
    warnings: &mut Vec<String>,
    fractional: &mut bool,
) -> Result<Vec<(String, u64)>, DiffError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|source| DiffError::Io { side, source })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut pairs = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        match parse_line(line) {
            Some((stack, count, was_fractional)) => {
                *fractional |= was_fractional;
                pairs.push((stack.to_owned(), count));
            }
            None => warnings.push(format!("Unable to parse line: {line}")),
        }
    }
    Ok(pairs)
}

/// Splits `stack count` at the last run of whitespace; the count is `digits[.digits]`.
/// Returns (stack, truncated count, whether a non-zero fraction was dropped).
fn parse_line(line: &str) -> Option<(&str, u64, bool)> {
    let split = line.rfind([' ', '\t'])?;
    let stack = line[..split].trim_end();
    let token = &line[split + 1..];
    if stack.is_empty() {
        return None;
    }
    let (int_part, frac_part) = token.split_once('.').unwrap_or((token, ""));
    if int_part.is_empty()
        || !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let count = int_part.parse::<u64>().ok()?;
    Some((stack, count, frac_part.bytes().any(|b| b != b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::BufReader;
    use std::path::{Path, PathBuf};

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/corpora/inferno/tests/data/diff-folded")
            .join(name)
    }

    fn open(name: &str) -> BufReader<File> {
        let path = data(name);
        BufReader::new(File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    }

    /// The expected file as a sorted list of lines (upstream order is hash order).
    fn expected(name: &str) -> Vec<String> {
        let text = std::fs::read_to_string(data(&format!("results/{name}"))).unwrap();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.trim_end().to_owned())
            .collect();
        lines.sort();
        lines
    }

    fn run(before: &str, options: DiffOptions) -> (Vec<String>, Vec<String>) {
        let diff = diff_folded(open(before), open("after.txt"), &options).unwrap();
        let mut out = Vec::new();
        write_diff(&diff.lines, &mut out).unwrap();
        let mut lines: Vec<String> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        lines.sort();
        (lines, diff.warnings)
    }

    #[test]
    fn options_match_inferno() {
        let cases = [
            ("default.txt", DiffOptions::default()),
            (
                "normalize.txt",
                DiffOptions {
                    normalize: true,
                    ..Default::default()
                },
            ),
            (
                "strip_hex.txt",
                DiffOptions {
                    strip_hex: true,
                    ..Default::default()
                },
            ),
        ];
        for (want, options) in cases {
            let (got, warnings) = run("before.txt", options);
            assert_eq!(got, expected(want), "{want}");
            assert!(warnings.is_empty(), "{want}: {warnings:?}");
        }
    }

    #[test]
    fn fractionals_truncate_with_one_warning() {
        let (got, warnings) = run("before_fractionals.txt", DiffOptions::default());
        assert_eq!(got, expected("fractionals.txt"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("fractional"), "{warnings:?}");
    }

    #[test]
    fn bad_line_gives_one_warning_and_is_skipped() {
        let (got, warnings) = run("bad_before.txt", DiffOptions::default());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("Unable to parse line:"),
            "{warnings:?}"
        );
        // The malformed stack only survives from the after side.
        let (good, _) = run("before.txt", DiffOptions::default());
        assert_eq!(got.len(), good.len());
        assert!(got.contains(&"dd;[unknown];read;system_call_[k];__fdget_pos_[k] 0 15".to_owned()));
    }

    #[test]
    fn strip_hex_rewrites_only_hex_runs() {
        assert_eq!(
            strip_hex("a;0x1F;b0xzz;0x;c0xabcdefg"),
            "a;0x...;b0xzz;0x;c0x...g"
        );
        assert_eq!(strip_hex("no hex"), "no hex");
        assert_eq!(strip_hex("é0xAé"), "é0x...é");
    }

    #[test]
    fn garbage_never_panics() {
        let inputs: [&[u8]; 5] = [
            b"",
            b" 12",
            b"\xff\xfe 3",
            b"a 1.2.3",
            b"a 99999999999999999999999",
        ];
        for input in inputs {
            let diff = diff_folded(input, &b"x 1\n"[..], &DiffOptions::default()).unwrap();
            assert!(diff.lines.iter().any(|l| l.stack == "x"));
        }
    }

    #[test]
    fn to_folded_is_differential() {
        let diff = diff_folded(
            open("before.txt"),
            open("after.txt"),
            &DiffOptions::default(),
        )
        .unwrap();
        let folded = diff.to_folded();
        assert!(folded.is_differential());
        assert_eq!(folded.lines.len(), diff.lines.len());
    }
}
