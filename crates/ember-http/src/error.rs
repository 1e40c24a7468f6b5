//! The errors of [`crate::Client`]: each names the URL it concerns, so a caller can log or
//! show it without adding context.

use std::path::PathBuf;
use std::time::Duration;

/// Why a request (or building a client) failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL cannot be parsed or is not `http://` / `https://`.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A header name or value is not valid HTTP.
    #[error("invalid header {name:?}: {reason}")]
    InvalidHeader {
        /// The header name as given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The CA file cannot be read or holds no usable PEM certificate.
    #[error("CA file {}: {reason}", path.display())]
    CaFile {
        /// The file as configured.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The proxy URL is not usable.
    #[error("invalid proxy {url:?}: {reason}")]
    Proxy {
        /// The proxy URL as configured.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be set up (TLS configuration, resolver).
    #[error("cannot set up the HTTP client: {0}")]
    Setup(String),
    /// No TCP (or TLS, or proxy) connection could be made: refused, unreachable, DNS, an
    /// untrusted certificate.
    #[error("cannot connect to {url}: {detail}")]
    Connect {
        /// The request URL.
        url: String,
        /// The cause, with its chain of sources.
        detail: String,
    },
    /// The TLS handshake failed: an untrusted or expired certificate, a name mismatch, no
    /// common protocol version.
    #[error("{url}: TLS handshake failed: {detail}")]
    Tls {
        /// The request URL.
        url: String,
        /// The cause, with its chain of sources.
        detail: String,
    },
    /// The exchange did not complete within its time limit.
    #[error("{url}: timed out after {after:?}")]
    Timeout {
        /// The request URL.
        url: String,
        /// The limit that fired: the request timeout, the connect timeout when connecting,
        /// or the read timeout when the server paused longer than that.
        after: Duration,
    },
    /// The exchange failed after connecting (connection reset, malformed answer, too many
    /// redirects).
    #[error("{url}: {detail}")]
    Transport {
        /// The request URL.
        url: String,
        /// The cause, with its chain of sources.
        detail: String,
    },
    /// The response body is larger than the caller allows; reading stopped there.
    #[error("{url}: response body larger than {limit} bytes")]
    TooLarge {
        /// The request URL.
        url: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// The server answered with a status other than 2xx.
    #[error("{url} answered {status}: {excerpt}")]
    Status {
        /// The request URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The server's `Retry-After`, for 429 and 503 answers that carry one.
        retry_after: Option<Duration>,
        /// The start of the body (at most [`HttpError::EXCERPT_CHARS`] characters), or
        /// `(empty body)`.
        excerpt: String,
    },
    /// A download's consumer (the caller's sink) failed; the transfer was abandoned.
    #[error("{url}: writing the body failed: {source}")]
    Sink {
        /// The request URL.
        url: String,
        /// The consumer's error.
        #[source]
        source: std::io::Error,
    },
    /// The [`crate::BlockingClient`]'s worker thread is gone (it panicked).
    #[error("the HTTP worker thread stopped")]
    WorkerGone,
}

impl HttpError {
    /// Most characters of a response body quoted in [`HttpError::Status`].
    pub const EXCERPT_CHARS: usize = 300;

    /// The HTTP status of a [`HttpError::Status`], else `None`.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the same request may succeed later: connection failures, timeouts, broken
    /// exchanges, and the statuses that mean "not now" (408, 429, 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            HttpError::Connect { .. } | HttpError::Timeout { .. } => true,
            HttpError::Transport { .. } => true,
            HttpError::Status { status, .. } => *status == 408 || *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// The body text quoted in errors: trimmed, lossy UTF-8, at most [`HttpError::EXCERPT_CHARS`]
/// characters (with `...` when cut).
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return "(empty body)".into();
    }
    let mut chars = trimmed.chars();
    let head: String = chars.by_ref().take(HttpError::EXCERPT_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}...")
    } else {
        head
    }
}

/// Whether a rustls error is somewhere in the chain. An `io::Error` is looked into with
/// `get_ref()` (its `source()` skips the error it wraps, and connectors nest them).
pub(crate) fn is_tls(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<rustls::Error>() {
            return true;
        }
        next = match e.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}

/// A reqwest error and its sources as one line: reqwest's own message ("error sending
/// request") says little; the cause (refused, certificate unknown) is in the chain.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_trimmed_and_bounded() {
        assert_eq!(excerpt(b"  hi \n"), "hi");
        assert_eq!(excerpt(b""), "(empty body)");
        let long = "x".repeat(1000);
        let e = excerpt(long.as_bytes());
        assert_eq!(e.chars().count(), HttpError::EXCERPT_CHARS + 3);
        assert!(e.ends_with("..."));
    }

    #[test]
    fn transient_statuses() {
        let status = |status| HttpError::Status {
            url: "http://x/".into(),
            status,
            retry_after: None,
            excerpt: String::new(),
        };
        assert!(status(429).is_transient());
        assert!(status(503).is_transient());
        assert!(status(408).is_transient());
        assert!(!status(400).is_transient());
        assert!(!status(404).is_transient());
        assert_eq!(status(404).status(), Some(404));
    }
}
