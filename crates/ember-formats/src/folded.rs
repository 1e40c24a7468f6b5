//! The folded-stacks format (`frame;frame;frame count`): parsing, writing and
//! the differential (`stack before after`) three-column variant.
//!
//! This module owns the line grammar shared by every Ember tool that reads or
//! writes folded stacks. Parsing is lenient the way the established tools are:
//! a line that does not end in a sample count is skipped and counted rather
//! than failing the whole input, lines starting with `# ` are comments, and bytes that are not UTF-8 are replaced
//! (lossy) instead of rejected, so arbitrary input can never make it panic.

use std::io::{BufRead, Write};

/// A parsed folded input that owns its stacks: a [`FoldedRef`] borrowing nothing. Both forms
/// are one type, so every consumer (flame graphs, conversions) takes either.
pub type Folded = FoldedRef<'static>;

/// One parsed folded line that owns its stack.
pub type FoldedLine = FoldedLineRef<'static>;

/// Errors of folded-stack parsing.
#[derive(Debug, thiserror::Error)]
pub enum FoldedError {
    /// Reading the input failed.
    #[error("reading folded stacks: {0}")]
    Io(#[from] std::io::Error),
}

/// Parses folded stacks ("a;b;c 12" or differential "a;b;c 12 15"); malformed lines are counted in
/// `ignored_lines`, not fatal. Only reading can fail.
pub fn parse(mut reader: impl BufRead) -> Result<Folded, FoldedError> {
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes)?;
    Ok(parse_bytes(&bytes))
}

/// Parses folded stacks from an in-memory buffer. Never fails and never panics: malformed lines are
/// counted in `ignored_lines`, and non-UTF-8 bytes are replaced by U+FFFD.
pub fn parse_bytes(bytes: &[u8]) -> Folded {
    parse_borrowed(bytes).into_owned()
}

/// One parsed folded line. Parsed with [`parse_borrowed`], its stack borrows from the input
/// buffer (owned only when the bytes were not UTF-8 and had to be repaired).
#[derive(Debug, Clone, PartialEq)]
pub struct FoldedLineRef<'a> {
    /// The stack, root first, frames separated by `;` (the text before the count columns).
    pub stack: std::borrow::Cow<'a, str>,
    /// The sample count (the only count column, or the first of two in differential input).
    pub count: f64,
    /// The second count column of three-column differential input (`stack before after`).
    pub second_count: Option<f64>,
}

/// A parsed folded input. From [`parse_borrowed`] it borrows from the buffer (one `Vec` for the
/// whole file, no per-line strings: the form for large inputs); [`Folded`] is the owned form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FoldedRef<'a> {
    /// The well-formed lines, in input order.
    pub lines: Vec<FoldedLineRef<'a>>,
    /// How many non-blank lines were skipped because they did not end in a valid count.
    pub ignored_lines: usize,
    /// True when at least one count has a non-zero fractional part (`1.5`; `2.0` and `2.` do not count).
    pub has_fractional: bool,
}

impl<'a> FoldedRef<'a> {
    /// True when any line carries a second (differential) count column.
    pub fn is_differential(&self) -> bool {
        self.lines.iter().any(|l| l.second_count.is_some())
    }

    /// Appends another parsed input (used to concatenate several files).
    pub fn extend(&mut self, other: FoldedRef<'a>) {
        self.lines.extend(other.lines);
        self.ignored_lines += other.ignored_lines;
        self.has_fractional |= other.has_fractional;
    }

    /// The same input owning its stacks.
    pub fn into_owned(self) -> Folded {
        FoldedRef {
            lines: (self.lines.into_iter())
                .map(|l| FoldedLineRef {
                    stack: l.stack.into_owned().into(),
                    ..l
                })
                .collect(),
            ignored_lines: self.ignored_lines,
            has_fractional: self.has_fractional,
        }
    }
}

/// Like [`parse_bytes`] but borrowing stacks from `bytes`. Never fails and never panics.
pub fn parse_borrowed(bytes: &[u8]) -> FoldedRef<'_> {
    let mut folded = FoldedRef::default();
    // One validation pass for the whole buffer is far cheaper than one per line.
    let text = std::str::from_utf8(bytes).ok();
    let mut rest = bytes;
    while !rest.is_empty() {
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        let line = line.trim_ascii();
        // `# ` starts a comment line (austin and pprof-derived files carry headers like this).
        if line.is_empty() || line.starts_with(b"# ") {
            continue;
        }
        match parse_line(line) {
            Some(parsed) => {
                folded.has_fractional |= parsed.fractional;
                // The stack starts after ASCII trimming and ends before an ASCII separator, so
                // in a valid buffer it lies on character boundaries; `get` checks that in O(1).
                let offset = parsed.stack.as_ptr() as usize - bytes.as_ptr() as usize;
                let stack = match text.and_then(|t| t.get(offset..offset + parsed.stack.len())) {
                    Some(s) => std::borrow::Cow::Borrowed(s),
                    None => String::from_utf8_lossy(parsed.stack),
                };
                folded.lines.push(FoldedLineRef {
                    stack,
                    count: parsed.count,
                    second_count: parsed.second_count,
                });
            }
            None => folded.ignored_lines += 1,
        }
    }
    folded
}

struct ParsedLine<'a> {
    stack: &'a [u8],
    count: f64,
    second_count: Option<f64>,
    fractional: bool,
}

