//! Value formatting the way `go tool pprof` prints it: unit auto-scaling (`10ms`, `1.50s`,
//! `2.50MB`), `%`-columns and Go's `%g` rendering of small percentages.
//!
//! These rules are reproduced from the observable behaviour of google/pprof's `measurement`
//! package (as vendored in Go 1.19), so that `ember top` output lines up with `go tool pprof -top`
//! character for character.

/// One unit of a family: printed name, accepted (lower-case) spellings and its size in base units.
struct Unit {
    name: &'static str,
    aliases: &'static [&'static str],
    factor: f64,
}

/// A family of convertible units and the unit used when the target cannot be recognised.
struct Family {
    units: &'static [Unit],
    default: Unit,
}

/// A [`Unit`] in one line, so each family's table reads as a table.
const fn unit(name: &'static str, aliases: &'static [&'static str], factor: f64) -> Unit {
    Unit {
        name,
        aliases,
        factor,
    }
}

const NS: f64 = 1.0;
const FAMILIES: &[Family] = &[
    Family {
        units: &[
            unit("B", &["b", "byte"], 1.0),
            unit("kB", &["kb", "kbyte", "kilobyte"], (1u64 << 10) as f64),
            unit("MB", &["mb", "mbyte", "megabyte"], (1u64 << 20) as f64),
            unit("GB", &["gb", "gbyte", "gigabyte"], (1u64 << 30) as f64),
            unit("TB", &["tb", "tbyte", "terabyte"], (1u64 << 40) as f64),
            unit("PB", &["pb", "pbyte", "petabyte"], (1u64 << 50) as f64),
        ],
        default: unit("B", &["b", "byte"], 1.0),
    },
    Family {
        units: &[
            unit("ns", &["ns", "nanosecond"], NS),
            unit("us", &["μs", "us", "microsecond"], 1e3 * NS),
            unit("ms", &["ms", "millisecond"], 1e6 * NS),
            unit("s", &["s", "sec", "second"], 1e9 * NS),
            unit("hrs", &["hour", "hr"], 3600e9 * NS),
        ],
        default: unit("s", &[], 1e9 * NS),
    },
    Family {
        units: &[
            unit("n*GCU", &["nanogcu"], 1e-9),
            unit("u*GCU", &["microgcu"], 1e-6),
            unit("m*GCU", &["milligcu"], 1e-3),
            unit("GCU", &["gcu"], 1.0),
            unit("k*GCU", &["kilogcu"], 1e3),
            unit("M*GCU", &["megagcu"], 1e6),
            unit("G*GCU", &["gigagcu"], 1e9),
            unit("T*GCU", &["teragcu"], 1e12),
            unit("P*GCU", &["petagcu"], 1e15),
        ],
        default: unit("GCU", &[], 1.0),
    },
];

impl Family {
    /// Recognises a unit spelling: case-insensitive, and a plural `s` is ignored on names longer
    /// than two bytes (so `ms` stays milliseconds but `seconds` becomes `second`).
    fn sniff(&self, unit: &str) -> Option<&Unit> {
        let lower = unit.to_lowercase();
        let key = if lower.len() > 2 {
            lower.strip_suffix('s').unwrap_or(&lower)
        } else {
            &lower
        };
        self.units.iter().find(|u| u.aliases.contains(&key))
    }

    fn convert(&self, value: i64, from: &str, to: &str) -> Option<(f64, &'static str)> {
        let from = self.sniff(from)?;
        let v = value as f64 * from.factor;
        if to == "minimum" || to == "auto" {
            // The largest unit in which the value is still >= 1.
            let mut best: Option<&Unit> = None;
            for u in self.units {
                if u.factor >= best.map_or(0.0, |b| b.factor) && v / u.factor >= 1.0 {
                    best = Some(u);
                }
            }
            let u = best.unwrap_or(&self.default);
            return Some((v / u.factor, u.name));
        }
        let u = self.sniff(to).unwrap_or(&self.default);
        Some((v / u.factor, u.name))
    }
}

/// Converts `value` in `from` units to `to` units (`"minimum"`/`"auto"` pick a readable unit).
/// Returns the scaled value and the printed unit name (empty for plain counts).
pub fn scale(value: i64, from: &str, to: &str) -> (f64, String) {
    if value < 0 && value.checked_neg().is_some() {
        let (v, u) = scale(-value, from, to);
        return (-v, u);
    }
    for family in FAMILIES {
        if let Some((v, u)) = family.convert(value, from, to) {
            return (v, u.to_owned());
        }
    }
    match to {
        "count" | "sample" | "unit" | "minimum" | "auto" => (value as f64, String::new()),
        other => (value as f64, other.to_owned()),
    }
}

/// Formats a value as `go tool pprof` does: two decimals with `.00` dropped, then the unit name.
pub fn scaled_label(value: i64, from: &str, to: &str) -> String {
    let (v, u) = scale(value, from, to);
    let text = format!("{v:.2}");
    let text = text.strip_suffix(".00").unwrap_or(&text);
    if text == "0" || text == "-0" {
        return "0".to_owned();
    }
    format!("{text}{u}")
}

/// `value / total` as a six-character percentage column (`72.73%`, `  100%`, ` 0.57%`, `    0%`).
pub fn percentage(value: i64, total: i64) -> String {
    let ratio = if total != 0 {
        (value as f64 / total as f64).abs() * 100.0
    } else {
        0.0
    };
    if (99.95..=100.05).contains(&ratio) {
        "  100%".to_owned()
    } else if ratio >= 1.0 {
        format!("{ratio:5.2}%")
    } else {
        format!("{:>5}%", go_g2(ratio))
    }
}

/// Go's `%.2g`: two significant digits, trailing zeros dropped, exponent form outside
/// `1e-4 <= |x| < 1e2`.
pub fn go_g2(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    if !x.is_finite() {
        return if x.is_nan() {
            "NaN".to_owned()
        } else if x > 0.0 {
            "+Inf".to_owned()
        } else {
            "-Inf".to_owned()
        };
    }
    // Rounding to two significant digits decides the exponent (0.996 becomes 1.0e0).
    let sci = format!("{x:.1e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..2).contains(&exp) {
        let mantissa = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (1 - exp).max(0) as usize;
        trim_zeros(&format!("{x:.decimals$}")).to_owned()
    }
}

/// The word every flame graph uses for its values (tooltips of `ember flamegraph`, `ember
/// diff`, `ember record` and the server's SVGs): the unit as the profile spells it
/// (`nanoseconds`, `bytes`), or for plain counts the sample type (`samples`,
/// `alloc_objects`, `contentions`). Folded stacks carry neither: their counts are `samples`,
/// as in `flamegraph.pl`.
pub fn value_name(sample_type: &str, unit: &str) -> String {
    match (sample_type.trim(), unit.trim()) {
        (_, u) if !u.is_empty() && u != "count" => u.to_owned(),
        (t, _) if !t.is_empty() => t.to_owned(),
        _ => "samples".to_owned(),
    }
}

/// Proleptic Gregorian `(year, month 1-12, day 1-31)` of a day count since 1970-01-01 (Howard
/// Hinnant's civil-from-days), for the dates files carry in their text: `top`'s header and the
/// exporters' object keys. Valid for every day an `i64` of seconds can reach.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_g_matches_known_renderings() {
        // Values as fmt.Sprintf("%.2g") prints them in Go.
        assert_eq!(go_g2(0.57), "0.57");
        assert_eq!(go_g2(0.5), "0.5");
        assert_eq!(go_g2(0.996), "1");
        assert_eq!(go_g2(0.0123), "0.012");
        assert_eq!(go_g2(0.00012), "0.00012");
        assert_eq!(go_g2(0.000012), "1.2e-05");
        assert_eq!(go_g2(123.0), "1.2e+02");
    }

    #[test]
    fn values_are_named_by_unit_or_counted_type() {
        assert_eq!(value_name("cpu", "nanoseconds"), "nanoseconds");
        assert_eq!(value_name("alloc_space", "bytes"), "bytes");
        assert_eq!(value_name("samples", "count"), "samples");
        assert_eq!(value_name("alloc_objects", "count"), "alloc_objects");
        assert_eq!(value_name("", ""), "samples");
    }

    #[test]
    fn labels_scale_like_pprof() {
        assert_eq!(scaled_label(10_000_000, "nanoseconds", "ms"), "10ms");
        assert_eq!(scaled_label(1_500_000_000, "nanoseconds", "s"), "1.50s");
        assert_eq!(scaled_label(1280, "bytes", "kB"), "1.25kB");
        assert_eq!(scaled_label(2_621_440, "bytes", "minimum"), "2.50MB");
        assert_eq!(scaled_label(42, "count", "count"), "42");
        assert_eq!(scaled_label(0, "nanoseconds", "s"), "0");
        assert_eq!(scaled_label(-3_000_000, "nanoseconds", "ms"), "-3ms");
        assert_eq!(percentage(1, 1), "  100%");
        assert_eq!(percentage(0, 10), "    0%");
        assert_eq!(percentage(128, 176), "72.73%");
    }
}
