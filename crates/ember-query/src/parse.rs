//! Parsing helpers shared by every front end: time expressions, selectors with a profile type
//! or legacy Pyroscope name before the braces, steps, node limits and group-by lists.
//!
//! Error messages name the parameter (`from="x": ...`) so each front end passes its own key.

use ember_store::{Matcher, Selector};

use crate::QueryError;
use crate::request::NameRule;

const NANOS_PER_SEC: i64 = 1_000_000_000;

pub use ember_store::now_nanos;

/// A unix timestamp in seconds, milliseconds, microseconds or nanoseconds (told apart by
/// magnitude; fractions allowed) as nanoseconds; `None` for anything else or a negative time.
pub fn parse_unix(text: &str) -> Option<i64> {
    let v: f64 = text.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let ns = if v < 1e11 {
        v * 1e9
    } else if v < 1e14 {
        v * 1e6
    } else if v < 1e17 {
        v * 1e3
    } else {
        v
    };
    Some(ns as i64)
}

/// Parses `now`, `now-<n><s|m|h|d|w>` or a unix timestamp ([`parse_unix`]) against `now`
/// (unix nanoseconds).
pub fn parse_time(text: &str, now: i64) -> Option<i64> {
    let t = text.trim();
    if t == "now" {
        return Some(now);
    }
    if let Some(rel) = t.strip_prefix("now-") {
        let (num, unit) = rel.split_at(rel.find(|c: char| !c.is_ascii_digit())?);
        let n: i64 = num.parse().ok()?;
        let secs = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 604_800,
            _ => return None,
        };
        return Some(now.saturating_sub(n.saturating_mul(secs).saturating_mul(NANOS_PER_SEC)));
    }
    parse_unix(t)
}

/// One bound of a time range: the parameter's name (for errors) and its text, if given.
#[derive(Debug, Clone, Copy)]
pub struct TimeParam<'a> {
    /// The parameter name the client used (`from`, `leftUntil`, `--from`).
    pub key: &'a str,
    /// Its text; `None` when absent.
    pub text: Option<&'a str>,
}

/// The inclusive `[start, end]` range in unix nanoseconds of two time expressions, `now-1h`
/// and `now` when absent. A whole-second `until` (`1700000000`) means through the end of that
/// second. An `until` before `from` is an error.
pub fn time_range(
    from: TimeParam<'_>,
    until: TimeParam<'_>,
    now: i64,
) -> Result<(i64, i64), QueryError> {
    let time = |p: TimeParam<'_>, default: &str| -> Result<i64, QueryError> {
        let text = p.text.unwrap_or(default);
        parse_time(text, now).ok_or_else(|| {
            QueryError::Time(format!(
                "{}={text:?}: expected a unix timestamp, now or now-1h",
                p.key
            ))
        })
    };
    let start = time(from, "now-1h")?;
    let mut end = time(until, "now")?;
    if until
        .text
        .is_some_and(|u| u.trim().parse::<f64>().is_ok_and(|v| v < 1e11))
    {
        end = end.saturating_add(NANOS_PER_SEC - 1);
    }
    if end < start {
        return Err(QueryError::Time("until is before from".into()));
    }
    Ok((start, end))
}

/// The inclusive range of a `querier.v1` request: unix milliseconds, an `end` of 0 (or
/// less) unbounded, and the end millisecond included whole.
pub fn millis_range(start_ms: i64, end_ms: i64) -> (i64, i64) {
    let start = start_ms.saturating_mul(1_000_000);
    let end = if end_ms <= 0 {
        i64::MAX
    } else {
        end_ms.saturating_mul(1_000_000).saturating_add(999_999)
    };
    (start, end)
}

/// Parses a selector (`{service_name="api", region=~"eu-.*"}`; empty = every series) and
/// resolves the name before its braces by `rule`; returns the matchers and the profile type
/// (`explicit_type` unless the name supplies one; an empty type is none).
pub fn resolve_selector(
    text: &str,
    explicit_type: Option<&str>,
    rule: NameRule,
) -> Result<(Selector, Option<String>), QueryError> {
    let text = if text.trim().is_empty() { "{}" } else { text };
    let mut selector =
        ember_store::parse_selector(text).map_err(|e| QueryError::Selector(e.to_string()))?;
    let mut profile_type = explicit_type.filter(|t| !t.is_empty()).map(str::to_string);
    let Some(name) = selector.name.take() else {
        return Ok((selector, profile_type));
    };
    match rule {
        NameRule::MetricName => selector
            .matchers
            .push(Matcher::eq(ember_store::NAME_LABEL, &name)),
        NameRule::PyroscopeApp if name.contains(':') => profile_type = Some(name),
        NameRule::PyroscopeApp => match name.rsplit_once('.') {
            Some((app, suffix)) => {
                selector
                    .matchers
                    .push(Matcher::eq(ember_store::SERVICE_LABEL, app));
                profile_type.get_or_insert_with(|| suffix.to_string());
            }
            None => selector
                .matchers
                .push(Matcher::eq(ember_store::SERVICE_LABEL, &name)),
        },
    }
    Ok((selector, profile_type))
}

