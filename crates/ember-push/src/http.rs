//! A deliberately small HTTP/1.1 client (hyper's connection API over tokio): one connection
//! per request, a whole-request timeout and a response size cap. Pushing every few seconds
//! and scraping a handful of targets do not need pooling, and this keeps the dependency tree
//! to what the server already builds. `https://` goes through rustls with the ring provider
//! (the TLS stack the bucket exporters already link), verifying the server against the system
//! roots or a given CA file ([`TlsConfig`]).

use std::path::Path;
use std::sync::{Arc, OnceLock};
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
    /// TLS setup or handshake failed (bad CA file, untrusted certificate, wrong name...).
    #[error("TLS: {0}")]
    Tls(String),
}

/// Trust settings of `https://` requests.
#[derive(Clone)]
pub struct TlsConfig {
    config: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig").finish_non_exhaustive()
    }
}

impl TlsConfig {
    /// Trusts the certificates of the PEM file `ca_file` (e.g. a self-signed server
    /// certificate or a private CA) or, without one, the system's root certificates.
    pub fn new(ca_file: Option<&Path>) -> Result<TlsConfig, HttpError> {
        use rustls_pki_types::CertificateDer;
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        match ca_file {
            Some(path) => {
                let shown = path.display();
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| HttpError::Tls(format!("CA file {shown}: {e}")))?;
                for cert in certs {
                    let cert = cert.map_err(|e| HttpError::Tls(format!("CA file {shown}: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| HttpError::Tls(format!("CA file {shown}: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(HttpError::Tls(format!(
                        "CA file {shown} holds no PEM certificate"
                    )));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(HttpError::Tls(
                        "no system root certificates found: give a CA file".into(),
                    ));
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| HttpError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsConfig {
            config: Arc::new(config),
        })
    }

    /// The system-roots configuration, built once per process.
    fn system() -> Result<TlsConfig, HttpError> {
        static SYSTEM: OnceLock<Result<TlsConfig, String>> = OnceLock::new();
        SYSTEM
            .get_or_init(|| TlsConfig::new(None).map_err(|e| e.to_string()))
            .clone()
            .map_err(HttpError::Tls)
    }
}

/// A parsed `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// `https://`.
    pub tls: bool,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port (80, or 443 for https, when not given).
    pub port: u16,
    /// Path and query, starting with `/` (the base path for a server URL).
    pub path: String,
}

impl Url {
    /// Parses `http[s]://host[:port][/path][?query]`.
    pub fn parse(url: &str) -> Result<Url, HttpError> {
        let bad = |reason: &str| HttpError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let (tls, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else {
            return Err(bad("must start with http:// or https://"));
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
            None if tls => 443,
            None => 80,
        };
        Ok(Url {
            tls,
            host,
            port,
            path,
        })
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
            tls: self.tls,
            host: self.host.clone(),
            port: self.port,
            path: format!("{base}/{suffix}"),
        }
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority(), self.path)
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
/// `https://` URLs trust the system roots.
pub async fn request(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    timeout: Duration,
    max_body: usize,
) -> Result<Response, HttpError> {
    request_tls(method, url, headers, body, timeout, max_body, None).await
}

/// [`request`] with the trust settings of `https://` URLs (`None`: the system roots).
pub async fn request_tls(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    timeout: Duration,
    max_body: usize,
    tls: Option<&TlsConfig>,
) -> Result<Response, HttpError> {
    let exchange = async {
        let addr = url.authority();
        let stream = tokio::net::TcpStream::connect((url.host.as_str(), url.port))
            .await
            .map_err(|source| HttpError::Connect {
                addr: addr.clone(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        if !url.tls {
            return exchange(stream, method, url, headers, body, max_body).await;
        }
        let config = match tls {
            Some(t) => t.clone(),
            None => TlsConfig::system()?,
        };
        let name = rustls_pki_types::ServerName::try_from(url.host.clone())
            .map_err(|e| HttpError::Tls(format!("server name {:?}: {e}", url.host)))?;
        let stream = tokio_rustls::TlsConnector::from(config.config)
            .connect(name, stream)
            .await
            .map_err(|e| HttpError::Tls(format!("handshake with {addr}: {e}")))?;
        exchange(stream, method, url, headers, body, max_body).await
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(HttpError::Timeout(timeout)),
    }
}

async fn exchange<S>(
    stream: S,
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    max_body: usize,
) -> Result<Response, HttpError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let addr = url.authority();
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
        assert_eq!(u.to_string(), "http://[::1]:81/?x=1");
        assert_eq!(
            Url::parse("http://h:1/base/").unwrap().join("/push").path,
            "/base/push"
        );
        let u = Url::parse("https://ember.example/base").unwrap();
        assert!(u.tls);
        assert_eq!((u.port, u.path.as_str()), (443, "/base"));
        assert_eq!(
            u.join("push").to_string(),
            "https://ember.example:443/base/push"
        );
        assert!(!Url::parse("http://h").unwrap().tls);
        for bad in [
            "localhost:4040",
            "ftp://x",
            "http://:80",
            "http://h:99999",
            "http://u@h",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
