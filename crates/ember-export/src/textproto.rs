//! The subset of Perfetto's text-format `TraceConfig` that the
//! perfetto_daemon honours: `buffers { size_kb }`, the `linux.perf` data
//! source's sampling frequency, and `trigger_config { trigger_mode, triggers
//! { name stop_delay_ms } }`. Other fields are parsed (so valid Perfetto
//! configs are accepted) and ignored.

use thiserror::Error;

/// A config_text that is not valid text proto or lacks what the daemon needs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("config_text line {line}: {reason}")]
pub struct TextProtoError {
    /// 1-based line of the problem (0 when not tied to a line).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// One trigger of `trigger_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerSpec {
    /// Trigger name.
    pub name: String,
    /// Delay between the trigger and the end of the snapshot window.
    pub stop_delay_ms: u64,
}

/// What the daemon takes from config_text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfettoTraceConfig {
    /// Size of the first buffer in KiB.
    pub buffer_size_kb: u64,
    /// `linux.perf` sampling frequency in Hz, when given.
    pub sampling_frequency_hz: Option<u64>,
    /// `trigger_config.trigger_mode` (e.g. `STOP_TRACING`), when given.
    pub trigger_mode: Option<String>,
    /// `trigger_config.triggers`.
    pub triggers: Vec<TriggerSpec>,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Scalar(String, usize),
    Message(Vec<(String, Value)>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Colon,
    Open(char),
    Close(char),
    Sep,
}

fn err(line: usize, reason: impl Into<String>) -> TextProtoError {
    TextProtoError {
        line,
        reason: reason.into(),
    }
}

fn tokenize(text: &str) -> Result<Vec<(Tok, usize)>, TextProtoError> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            c if c.is_whitespace() => {}
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            ':' => out.push((Tok::Colon, line)),
            '{' | '<' => out.push((Tok::Open(c), line)),
            '}' | '>' => out.push((Tok::Close(c), line)),
            ';' | ',' => out.push((Tok::Sep, line)),
            '"' | '\'' => {
                let quote = c;
                let mut s = String::new();
                let start = line;
                loop {
                    match chars.next() {
                        None => return Err(err(start, "unterminated string")),
                        Some('\n') => return Err(err(start, "newline inside a string")),
                        Some('\\') => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(e @ ('\\' | '"' | '\'')) => s.push(e),
                            Some(other) => {
                                s.push('\\');
                                s.push(other);
                            }
                            None => return Err(err(start, "unterminated string")),
                        },
                        Some(c) if c == quote => break,
                        Some(c) => s.push(c),
                    }
                }
                out.push((Tok::Str(s), line));
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '+' || c == '.' => {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_ascii_alphanumeric() || n == '_' || n == '.' || n == '-' || n == '+' {
                        s.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push((Tok::Ident(s), line));
            }
            other => return Err(err(line, format!("unexpected character {other:?}"))),
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(0, |t| t.1)
    }

    fn fields(&mut self, close: Option<char>) -> Result<Vec<(String, Value)>, TextProtoError> {
        let mut fields = Vec::new();
        loop {
            let Some((tok, line)) = self.toks.get(self.pos).cloned() else {
                return match close {
                    None => Ok(fields),
                    Some(_) => Err(err(self.line(), "missing closing brace")),
                };
            };
            self.pos += 1;
            match tok {
                Tok::Sep => continue,
                Tok::Close(c) => {
                    let expected = match close {
                        Some('{') => '}',
                        Some(_) => '>',
                        None => return Err(err(line, format!("unexpected {c:?}"))),
                    };
                    if c != expected {
                        return Err(err(line, format!("expected {expected:?}, found {c:?}")));
                    }
                    return Ok(fields);
                }
                Tok::Ident(name) => {
                    let mut next = self.toks.get(self.pos).cloned();
                    let had_colon = matches!(next, Some((Tok::Colon, _)));
                    if had_colon {
                        self.pos += 1;
                        next = self.toks.get(self.pos).cloned();
                    }
                    match next {
                        Some((Tok::Open(c), _)) => {
                            self.pos += 1;
                            let inner = self.fields(Some(c))?;
                            fields.push((name, Value::Message(inner)));
                        }
                        Some((Tok::Ident(v) | Tok::Str(v), l)) if had_colon => {
                            self.pos += 1;
                            fields.push((name, Value::Scalar(v, l)));
                        }
                        _ => {
                            return Err(err(line, format!("field {name:?} has no value")));
                        }
                    }
                }
                other => return Err(err(line, format!("expected a field name, found {other:?}"))),
            }
        }
    }
}

fn parse(text: &str) -> Result<Vec<(String, Value)>, TextProtoError> {
    let mut p = Parser {
        toks: tokenize(text)?,
        pos: 0,
    };
    p.fields(None)
}

fn messages<'a>(
    fields: &'a [(String, Value)],
    name: &'a str,
) -> impl Iterator<Item = &'a [(String, Value)]> + 'a {
    fields.iter().filter_map(move |(n, v)| match v {
        Value::Message(m) if n == name => Some(m.as_slice()),
        _ => None,
    })
}

