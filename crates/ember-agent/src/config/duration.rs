//! [`Dur`]: the human-written durations of the configuration (`15s`, `1m30s`, `250ms`).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A duration written as `"15s"`, `"500ms"`, `"2m"`, `"1h"` or `"1m30s"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// Whole seconds.
    pub const fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }
    /// Milliseconds.
    pub const fn millis(ms: u64) -> Dur {
        Dur(Duration::from_millis(ms))
    }
    /// Parses the duration syntax above.
    pub fn parse(text: &str) -> Result<Dur, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty duration".into());
        }
        if t == "0" {
            return Ok(Dur(Duration::ZERO));
        }
        let mut total = Duration::ZERO;
        let mut rest = t;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| format!("{text:?}: missing unit (ms, s, m, h)"))?;
            if digits == 0 {
                return Err(format!("{text:?}: expected a number"));
            }
            let value: f64 = rest[..digits]
                .parse()
                .map_err(|_| format!("{text:?}: bad number"))?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let scale = match &rest[..unit_len] {
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                "us" | "µs" => 1e-6,
                u => return Err(format!("{text:?}: unknown unit {u:?} (use ms, s, m, h)")),
            };
            rest = &rest[unit_len..];
            let secs = value * scale;
            if !secs.is_finite() || secs > 1e9 {
                return Err(format!("{text:?}: out of range"));
            }
            total += Duration::from_secs_f64(secs);
        }
        Ok(Dur(total))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 && !self.0.is_zero() {
            write!(f, "{}us", self.0.as_micros())
        } else if ms.is_multiple_of(3_600_000) && ms > 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms.is_multiple_of(60_000) && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"15s\", \"500ms\" or \"2m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                Dur::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur(Duration::ZERO))
                } else {
                    Err(E::custom(format!(
                        "{v}: a duration needs a unit, e.g. \"{v}s\""
                    )))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
                self.visit_u64(v.max(0) as u64)
            }
        }
        d.deserialize_any(V)
    }
}
