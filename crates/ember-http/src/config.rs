//! [`ClientConfig`] and how it becomes a reqwest client: the TLS trust (system roots plus a CA
//! file, ring provider), proxies, timeouts and default headers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::HttpError;

/// Default time to establish a connection (TCP, proxy and TLS handshake): 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time for a whole exchange, connecting to the last body byte: 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default largest response body read into memory: 16 MiB.
pub const DEFAULT_MAX_BODY: u64 = 16 << 20;
/// The `User-Agent` Ember sends by default: `ember/<version>`.
pub const USER_AGENT: &str = concat!("ember/", env!("CARGO_PKG_VERSION"));

/// Settings of a [`crate::Client`]. Every field has a documented default
/// ([`ClientConfig::default`]); build one with `..ClientConfig::default()`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Time to establish a connection ([`DEFAULT_CONNECT_TIMEOUT`], 10 s).
    pub connect_timeout: Duration,
    /// Time for a whole exchange, body included ([`DEFAULT_TIMEOUT`], 30 s); a request can
    /// set its own ([`crate::Request::timeout`]).
    pub timeout: Duration,
    /// Longest silence between two reads of a response (none by default): lets a long
    /// download run as long as data keeps coming.
    pub read_timeout: Option<Duration>,
    /// `User-Agent` header ([`USER_AGENT`], `ember/<version>`).
    pub user_agent: String,
    /// PEM file of extra certificates to trust for `https://` (a private CA or a server's
    /// self-signed certificate), in addition to the system's roots (none by default).
    pub ca_file: Option<PathBuf>,
    /// Proxy for every request, e.g. `http://proxy:3128` (none by default). `NO_PROXY` still
    /// exempts hosts, as with curl.
    pub proxy: Option<String>,
    /// Whether to honour `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (and their
    /// lowercase forms) as curl does, when [`ClientConfig::proxy`] is not set (true).
    pub env_proxy: bool,
    /// Token sent as `Authorization: Bearer <token>` on every request (none by default).
    pub bearer_token: Option<String>,
    /// Headers sent on every request, e.g. `X-Scope-OrgID` (none by default).
    pub headers: Vec<(String, String)>,
    /// Largest response body read into memory ([`DEFAULT_MAX_BODY`], 16 MiB); a request can
    /// set its own ([`crate::Request::max_body`]).
    pub max_body: u64,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            timeout: DEFAULT_TIMEOUT,
            read_timeout: None,
            user_agent: USER_AGENT.to_string(),
            ca_file: None,
            proxy: None,
            env_proxy: true,
            bearer_token: None,
            headers: Vec::new(),
            max_body: DEFAULT_MAX_BODY,
        }
    }
}

/// Installs rustls' *ring* provider as the process default, once; later calls (and a provider
/// installed by someone else first) are fine. Ember's clients pass ring explicitly, but other
/// rustls users in the process (object_store's reqwest) look for the process default and
/// must never fall back to aws-lc.
pub fn install_ring_provider() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // Err means a provider is already installed: that one stays, which is what we want.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Reads the certificates of a PEM file (a CA bundle or a single certificate). Fails when the
/// file cannot be read, is not PEM, or holds no certificate: configuration checks call this to
/// report a bad file at start.
pub fn load_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, HttpError> {
    let bad = |reason: String| HttpError::CaFile {
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("holds no PEM certificate".into()));
    }
    Ok(certs)
}

/// The system's root certificates, loaded once per process (reading the system store takes
/// milliseconds and every client needs the same set).
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::debug!(error = %error, "could not load a system root certificate");
        }
        if found.certs.is_empty() {
            tracing::warn!(
                "no system root certificates found: https needs a CA file (ca_file) to verify servers"
            );
        }
        found.certs
    })
}

/// The rustls configuration: ring, TLS 1.2 and 1.3, the system roots plus `ca_file`, ALPN for
/// HTTP/2 and HTTP/1.1. Built here rather than by reqwest so that trust works the same in
/// every environment (reqwest's platform verifier refuses to start without system roots,
/// even for plain http).
fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, HttpError> {
    let mut roots = rustls::RootCertStore::empty();
    let (_added, ignored) = roots.add_parsable_certificates(system_roots().iter().cloned());
    if ignored > 0 {
        tracing::debug!(ignored, "system root certificates rustls cannot use");
    }
    if let Some(path) = ca_file {
        for cert in load_ca_file(path)? {
            roots.add(cert).map_err(|e| HttpError::CaFile {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpError::Setup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A header name and value checked as HTTP.
pub(crate) fn header_pair(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), HttpError> {
    let bad = |reason: String| HttpError::InvalidHeader {
        name: name.to_string(),
        reason,
    };
    let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(e.to_string()))?;
    let header_value = HeaderValue::from_str(value).map_err(|e| bad(e.to_string()))?;
    Ok((header_name, header_value))
}

/// The `Authorization` value of a bearer token, marked sensitive (kept out of debug output).
pub(crate) fn bearer(token: &str) -> Result<HeaderValue, HttpError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim())).map_err(|e| {
        HttpError::InvalidHeader {
            name: "authorization".into(),
            reason: e.to_string(),
        }
    })?;
    value.set_sensitive(true);
    Ok(value)
}

impl ClientConfig {
    /// The reqwest client these settings describe.
    pub(crate) fn build(&self) -> Result<reqwest::Client, HttpError> {
        install_ring_provider();
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let (name, value) = header_pair(name, value)?;
            headers.append(name, value);
        }
        if let Some(token) = self
            .bearer_token
            .as_deref()
            .filter(|t| !t.trim().is_empty())
        {
            headers.insert(reqwest::header::AUTHORIZATION, bearer(token)?);
        }
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config(self.ca_file.as_deref())?)
            .connect_timeout(self.connect_timeout)
            .timeout(self.timeout)
            .user_agent(self.user_agent.as_str())
            .default_headers(headers);
        if let Some(t) = self.read_timeout {
            builder = builder.read_timeout(t);
        }
        builder = match (&self.proxy, self.env_proxy) {
            (Some(url), _) => {
                let proxy = reqwest::Proxy::all(url.as_str()).map_err(|e| HttpError::Proxy {
                    url: url.clone(),
                    reason: crate::error::chain(&e),
                })?;
                builder.proxy(proxy.no_proxy(reqwest::NoProxy::from_env()))
            }
            // reqwest reads the proxy variables itself (its "system" proxy on Linux).
            (None, true) => builder,
            (None, false) => builder.no_proxy(),
        };
        builder
            .build()
            .map_err(|e| HttpError::Setup(crate::error::chain(&e)))
    }
}
