//! How Ember reports on itself: the one writer of the Prometheus text exposition format
//! (version 0.0.4), used by the server's and the agent's `/metrics`.
//!
//! Metrics live where they are counted (atomics in each component); at scrape time the
//! component describes them to an [`Exposition`], which groups samples into families (one
//! `# HELP` and one `# TYPE` line each, whatever order samples were added in), escapes label
//! values and help text as the format requires, and renders them in a stable order: families
//! in the order they were first added, samples in the order they were added.
//!
//! ```
//! let mut out = ember_telemetry::Exposition::new();
//! out.counter("ember_ingested_profiles_total", "Profiles stored.", 42u64);
//! out.family("ember_rejected_total", ember_telemetry::MetricType::Counter, "Rejected requests.")
//!     .sample(&[("reason", "too_large")], 3u64);
//! assert!(out.render().contains("ember_rejected_total{reason=\"too_large\"} 3\n"));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

use std::fmt::{self, Write as _};

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The kind of a metric family (the `# TYPE` line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// Only goes up (resets at restart); names end in `_total` by convention.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Observations counted in cumulative buckets, with their sum and count.
    Histogram,
    /// Observations summarised by quantiles, with their sum and count.
    Summary,
    /// Unknown kind.
    Untyped,
}

impl MetricType {
    fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Summary => "summary",
            MetricType::Untyped => "untyped",
        }
    }
}

/// A sample value: an integer (written exactly) or a float (written as Prometheus reads it:
/// `NaN`, `+Inf`, `-Inf` for the special values).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// An integer count.
    Int(u64),
    /// A measurement (seconds, ratios...).
    Float(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Int(v)
    }
}

impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Int(u64::from(v))
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(v as u64)
    }
}

impl From<bool> for Value {
    /// 1 for true, 0 for false (as `up`-style gauges report).
    fn from(v: bool) -> Value {
        Value::Int(u64::from(v))
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) if v.is_nan() => f.write_str("NaN"),
            Value::Float(v) if v == f64::INFINITY => f.write_str("+Inf"),
            Value::Float(v) if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            // Rust prints the shortest text that reads back as the same float, never with an
            // exponent: valid for Prometheus' parser.
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

/// One metric family: its name, kind, help and samples.
#[derive(Debug, Clone)]
pub struct Family {
    name: String,
    kind: MetricType,
    help: String,
    /// Rendered sample lines (name, labels, value), in the order added.
    lines: Vec<String>,
}

impl Family {
    /// Adds a sample with these labels (none for `&[]`) to the family.
    pub fn sample(&mut self, labels: &[(&str, &str)], value: impl Into<Value>) -> &mut Family {
        self.push_line("", labels, None, value.into())
    }

    /// Adds one histogram (a family of [`MetricType::Histogram`]): `buckets` are
    /// (upper bound, cumulative count) pairs in increasing bound order, without `+Inf`, which
    /// is written from `count`; then `_sum` and `_count`.
    pub fn histogram(
        &mut self,
        labels: &[(&str, &str)],
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) -> &mut Family {
        debug_assert_eq!(self.kind, MetricType::Histogram, "{}", self.name);
        debug_assert!(
            buckets
                .windows(2)
                .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
            "histogram buckets of {} must grow",
            self.name
        );
        for &(bound, cumulative) in buckets {
            let le = Value::Float(bound).to_string();
            self.push_line("_bucket", labels, Some(&le), Value::Int(cumulative));
        }
        self.push_line("_bucket", labels, Some("+Inf"), count.into());
        self.sum_and_count(labels, sum, count)
    }

    /// Adds one line of this family: its name plus `suffix` (`_bucket`, `_sum`, ...), the
    /// labels, the histogram bound `le` when there is one, and the value. Every kind of
    /// sample goes through here so that lines are written one way.
    fn push_line(
        &mut self,
        suffix: &str,
        labels: &[(&str, &str)],
        le: Option<&str>,
        value: Value,
    ) -> &mut Family {
        let line = sample_line(&self.name, suffix, labels, le, value);
        self.lines.push(line);
        self
    }

