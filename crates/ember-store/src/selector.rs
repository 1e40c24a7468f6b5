//! Prometheus-style label selectors: `name{a="b", c=~"re", d!="x", e!~"y"}`.
//!
//! Owns parsing selectors and matching them against label sets. Regular
//! expressions are fully anchored, as in Prometheus.

use regex::Regex;

use crate::StoreError;

/// How a matcher compares a label value.
#[derive(Debug, Clone)]
pub enum MatchOp {
    /// `=`: equal.
    Eq(String),
    /// `!=`: not equal (a missing label counts as the empty string).
    NotEq(String),
    /// `=~`: the anchored regular expression matches.
    Re(Regex),
    /// `!~`: the anchored regular expression does not match.
    NotRe(Regex),
}

/// One `name op value` term of a selector.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// Label name.
    pub name: String,
    /// Comparison.
    pub op: MatchOp,
}

impl Matcher {
    /// An equality matcher.
    pub fn eq(name: &str, value: &str) -> Self {
        Matcher {
            name: name.to_string(),
            op: MatchOp::Eq(value.to_string()),
        }
    }

    /// A matcher accepting exactly the values `values` (`name=~"v1|v2|…"` with each value
    /// taken literally); `None` when the list is empty.
    pub fn any_of(name: &str, values: &[String]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let alternatives: Vec<String> = values.iter().map(|v| regex::escape(v)).collect();
        // Escaped literals joined by `|` always form a valid expression.
        let re = Regex::new(&format!("^(?:{})$", alternatives.join("|"))).ok()?;
        Some(Matcher {
            name: name.to_string(),
            op: MatchOp::Re(re),
        })
    }

    /// Whether `value` (empty when the label is absent) satisfies the matcher.
    pub fn matches(&self, value: &str) -> bool {
        match &self.op {
            MatchOp::Eq(v) => v == value,
            MatchOp::NotEq(v) => v != value,
            MatchOp::Re(re) => re.is_match(value),
            MatchOp::NotRe(re) => !re.is_match(value),
        }
    }
}

/// A parsed selector: an optional name before the braces and the matchers.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// Text before `{`: a profile type id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`) or a
    /// legacy Pyroscope application name (`app.cpu`); `None` when absent.
    pub name: Option<String>,
    /// The matchers inside the braces.
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// Whether every matcher accepts the label set (sorted or not).
    pub fn matches(&self, labels: &[(String, String)]) -> bool {
        self.matchers.iter().all(|m| {
            let v = labels
                .iter()
                .find(|(n, _)| *n == m.name)
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            m.matches(v)
        })
    }
}

impl Selector {
    /// Whether the series labels pass the matchers that are decided per series: every
    /// matcher but those on a name `labels` lacks and `is_sample_key` says samples carry.
    /// Those select samples instead ([`Selector::sample_matchers`]): in
    /// `{service_name="api", span_id="7f"}` the first picks series, the second the samples
    /// of the request.
    pub fn matches_series(
        &self,
        labels: &[(String, String)],
        is_sample_key: impl Fn(&str) -> bool,
    ) -> bool {
        self.matchers.iter().all(|m| {
            match labels.iter().find(|(n, _)| *n == m.name) {
                Some((_, v)) => m.matches(v),
                // Absent: "" as in Prometheus, unless samples may carry it.
                None => is_sample_key(&m.name) || m.matches(""),
            }
        })
    }

    /// The matchers that a series with `labels` leaves to its samples (see
    /// [`Selector::matches_series`]).
    pub fn sample_matchers(
        &self,
        labels: &[(String, String)],
        is_sample_key: impl Fn(&str) -> bool,
    ) -> Vec<&Matcher> {
        self.matchers
            .iter()
            .filter(|m| is_sample_key(&m.name) && !labels.iter().any(|(n, _)| *n == m.name))
            .collect()
    }
}

/// Whether a sample with the label `pairs` passes every matcher of `matchers`. A label may
/// repeat with several values in pprof: `=` and `=~` need one value to match, `!=` and `!~`
/// need every value to; a label the sample lacks is the empty string.
pub fn sample_matches<'a>(
    matchers: &[&Matcher],
    pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> bool {
    matchers.iter().all(|m| {
        let mut values = pairs.clone().filter(|(k, _)| *k == m.name).map(|(_, v)| v);
        let Some(first) = values.next() else {
            return m.matches("");
        };
        let mut all = std::iter::once(first).chain(values);
        match m.op {
            MatchOp::Eq(_) | MatchOp::Re(_) => all.any(|v| m.matches(v)),
            MatchOp::NotEq(_) | MatchOp::NotRe(_) => all.all(|v| m.matches(v)),
        }
    })
}

fn err(msg: impl Into<String>) -> StoreError {
    StoreError::Selector(msg.into())
}