/// Splits a trimmed, non-empty line into stack and one or two trailing counts.
fn parse_line(line: &[u8]) -> Option<ParsedLine<'_>> {
    let (rest, last) = split_count(line)?;
    let (stack, count, second_count, fractional) = match split_count(rest) {
        // Two trailing numbers: differential input, `stack before after`.
        Some((stack, first)) => (stack, first.0, Some(last.0), first.1 || last.1),
        None => (rest, last.0, None, last.1),
    };
    if stack.is_empty() {
        return None;
    }
    Some(ParsedLine {
        stack,
        count,
        second_count,
        fractional,
    })
}

/// Takes a count off the end of `line`: returns the trimmed text before it and (value, has non-zero fraction).
fn split_count(line: &[u8]) -> Option<(&[u8], (f64, bool))> {
    // Only digits and dots can form a count, so stop scanning at the first other byte instead
    // of searching the whole (long) stack for a separator.
    let token_start = line
        .iter()
        .rposition(|&b| !(b.is_ascii_digit() || b == b'.'))
        .map_or(0, |i| i + 1);
    let sep = token_start.checked_sub(1)?;
    if line[sep] != b' ' && line[sep] != b'\t' {
        return None;
    }
    let token = &line[sep + 1..];
    let value = parse_count(token)?;
    Some((line[..sep].trim_ascii_end(), value))
}

/// Parses `digits[.digits]` (either side may be empty, but not both).
fn parse_count(token: &[u8]) -> Option<(f64, bool)> {
    let (int_part, frac_part) = match token.iter().position(|&b| b == b'.') {
        Some(dot) => (&token[..dot], &token[dot + 1..]),
        None => (token, &token[token.len()..]),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.iter().chain(frac_part).all(u8::is_ascii_digit) {
        return None;
    }
    let fractional = frac_part.iter().any(|&b| b != b'0');
    let value = if !fractional && int_part.len() <= 18 {
        // Exact and cheap for the common integer case.
        int_part
            .iter()
            .fold(0u64, |acc, &b| acc * 10 + u64::from(b - b'0')) as f64
    } else {
        // Only ASCII digits and one dot are left, so this is valid UTF-8 and a valid float.
        std::str::from_utf8(token).ok().and_then(|s| {
            if int_part.is_empty() {
                format!("0{s}").parse().ok()
            } else {
                s.parse().ok()
            }
        })?
    };
    Some((value, fractional))
}

/// Writes `stack count` lines, one per item, in the given order.
pub fn write(
    lines: impl IntoIterator<Item = (impl AsRef<str>, i64)>,
    out: impl Write,
) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out);
    let mut buf = itoa::Buffer::new();
    for (stack, count) in lines {
        out.write_all(stack.as_ref().as_bytes())?;
        out.write_all(b" ")?;
        out.write_all(buf.format(count).as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_fractional_differential_and_bad_lines() {
        let input = b"a;b 3\n\n  a;c 1.5  \nbad line\nx 12V.43\na;d 2 5\nonly\n 7\nz 6.\n";
        let f = parse_bytes(input);
        assert_eq!(f.lines.len(), 4);
        assert_eq!(f.lines[0].stack, "a;b");
        assert_eq!(f.lines[0].count, 3.0);
        assert_eq!(f.lines[1].count, 1.5);
        assert_eq!(f.lines[2].second_count, Some(5.0));
        assert_eq!(f.lines[2].count, 2.0);
        assert_eq!(f.lines[3].count, 6.0);
        assert_eq!(f.ignored_lines, 4);
        assert!(f.has_fractional);
        assert!(f.is_differential());
    }

    #[test]
    fn borrowed_parse_agrees_with_owned() {
        let input = "a;é b 3\nbad\nx 1 2\n";
        let b = parse_borrowed(input.as_bytes());
        assert!(matches!(
            b.lines[0].stack,
            std::borrow::Cow::Borrowed("a;é b")
        ));
        assert_eq!(b.lines[1].second_count, Some(2.0));
        assert_eq!(b.ignored_lines, 1);
        let o = parse_bytes(input.as_bytes());
        assert_eq!(o.lines[0].stack, "a;é b");
        let tab = parse_bytes(b"a\t4\nb;c4\n");
        assert_eq!(tab.lines.len(), 1);
        assert_eq!(tab.ignored_lines, 1);
    }

    #[test]
    fn comment_lines_are_skipped() {
        let f = parse_bytes(b"# interval: 100\n#x 1\na 2\n");
        assert_eq!(f.lines.len(), 2);
        assert_eq!(f.lines[0].stack, "#x");
        assert_eq!(f.ignored_lines, 0);
    }

    #[test]
    fn zero_fraction_is_not_fractional() {
        let f = parse_bytes(b"a 2.0\nb 3.\nc .0\n");
        assert!(!f.has_fractional);
        assert_eq!(f.lines.len(), 3);
    }

    #[test]
    fn invalid_utf8_is_lossy_and_huge_counts_do_not_panic() {
        let f = parse_bytes(b"a\xff;b 1\nc 99999999999999999999999999999.9\n. \n.\n");
        assert_eq!(f.lines[0].stack, "a\u{fffd};b");
        assert!(f.lines[1].count > 1e28);
        assert_eq!(f.ignored_lines, 2);
    }

    #[test]
    fn write_round_trips() {
        let mut out = Vec::new();
        write([("a;b", 3i64), ("c", -1)], &mut out).unwrap();
        assert_eq!(out, b"a;b 3\nc -1\n");
        let f = parse(&out[..]).unwrap();
        assert_eq!(f.lines.len(), 1);
        assert_eq!(f.ignored_lines, 1);
    }
}
