//! The one input detector: what a buffer of (already gunzipped) bytes is, decided by content,
//! never by file name.
//!
//! [`classify`] is cheap (it looks at the start of the input only) and is what the flame
//! graph command uses before parsing in place; [`decode`] classifies and decodes into an
//! [`Input`]; [`read_input`] does the same for a path (see [`crate::input`]).

use std::fmt;
use std::path::Path;

use ember_pprof::{PprofError, Profile};

use crate::FormatError;
use crate::folded::Folded;
use crate::input::{is_gzip, read_bytes};

/// What an input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A profile.proto message (or one of pprof's legacy formats, which decoding rejects with
    /// a pointed message).
    Pprof,
    /// Folded stacks, `root;...;leaf count` (or the three-column differential variant).
    Folded,
    /// `perf script` output, to be folded by `ember collapse` first.
    PerfScript,
    /// Speedscope JSON.
    Speedscope,
    /// A Perfetto trace (native protobuf), read for its CPU or heap samples.
    Perfetto,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Pprof => "a pprof profile",
            Kind::Folded => "folded stacks",
            Kind::PerfScript => "perf script output",
            Kind::Speedscope => "speedscope JSON",
            Kind::Perfetto => "a Perfetto trace",
        })
    }
}

/// How much of the input [`classify`] looks at.
const HEAD: usize = 64 * 1024;

/// Classifies bytes (already gunzipped; gzip'd bytes count as pprof, the only binary format)
/// by looking at their start:
///
/// - binary content (control bytes other than tab and line breaks in the first 512 bytes, or
///   a first byte of `0x0a`, the tag that starts most profile.proto messages) is a Perfetto
///   trace when its first fields are trace packets ([`crate::perfetto::looks_like_trace`]),
///   else pprof;
/// - text whose first non-blank character is `{` is speedscope JSON;
/// - text with `hexaddress symbol (module)` frame lines among its first lines, and fewer
///   folded lines than not, is `perf script` output;
/// - any other text is folded stacks (legacy pprof text formats included: their lines do not
///   parse as folded, and [`decode`] reports them through the pprof decoder).
pub fn classify(bytes: &[u8]) -> Kind {
    if is_gzip(bytes) {
        return Kind::Pprof;
    }
    if looks_binary(bytes) {
        if crate::perfetto::looks_like_trace(bytes) {
            return Kind::Perfetto;
        }
        return Kind::Pprof;
    }
    let head = &bytes[..bytes.len().min(HEAD)];
    if head.trim_ascii_start().starts_with(b"{") {
        return Kind::Speedscope;
    }
    if looks_like_perf_script(head) {
        return Kind::PerfScript;
    }
    Kind::Folded
}

/// Protobuf tags and lengths put control bytes near the start, which text does not have.
fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    head.first() == Some(&0x0a)
        || head
            .iter()
            .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
}

/// `perf script` prints each sample as a header line followed by frame lines
/// (`\t    7f3a2b1c main+0x12 (/usr/bin/app)`); folded stacks are one line per stack ending
/// in a count. Looks at the first 200 non-blank lines.
fn looks_like_perf_script(head: &[u8]) -> bool {
    let mut frames = 0usize;
    let mut folded = 0usize;
    let mut others = 0usize;
    for line in head
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty() && !l.starts_with(b"#"))
        .take(200)
    {
        if is_perf_frame(line) {
            frames += 1;
        } else if crate::folded::parse_borrowed(line).lines.len() == 1 {
            folded += 1;
        } else {
            others += 1;
        }
    }
    frames > 0 && folded < frames + others
}

/// A frame line: a hexadecimal address, a space, and a symbol ending in the module in
/// parentheses (usually indented, though some perf versions print it flush left).
fn is_perf_frame(line: &[u8]) -> bool {
    let line = line.trim_ascii();
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    digits > 0 && line.get(digits).is_some_and(|&b| b == b' ' || b == b'\t') && line.ends_with(b")")
}

/// A decoded input.
#[derive(Debug, Clone)]
pub enum Input {
    /// A pprof profile.
    Pprof(Box<Profile>),
    /// Folded stacks.
    Folded(Folded),
}

/// Decodes in-memory bytes into a profile or folded stacks, deciding by content: a profile
/// when they decode and validate as one, otherwise folded stacks when at least one line
/// parses and most do. gzip'd input that does not decode is a broken profile (not text), and
/// a recognised legacy pprof format is reported as such.
pub fn decode(bytes: &[u8]) -> Result<Input, PprofError> {
    match ember_pprof::decode(bytes) {
        Ok(profile) => Ok(Input::Pprof(Box::new(profile))),
        Err(err) => {
            // ("text" only means "not protobuf", so such input may still be folded.)
            if is_gzip(bytes) || matches!(err, PprofError::LegacyFormat { kind } if kind != "text")
            {
                return Err(err);
            }
            let folded = crate::folded::parse_bytes(bytes);
            // Binary data yields a few accidental matches among many rejected lines.
            if folded.lines.is_empty() || folded.ignored_lines > folded.lines.len() {
                Err(err)
            } else {
                Ok(Input::Folded(folded))
            }
        }
    }
}