/// Parses `name{matchers}`, `{matchers}` or a bare `name`. An empty string is the empty selector.
pub fn parse_selector(input: &str) -> Result<Selector, StoreError> {
    let s = input.trim();
    let (name, body) = match s.find('{') {
        Some(i) => {
            let rest = s[i + 1..].trim_end();
            let Some(body) = rest.strip_suffix('}') else {
                return Err(err(format!("missing closing '}}' in selector {s:?}")));
            };
            (s[..i].trim(), body)
        }
        None => (s, ""),
    };
    let name = if name.is_empty() {
        None
    } else {
        Some(name.to_string())
    };
    let mut matchers = Vec::new();
    let b = body.as_bytes();
    let mut i = 0;
    loop {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
            i += 1;
        }
        let label = &body[start..i];
        if label.is_empty() {
            return Err(err(format!(
                "expected a label name at byte {start} of {body:?}"
            )));
        }
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let op = if body[i..].starts_with("=~") {
            i += 2;
            "=~"
        } else if body[i..].starts_with("!=") {
            i += 2;
            "!="
        } else if body[i..].starts_with("!~") {
            i += 2;
            "!~"
        } else if body[i..].starts_with('=') {
            i += 1;
            "="
        } else {
            return Err(err(format!(
                "expected =, !=, =~ or !~ after label {label:?}"
            )));
        };
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let (value, next) = parse_quoted(body, i)?;
        i = next;
        let op = match op {
            "=" => MatchOp::Eq(value),
            "!=" => MatchOp::NotEq(value),
            "=~" => MatchOp::Re(anchored(&value)?),
            _ => MatchOp::NotRe(anchored(&value)?),
        };
        matchers.push(Matcher {
            name: label.to_string(),
            op,
        });
    }
    Ok(Selector { name, matchers })
}

fn anchored(re: &str) -> Result<Regex, StoreError> {
    Regex::new(&format!("^(?:{re})$"))
        .map_err(|e| err(format!("bad regular expression {re:?}: {e}")))
}

/// Parses a `"..."`, `'...'` or `` `...` `` string starting at byte `i`; returns it and the index after it.
fn parse_quoted(s: &str, i: usize) -> Result<(String, usize), StoreError> {
    let b = s.as_bytes();
    let Some(&q) = b.get(i) else {
        return Err(err("expected a quoted value at end of selector"));
    };
    if q != b'"' && q != b'\'' && q != b'`' {
        return Err(err(format!("expected a quoted value at byte {i} of {s:?}")));
    }
    let mut out = String::new();
    let mut chars = s[i + 1..].char_indices();
    while let Some((j, c)) = chars.next() {
        if c as u32 == q as u32 {
            return Ok((out, i + 1 + j + 1));
        }
        if c == '\\' && q != b'`' {
            match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, other)) => out.push(other),
                None => break,
            }
        } else {
            out.push(c);
        }
    }
    Err(err(format!("unterminated string in selector {s:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn parses_all_operators() {
        let s =
            parse_selector(r#"{service_name="api", region=~"eu-.*", pod!="x", x!~"y"}"#).unwrap();
        assert_eq!(s.matchers.len(), 4);
        assert!(s.name.is_none());
        assert!(s.matches(&l(&[
            ("service_name", "api"),
            ("region", "eu-west"),
            ("pod", "a")
        ])));
        assert!(!s.matches(&l(&[("service_name", "api"), ("region", "us-east")])));
        assert!(!s.matches(&l(&[
            ("service_name", "api"),
            ("region", "eu-1"),
            ("pod", "x")
        ])));
        assert!(!s.matches(&l(&[
            ("service_name", "api"),
            ("region", "eu-1"),
            ("x", "y")
        ])));
        // Anchored: a partial match is not a match.
        assert!(!s.matches(&l(&[("service_name", "api"), ("region", "xeu-1")])));
    }

    #[test]
    fn name_prefix_and_errors() {
        let s = parse_selector("process_cpu:cpu:nanoseconds:cpu:nanoseconds{a='b'}").unwrap();
        assert_eq!(
            s.name.as_deref(),
            Some("process_cpu:cpu:nanoseconds:cpu:nanoseconds")
        );
        assert_eq!(
            parse_selector("app.cpu").unwrap().name.as_deref(),
            Some("app.cpu")
        );
        assert!(parse_selector("{a=\"b\"").is_err());
        assert!(parse_selector("{a=b}").is_err());
        assert!(parse_selector("{a=~\"(\"}").is_err());
        assert!(parse_selector("{=\"b\"}").is_err());
        assert!(parse_selector("{a~\"b\"}").is_err());
        assert!(parse_selector("").unwrap().matchers.is_empty());
    }
}
