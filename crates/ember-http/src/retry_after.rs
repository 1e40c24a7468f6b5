//! `Retry-After` (RFC 9110 §10.2.3): either a number of seconds or an HTTP date.

use std::time::{Duration, SystemTime};

/// The delay a `Retry-After` header value asks for, measured from `now`: `120` (seconds;
/// a fraction such as `1.5` is accepted too, as some servers send one) or an HTTP date
/// (`Wed, 21 Oct 2015 07:28:00 GMT`, a date already past meaning "now", i.e. zero).
/// `None` when the value is neither. The result is not capped: callers bound it to what
/// they are willing to wait.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let seconds: f64 = value.parse().ok()?;
        // Bounded so the conversion cannot overflow; a day is far beyond any sane wait.
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(86_400.0 * 365.0)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 07:28:00
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        // In the past: retry now.
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        for bad in ["", "soon", "-5", "1e3", "Wed, 32 Oct 2015"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad}");
        }
    }
}