/// A step in seconds (> 0, fractions allowed) as nanoseconds; `key` names the parameter.
pub fn parse_step(key: &str, text: &str) -> Result<i64, QueryError> {
    text.parse()
        .ok()
        .filter(|v: &f64| *v > 0.0 && v.is_finite())
        .map(|secs| (secs * 1e9) as i64)
        .ok_or_else(|| QueryError::Step(format!("{key}={text:?}: expected seconds > 0")))
}

/// A node limit (a non-negative integer; 0 = no limit); `key` names the parameter.
pub fn parse_max_nodes(key: &str, text: &str) -> Result<usize, QueryError> {
    text.parse()
        .map_err(|_| QueryError::Invalid(format!("{key}={text:?} is not a number")))
}

/// A call path as a JSON array of frame names (`["main.main","main.work"]`): frame names
/// may hold any character, so no separator would do.
pub fn parse_path(key: &str, text: &str) -> Result<Vec<String>, QueryError> {
    serde_json::from_str(text).map_err(|e| {
        QueryError::Invalid(format!(
            "{key}={text:?} is not a JSON array of frame names: {e}"
        ))
    })
}

/// A comma-separated list of label names (blanks dropped).
pub fn parse_list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times() {
        let now = 1_700_000_000_000_000_000;
        assert_eq!(parse_time("now", now), Some(now));
        assert_eq!(parse_time("now-1h", now), Some(now - 3_600_000_000_000));
        assert_eq!(parse_time("now-15m", now), Some(now - 900_000_000_000));
        assert_eq!(parse_time("now-1y", now), None);
        assert_eq!(parse_time("now-", now), None);
        assert_eq!(parse_time("1700000000", now), Some(now));
    }

    #[test]
    fn unix_units_by_magnitude() {
        let ns = 1_700_000_000_000_000_000;
        assert_eq!(parse_unix("1700000000"), Some(ns));
        assert_eq!(parse_unix("1700000000000"), Some(ns));
        assert_eq!(parse_unix("1700000000000000"), Some(ns));
        assert_eq!(parse_unix("1700000000000000000"), Some(ns));
        assert_eq!(parse_unix("-1"), None);
        assert_eq!(parse_unix("soon"), None);
    }

    #[test]
    fn ranges_default_and_include_the_last_second() {
        let now = 1_700_000_000_000_000_000;
        let absent = |key| TimeParam { key, text: None };
        let (s, e) = time_range(absent("from"), absent("until"), now).unwrap();
        assert_eq!((s, e), (now - 3_600_000_000_000, now));
        let given = |key, text| TimeParam {
            key,
            text: Some(text),
        };
        let (_, e) = time_range(given("from", "0"), given("until", "1700000000"), now).unwrap();
        assert_eq!(e, now + 999_999_999);
        let err = time_range(given("leftFrom", "x"), absent("until"), now).unwrap_err();
        assert_eq!(
            err.to_string(),
            "leftFrom=\"x\": expected a unix timestamp, now or now-1h"
        );
        assert!(time_range(given("from", "now"), given("until", "now-1h"), now).is_err());
        assert_eq!(millis_range(1, 0), (1_000_000, i64::MAX));
        assert_eq!(millis_range(1, 2), (1_000_000, 2_999_999));
    }

    #[test]
    fn selector_names_by_rule() {
        let (sel, ty) = resolve_selector("app.cpu{pod=\"a\"}", None, NameRule::PyroscopeApp)
            .expect("legacy name");
        assert_eq!(ty.as_deref(), Some("cpu"));
        assert!(sel.matches(&[
            ("pod".into(), "a".into()),
            ("service_name".into(), "app".into())
        ]));
        let (_, ty) = resolve_selector("app.cpu{}", Some("alloc_space"), NameRule::PyroscopeApp)
            .expect("explicit type wins over the suffix");
        assert_eq!(ty.as_deref(), Some("alloc_space"));
        let id = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
        let (sel, ty) = resolve_selector(&format!("{id}{{}}"), Some("x"), NameRule::PyroscopeApp)
            .expect("type id");
        assert_eq!(ty.as_deref(), Some(id));
        assert!(sel.matchers.is_empty());
        let (sel, ty) =
            resolve_selector("process_cpu{}", None, NameRule::MetricName).expect("metric name");
        assert_eq!(ty, None);
        assert!(sel.matches(&[("__name__".into(), "process_cpu".into())]));
        let (sel, _) = resolve_selector("  ", Some(""), NameRule::MetricName).expect("empty");
        assert!(sel.matchers.is_empty());
        assert!(matches!(
            resolve_selector("{a=", None, NameRule::PyroscopeApp),
            Err(QueryError::Selector(_))
        ));
    }

    #[test]
    fn steps_limits_and_lists() {
        assert_eq!(parse_step("step", "1.5").unwrap(), 1_500_000_000);
        assert!(matches!(parse_step("step", "0"), Err(QueryError::Step(_))));
        assert_eq!(parse_max_nodes("maxNodes", "0").unwrap(), 0);
        assert_eq!(
            parse_max_nodes("maxNodes", "-1").unwrap_err().to_string(),
            "maxNodes=\"-1\" is not a number"
        );
        assert_eq!(parse_list(" a, ,b"), vec!["a", "b"]);
    }
}