/// Reads `path` (`-`: stdin; gzip undone, see [`crate::input::read_bytes`]) and decodes it
/// by content: pprof and folded stacks with [`decode`], speedscope JSON into a profile
/// ([`crate::speedscope::speedscope_to_profile`]), a Perfetto trace into its CPU (else heap)
/// profile ([`crate::perfetto::trace_to_profile`]), `perf script` output into folded stacks
/// (folded by `ember-collapse` with `stackcollapse-perf.pl`'s defaults).
pub fn read_input(path: &Path) -> Result<Input, FormatError> {
    let bytes = read_bytes(path)?;
    decode_as(&bytes, classify(&bytes), path)
}

/// Decodes bytes already read from `path` (named in errors) and classified as `kind`, as
/// [`read_input`] does.
pub fn decode_as(bytes: &[u8], kind: Kind, path: &Path) -> Result<Input, FormatError> {
    let display = || path.display().to_string();
    let unknown = |pprof| FormatError::UnknownFormat {
        path: display(),
        pprof,
    };
    let profile = match kind {
        // Binary input is never folded text: report why it is not a valid profile.
        Kind::Pprof => ember_pprof::decode(bytes).map_err(unknown),
        Kind::Speedscope => crate::speedscope::speedscope_to_profile(bytes).map_err(|reason| {
            FormatError::BadSpeedscope {
                path: display(),
                reason,
            }
        }),
        Kind::Perfetto => {
            crate::perfetto::trace_to_profile(bytes).map_err(|source| FormatError::BadPerfetto {
                path: display(),
                source,
            })
        }
        Kind::PerfScript => {
            return fold_perf_script(bytes).map_err(|reason| FormatError::BadPerfScript {
                path: display(),
                reason,
            });
        }
        Kind::Folded => return decode(bytes).map_err(unknown),
    };
    profile.map(|p| Input::Pprof(Box::new(p)))
}

/// Folds `perf script` text as `ember collapse` does with default options.
fn fold_perf_script(bytes: &[u8]) -> Result<Input, String> {
    let collapsed =
        ember_collapse::collapse_bytes(bytes, &ember_collapse::CollapseOptions::default())
            .map_err(|e| e.to_string())?;
    if collapsed.stacks.is_empty() {
        let why = collapsed
            .warnings
            .first()
            .map_or_else(|| "no samples".to_owned(), |w| format!("no samples ({w})"));
        return Err(why);
    }
    let mut text = Vec::new();
    collapsed
        .write_folded(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(Input::Folded(crate::folded::parse_bytes(&text)))
}

/// For the kinds a command cannot take as they are, what to do instead: `None` for every
/// kind [`read_input`] reads (all of them); the flame graph command, which parses folded
/// text in place, still asks.
pub fn unsupported_hint(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Pprof | Kind::Folded => None,
        Kind::PerfScript => Some("fold it first with `ember collapse`"),
        Kind::Speedscope | Kind::Perfetto => {
            Some("convert it first with `ember convert --to pprof`")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_by_content() {
        assert_eq!(classify(b"a;b;c 12\na;b 3\n"), Kind::Folded);
        assert_eq!(classify(b"a;b 1 2\n"), Kind::Folded);
        assert_eq!(classify(b""), Kind::Folded);
        assert_eq!(classify(b"\x1f\x8b\x08\x00"), Kind::Pprof);
        assert_eq!(classify(b"\x0a\x04\x08\x01\x10\x02"), Kind::Pprof);
        assert_eq!(classify(b"  {\"$schema\": \"x\"}"), Kind::Speedscope);
        let perf = b"java 12345/12346 [001] 1234.5678: 10101010 cycles:\n\
                     \t    7f3a2b1c main+0x12 (/usr/bin/app)\n\
                     \tffffffff81001234 do_syscall_64+0x4 ([kernel.kallsyms])\n\n";
        assert_eq!(classify(perf), Kind::PerfScript);
        assert_eq!(classify(b"# comment\nmain;work 3\n"), Kind::Folded);
    }

    #[test]
    fn perf_script_is_folded_and_speedscope_read() {
        // Removed with its content when the guard drops, at the end of the test.
        let dir = tempfile::tempdir().expect("temp dir");
        let dir = dir.path();
        let path = dir.join("perf.txt");
        std::fs::write(
            &path,
            "app 1/1 [000] 1.0: 3 cycles:\n\t  400123 main (/bin/app)\n",
        )
        .expect("write");
        match read_input(&path).expect("perf script") {
            Input::Folded(f) => {
                assert_eq!(f.lines.len(), 1);
                assert_eq!(
                    (f.lines[0].stack.as_ref(), f.lines[0].count),
                    ("app;main", 3.0)
                );
            }
            other => panic!("{other:?}"),
        }
        // Frame lines without any sample header: perf script, but nothing to fold.
        std::fs::write(&path, "\t  400123 main (/bin/app)\n").expect("write");
        let err = read_input(&path).expect_err("nothing to fold");
        assert!(err.to_string().contains("no samples"), "{err}");
        std::fs::write(&path, "{\"shared\": {\"frames\": []}, \"profiles\": 3}").expect("write");
        let err = read_input(&path).expect_err("bad speedscope");
        assert!(err.to_string().contains("speedscope"), "{err}");
        std::fs::remove_dir_all(dir).ok();
    }
}
