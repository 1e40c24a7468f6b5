//! A deliberately small HTTP/1.1 client (hyper's connection API over tokio): one connection
//! per request, a whole-request timeout and a response size cap. Pushing every few seconds
//! and scraping a handful of targets do not need pooling, and this keeps the dependency tree
//! to what the server already builds. Plain `http://` only.

use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;

/// Errors of one HTTP exchange.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL is not an `http://host[:port][/path]` URL.
    #[error("invalid URL {url:?}: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// TCP connect failed (refused, unreachable, DNS).
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The whole exchange took longer than the timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The HTTP exchange failed after connecting.
    #[error("HTTP error: {0}")]
    Protocol(String),
    /// The response body was larger than allowed.
    #[error("response body larger than {0} bytes")]
    TooLarge(usize),
}

/// A parsed `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port (80 when not given).
    pub port: u16,
    /// Path and query, starting with `/` (the base path for a server URL).
    pub path: String,
}

impl Url {
    /// Parses `http://host[:port][/path][?query]`.
    pub fn parse(url: &str) -> Result<Url, HttpError> {
        let bad = |reason: &str| HttpError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let rest = if let Some(rest) = url.strip_prefix("http://") {
            rest
        } else if url.starts_with("https://") {
            return Err(bad(
                "https is not supported by this build: use http:// (e.g. behind a local TLS proxy)",
            ));
        } else {
            return Err(bad("must start with http://"));
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        if authority.contains('@') {
            return Err(bad("user:password@ is not supported: use a bearer token"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let end = v6.find(']').ok_or_else(|| bad("unclosed [ in IPv6 host"))?;
            let port = match &v6[end + 1..] {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ]"))?),
            };
            (v6[..end].to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p.parse().map_err(|_| bad("port is not a number 0-65535"))?,
            None => 80,
        };
        Ok(Url { host, port, path })
    }

    /// `host:port` as used in the `Host` header and for connecting.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// This URL with `suffix` appended to its path (one `/` between them).
    pub fn join(&self, suffix: &str) -> Url {
        let base = self.path.trim_end_matches('/');
        let suffix = suffix.trim_start_matches('/');
        Url {
            host: self.host.clone(),
            port: self.port,
            path: format!("{base}/{suffix}"),
        }
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority(), self.path)
    }
}

/// A received response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// First value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request and reads the whole response (at most `max_body` bytes) within `timeout`.
pub async fn request(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    timeout: Duration,
    max_body: usize,
) -> Result<Response, HttpError> {
    match tokio::time::timeout(timeout, exchange(method, url, headers, body, max_body)).await {
        Ok(result) => result,
        Err(_) => Err(HttpError::Timeout(timeout)),
    }
}

async fn exchange(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    max_body: usize,
) -> Result<Response, HttpError> {
    let addr = url.authority();
    let stream = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|source| HttpError::Connect {
            addr: addr.clone(),
            source,
        })?;
    let _ = stream.set_nodelay(true);
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| HttpError::Protocol(e.to_string()))?;
    // The connection future drives the socket; it ends when the exchange is over.
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(url.path.as_str())
        .header("host", addr.as_str())
        .header("user-agent", concat!("ember/", env!("CARGO_PKG_VERSION")));
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| HttpError::Protocol(e.to_string()))?;
    let result = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| HttpError::Protocol(e.to_string()))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = Limited::new(response.into_body(), max_body)
            .collect()
            .await
            .map_err(|e| {
                if e.is::<http_body_util::LengthLimitError>() {
                    HttpError::TooLarge(max_body)
                } else {
                    HttpError::Protocol(e.to_string())
                }
            })?
            .to_bytes()
            .to_vec();
        Ok(Response {
            status,
            headers,
            body,
        })
    }
    .await;
    driver.abort();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let u = Url::parse("http://localhost:4040").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("localhost", 4040, "/")
        );
        let u = Url::parse("http://10.0.0.1/debug/pprof/profile?seconds=14").unwrap();
        assert_eq!(u.port, 80);
        assert_eq!(u.path, "/debug/pprof/profile?seconds=14");
        let u = Url::parse("http://[::1]:81?x=1").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("::1", 81, "/?x=1")
        );
        assert_eq!(u.authority(), "[::1]:81");
        assert_eq!(
            Url::parse("http://h:1/base/").unwrap().join("/push").path,
            "/base/push"
        );
        for bad in [
            "localhost:4040",
            "https://x",
            "http://:80",
            "http://h:99999",
            "http://u@h",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