    /// The `_sum` and `_count` lines that close a histogram and a summary alike.
    fn sum_and_count(&mut self, labels: &[(&str, &str)], sum: f64, count: u64) -> &mut Family {
        for (suffix, value) in [("_sum", Value::from(sum)), ("_count", Value::from(count))] {
            self.push_line(suffix, labels, None, value);
        }
        self
    }

    /// Adds one summary (a family of [`MetricType::Summary`]): (quantile, value) pairs, then
    /// `_sum` and `_count`.
    pub fn summary(
        &mut self,
        labels: &[(&str, &str)],
        quantiles: &[(f64, f64)],
        sum: f64,
        count: u64,
    ) -> &mut Family {
        debug_assert_eq!(self.kind, MetricType::Summary, "{}", self.name);
        for &(q, v) in quantiles {
            let mut with_q: Vec<(&str, &str)> = labels.to_vec();
            let q = Value::Float(q).to_string();
            with_q.push(("quantile", &q));
            self.push_line("", &with_q, None, v.into());
        }
        self.sum_and_count(labels, sum, count)
    }
}

/// One exposition being put together; [`Exposition::render`] gives the text.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// The family `name`, created with this kind and help on first use; later calls with the
    /// same name return the same family (their kind and help must match: checked in debug
    /// builds), so its samples stay under one `# HELP`/`# TYPE` header.
    pub fn family(&mut self, name: &str, kind: MetricType, help: &str) -> &mut Family {
        debug_assert!(valid_name(name, true), "invalid metric name {name:?}");
        let index = match self.families.iter().position(|f| f.name == name) {
            Some(i) => {
                debug_assert_eq!(self.families[i].kind, kind, "metric {name} kind changed");
                i
            }
            None => {
                self.families.push(Family {
                    name: name.to_string(),
                    kind,
                    help: help.to_string(),
                    lines: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[index]
    }

    /// Adds an unlabelled counter sample.
    pub fn counter(&mut self, name: &str, help: &str, value: impl Into<Value>) -> &mut Exposition {
        self.family(name, MetricType::Counter, help)
            .sample(&[], value);
        self
    }

    /// Adds an unlabelled gauge sample.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl Into<Value>) -> &mut Exposition {
        self.family(name, MetricType::Gauge, help)
            .sample(&[], value);
        self
    }

    /// Writes the exposition: per family `# HELP`, `# TYPE`, then its samples, one per line,
    /// each line ending in `\n`. A family without samples is still declared (a labelled metric
    /// with nothing to report yet, e.g. no scrape targets).
    pub fn write_to(&self, out: &mut impl fmt::Write) -> fmt::Result {
        for family in &self.families {
            out.write_str("# HELP ")?;
            out.write_str(&family.name)?;
            out.write_char(' ')?;
            escape_into(out, &family.help, false)?;
            writeln!(out, "\n# TYPE {} {}", family.name, family.kind.as_str())?;
            for line in &family.lines {
                out.write_str(line)?;
            }
        }
        Ok(())
    }

    /// The exposition as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_to(&mut out);
        out
    }
}

/// `name<suffix>{labels,le="..."} value\n`.
fn sample_line(
    name: &str,
    suffix: &str,
    labels: &[(&str, &str)],
    le: Option<&str>,
    value: Value,
) -> String {
    let mut line = String::with_capacity(name.len() + 32);
    line.push_str(name);
    line.push_str(suffix);
    let extra = le.map(|le| ("le", le));
    if !labels.is_empty() || extra.is_some() {
        line.push('{');
        for (i, (label, v)) in labels.iter().chain(extra.iter()).enumerate() {
            debug_assert!(valid_name(label, false), "invalid label name {label:?}");
            if i > 0 {
                line.push(',');
            }
            line.push_str(label);
            line.push_str("=\"");
            let _ = escape_into(&mut line, v, true);
            line.push('"');
        }
        line.push('}');
    }
    let _ = writeln!(line, " {value}");
    line
}

/// Escapes as the text format requires: backslash and line feed always (`\\`, `\n`), the
/// double quote in label values (`\"`); help text keeps its quotes.
fn escape_into(out: &mut impl fmt::Write, text: &str, label_value: bool) -> fmt::Result {
    for c in text.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '"' if label_value => out.write_str("\\\"")?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

/// Metric names: `[a-zA-Z_:][a-zA-Z0-9_:]*`; label names: `[a-zA-Z_][a-zA-Z0-9_]*`.
fn valid_name(name: &str, metric: bool) -> bool {
    let ok = |c: char, first: bool| {
        c.is_ascii_alphabetic()
            || c == '_'
            || (metric && c == ':')
            || (!first && c.is_ascii_digit())
    };
    let mut chars = name.chars();
    chars.next().is_some_and(|c| ok(c, true)) && chars.all(|c| ok(c, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_declared_once_and_keep_their_order() {
        let mut out = Exposition::new();
        out.counter("a_total", "A things.", 1u64);
        out.family("b", MetricType::Gauge, "B now.")
            .sample(&[("kind", "x")], 2u64);
        out.family("a_total", MetricType::Counter, "A things.")
            .sample(&[("k", "v")], 3u64);
        out.family("empty", MetricType::Gauge, "Nothing yet.");
        assert_eq!(
            out.render(),
            "# HELP a_total A things.\n# TYPE a_total counter\na_total 1\na_total{k=\"v\"} 3\n\
             # HELP b B now.\n# TYPE b gauge\nb{kind=\"x\"} 2\n\
             # HELP empty Nothing yet.\n# TYPE empty gauge\n"
        );
    }

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut out = Exposition::new();
        out.family(
            "e",
            MetricType::Gauge,
            "Help with \\ backslash,\nnewline and \"quotes\".",
        )
        .sample(&[("path", "C:\\dir"), ("msg", "say \"hi\"\nbye")], 1u64);
        assert_eq!(
            out.render(),
            "# HELP e Help with \\\\ backslash,\\nnewline and \"quotes\".\n# TYPE e gauge\n\
             e{path=\"C:\\\\dir\",msg=\"say \\\"hi\\\"\\nbye\"} 1\n"
        );
    }

    #[test]
    fn values_are_written_as_prometheus_reads_them() {
        let text = |v: Value| v.to_string();
        assert_eq!(text(Value::Int(u64::MAX)), "18446744073709551615");
        assert_eq!(text(0.25.into()), "0.25");
        assert_eq!(text(3.0.into()), "3");
        assert_eq!(text(1e21.into()), "1000000000000000000000");
        assert_eq!(text(f64::NAN.into()), "NaN");
        assert_eq!(text(f64::INFINITY.into()), "+Inf");
        assert_eq!(text(f64::NEG_INFINITY.into()), "-Inf");
        assert_eq!(text(true.into()), "1");
        assert_eq!(text(7usize.into()), "7");
    }

    #[test]
    fn histograms_and_summaries() {
        let mut out = Exposition::new();
        out.family("lat_seconds", MetricType::Histogram, "Latency.")
            .histogram(&[("op", "q")], &[(0.1, 2), (1.0, 5)], 2.5, 6);
        out.family("size_bytes", MetricType::Summary, "Sizes.")
            .summary(&[], &[(0.5, 10.0), (0.99, 40.0)], 100.0, 5);
        assert_eq!(
            out.render(),
            "# HELP lat_seconds Latency.\n# TYPE lat_seconds histogram\n\
             lat_seconds_bucket{op=\"q\",le=\"0.1\"} 2\n\
             lat_seconds_bucket{op=\"q\",le=\"1\"} 5\n\
             lat_seconds_bucket{op=\"q\",le=\"+Inf\"} 6\n\
             lat_seconds_sum{op=\"q\"} 2.5\n\
             lat_seconds_count{op=\"q\"} 6\n\
             # HELP size_bytes Sizes.\n# TYPE size_bytes summary\n\
             size_bytes{quantile=\"0.5\"} 10\n\
             size_bytes{quantile=\"0.99\"} 40\n\
             size_bytes_sum 100\n\
             size_bytes_count 5\n"
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("ember_up", true));
        assert!(valid_name("a:b_c9", true));
        assert!(!valid_name("9a", true));
        assert!(!valid_name("a-b", true));
        assert!(!valid_name("", true));
        assert!(valid_name("_x", false));
        assert!(!valid_name("a:b", false));
    }
}