fn scalar<'a>(fields: &'a [(String, Value)], name: &str) -> Option<(&'a str, usize)> {
    fields.iter().rev().find_map(|(n, v)| match v {
        Value::Scalar(s, line) if n == name => Some((s.as_str(), *line)),
        _ => None,
    })
}

fn uint(fields: &[(String, Value)], name: &str) -> Result<Option<u64>, TextProtoError> {
    match scalar(fields, name) {
        None => Ok(None),
        Some((s, line)) => s
            .parse::<u64>()
            .map(Some)
            .map_err(|_| err(line, format!("{name}: {s:?} is not a non-negative integer"))),
    }
}

/// Parses `text` and extracts the fields the daemon uses. A config without
/// `buffers { size_kb }` is an error: the ring buffer needs a size.
pub fn parse_trace_config(text: &str) -> Result<PerfettoTraceConfig, TextProtoError> {
    let root = parse(text)?;
    let buffer = messages(&root, "buffers")
        .next()
        .ok_or_else(|| err(0, "no buffers { size_kb: N } block"))?;
    let buffer_size_kb =
        uint(buffer, "size_kb")?.ok_or_else(|| err(0, "buffers block has no size_kb"))?;
    if buffer_size_kb == 0 {
        return Err(err(0, "buffers.size_kb must be greater than 0"));
    }
    let mut sampling_frequency_hz = None;
    for ds in messages(&root, "data_sources") {
        for cfg in messages(ds, "config") {
            if scalar(cfg, "name").map(|n| n.0) != Some("linux.perf") {
                continue;
            }
            for pec in messages(cfg, "perf_event_config") {
                if let Some(f) = uint(pec, "sampling_frequency")? {
                    sampling_frequency_hz = Some(f);
                }
                for tb in messages(pec, "timebase") {
                    if let Some(f) = uint(tb, "frequency")? {
                        sampling_frequency_hz = Some(f);
                    }
                }
            }
        }
    }
    if sampling_frequency_hz == Some(0) {
        return Err(err(
            0,
            "linux.perf sampling frequency must be greater than 0",
        ));
    }
    let mut trigger_mode = None;
    let mut triggers = Vec::new();
    for tc in messages(&root, "trigger_config") {
        if let Some((mode, _)) = scalar(tc, "trigger_mode") {
            trigger_mode = Some(mode.to_string());
        }
        for t in messages(tc, "triggers") {
            let name = scalar(t, "name")
                .map(|n| n.0.to_string())
                .ok_or_else(|| err(0, "a trigger_config.triggers block has no name"))?;
            triggers.push(TriggerSpec {
                name,
                stop_delay_ms: uint(t, "stop_delay_ms")?.unwrap_or(0),
            });
        }
    }
    Ok(PerfettoTraceConfig {
        buffer_size_kb,
        sampling_frequency_hz,
        trigger_mode,
        triggers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_subset_and_ignores_the_rest() {
        let text = r#"
            # comment
            duration_ms: 10000
            buffers { size_kb: 2048 fill_policy: RING_BUFFER }
            buffers: { size_kb: 4 }
            data_sources {
              config {
                name: "linux.ftrace"
                ftrace_config { ftrace_events: "sched/sched_switch" }
              }
            }
            data_sources: {
              config {
                name: "linux.perf"
                perf_event_config { timebase { frequency: 250 } callstack_sampling { kernel_frames: true } }
              }
            }
            trigger_config {
              trigger_mode: STOP_TRACING
              triggers { name: "snap" stop_delay_ms: 500 }
              triggers { name: 'other' }
              trigger_timeout_ms: 86400000
            }
        "#;
        let c = parse_trace_config(text).unwrap();
        assert_eq!(c.buffer_size_kb, 2048);
        assert_eq!(c.sampling_frequency_hz, Some(250));
        assert_eq!(c.trigger_mode.as_deref(), Some("STOP_TRACING"));
        assert_eq!(
            c.triggers,
            vec![
                TriggerSpec {
                    name: "snap".into(),
                    stop_delay_ms: 500
                },
                TriggerSpec {
                    name: "other".into(),
                    stop_delay_ms: 0
                }
            ]
        );
    }

    #[test]
    fn rejects_broken_text_with_a_line() {
        let e = parse_trace_config("buffers {\n size_kb: 1\n").unwrap_err();
        assert!(e.reason.contains("closing brace"), "{e}");
        let e = parse_trace_config("buffers { size_kb: x1 }").unwrap_err();
        assert!(e.reason.contains("size_kb"), "{e}");
        let e = parse_trace_config("\n\nbuffers { size_kb: \"1 }").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(parse_trace_config("data_sources {}").is_err());
        assert!(parse_trace_config("buffers { size_kb: 0 }").is_err());
        assert!(parse_trace_config("buffers { size_kb }").is_err());
        assert!(parse_trace_config("} buffers { size_kb: 1 }").is_err());
    }
}
