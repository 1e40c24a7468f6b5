//! Who may talk to the admin endpoint, checked before any route runs.
//!
//! The agent runs as root and sees the whole host; its configuration says where every
//! profile goes. So:
//! - a request whose `Origin` is not the endpoint itself is refused (403): a web page can
//!   send a "simple" cross-origin POST (`Content-Type: text/plain`) to `127.0.0.1` with no
//!   CORS preflight, and browsers always say where it came from;
//! - on a loopback address, a request whose `Host` is a name other than `localhost` is
//!   refused (403): that is DNS rebinding, a page of `evil.example` whose name now resolves
//!   to 127.0.0.1 and whose requests are therefore "same-origin" and carry no foreign
//!   `Origin` (GETs carry none at all);
//! - with an admin token (`ember agent --admin-token-file FILE`), every `/api/v1` route needs
//!   `Authorization: Bearer <token>` (401 otherwise); `/metrics` and `/ready` stay open for
//!   scrapers and probes;
//! - without one, `/api/v1` reads stay open (the configuration is shown with its secrets
//!   redacted) and every change is refused (403) with a message saying how to enable them.
//!
//! A token rather than a Unix socket: `ember agent apply` speaks HTTP through ember-http,
//! which has no Unix socket transport, and a token file readable only by root protects the
//! endpoint like a 0600 socket would while keeping TCP (and remote administration) working.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Settings of the admin endpoint that are not part of the hot-reloadable configuration (a
/// configuration change must not be able to remove its own protection).
#[derive(Clone, Default)]
pub struct AdminOptions {
    /// The token that allows `/api/v1` requests and configuration changes; `None` keeps the
    /// configuration read-only over HTTP.
    pub token: Option<String>,
}

impl std::fmt::Debug for AdminOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminOptions")
            .field(
                "token",
                &self.token.as_ref().map(|_| crate::config::REDACTED),
            )
            .finish()
    }
}

/// Why an admin token file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    /// The file cannot be read.
    #[error("admin token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Its first line is empty.
    #[error("admin token file {path}: the first line is empty (write the token there)")]
    Empty {
        /// The file.
        path: String,
    },
}

/// Reads an admin token: the first line of `path`, trimmed. Warns when others than its
/// owner may read the file.
pub fn read_token_file(path: &Path) -> Result<String, TokenFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TokenFileError::Read {
        path: shown.clone(),
        source,
    })?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(TokenFileError::Empty { path: shown });
    }
    #[cfg(unix)]
    if let Ok(meta) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                file = %shown,
                mode = format!("{:o}", meta.permissions().mode() & 0o777),
                "the admin token file is readable by others than its owner (chmod 600 it)"
            );
        }
    }
    Ok(token)
}

/// What the guard middleware knows: the token and the address the endpoint is bound to.
#[derive(Clone)]
pub(crate) struct Guard {
    pub(crate) token: Option<String>,
    pub(crate) local: SocketAddr,
}

/// The admin endpoint's error body (the shape of configuration errors, which `ember agent
/// apply` prints).
pub(crate) fn refusal(status: StatusCode, reason: &str) -> Response {
    (
        status,
        axum::Json(serde_json::json!({"errors": [{"path": "", "reason": reason}]})),
    )
        .into_response()
}

/// The message of a change refused for want of a token.
pub(crate) const NO_TOKEN: &str = "configuration changes over HTTP are disabled: this agent was started without an admin token. Start it with `ember agent --admin-token-file FILE` (FILE holds the token on its first line; chmod 600) and send `Authorization: Bearer <token>` (`ember agent apply --admin-token-file FILE`), or edit the configuration file and send SIGHUP";

/// Constant-time comparison, so the answer time does not tell how much of a guess was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Whether `origin` (an `Origin` header) is the admin endpoint itself: `http://` with the
/// bound port and the bound address, or `localhost` when that is a loopback address. On
/// an unspecified address (`0.0.0.0`, `::`) any IP literal with the bound port is the
/// endpoint (it answers on all of them), but no other host name.
pub(crate) fn origin_allowed(origin: &str, local: SocketAddr) -> bool {
    let Some(authority) = origin.trim().strip_prefix("http://") else {
        return false; // `https://...`, `null`, `file://`: never the plain-HTTP endpoint
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((host, rest)) = v6.split_once(']') else {
            return false;
        };
        (host, rest.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().ok(),
        None => Some(80),
    };
    if port != Some(local.port()) {
        return false;
    }
    let ip = local.ip();
    if host.eq_ignore_ascii_case("localhost") {
        return ip.is_loopback() || ip.is_unspecified();
    }
    match host.parse::<IpAddr>() {
        Ok(h) if ip.is_unspecified() => !h.is_unspecified(),
        Ok(h) => h == ip,
        Err(_) => false,
    }
}

/// Whether a `Host` header may reach an endpoint bound to loopback: an IP literal, or
/// `localhost`, with any port (or none: HTTP/1.0 clients may omit it).
fn loopback_host(host: &str) -> bool {
    let name = if let Some(v6) = host.strip_prefix('[') {
        return v6
            .split_once(']')
            .is_some_and(|(ip, _)| ip.parse::<IpAddr>().is_ok());
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.is_empty() || name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok()
}

/// The middleware: Origin first (a browser's request is refused whatever it carries), then
/// the Host of a loopback endpoint, then the token on `/api/v1`, then the no-token rule for
/// changes.
pub(crate) async fn check(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    if let Some(origin) = request.headers().get("origin") {
        let origin = origin.to_str().unwrap_or("");
        if !origin_allowed(origin, guard.local) {
            tracing::warn!(origin, path = %request.uri().path(), "admin request from a foreign origin refused");
            return refusal(
                StatusCode::FORBIDDEN,
                &format!(
                    "cross-origin request refused: Origin {origin:?} is not this admin endpoint (http://{})",
                    guard.local
                ),
            );
        }
    }
    if guard.local.ip().is_loopback() {
        let host = request
            .headers()
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !loopback_host(host) {
            tracing::warn!(host, path = %request.uri().path(), "admin request for a foreign host name refused");
            return refusal(
                StatusCode::FORBIDDEN,
                &format!(
                    "Host {host:?} is not this admin endpoint (http://{}): use the address or localhost",
                    guard.local
                ),
            );
        }
    }
    let api = request.uri().path().starts_with("/api/");
    let change = request.method() != Method::GET && request.method() != Method::HEAD;
    match &guard.token {
        Some(token) if api || change => {
            let given = bearer(request.headers());
            if !given.is_some_and(|g| same_secret(g.as_bytes(), token.as_bytes())) {
                let mut r = refusal(
                    StatusCode::UNAUTHORIZED,
                    if given.is_some() {
                        "wrong admin token"
                    } else {
                        "this admin endpoint needs `Authorization: Bearer <token>` (the token of --admin-token-file)"
                    },
                );
                r.headers_mut()
                    .insert("www-authenticate", "Bearer".parse().expect("static"));
                return r;
            }
        }
        None if change => return refusal(StatusCode::FORBIDDEN, NO_TOKEN),
        _ => {}
    }
    next.run(request).await
}

/// The 415 for a configuration whose `Content-Type` is not JSON or YAML (what a form or
/// `text/plain` sends, or none); `None` when it is.
pub(crate) fn refuse_content_type(headers: &HeaderMap) -> Option<Response> {
    let value = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if matches!(
        mime.as_str(),
        "application/json"
            | "application/yaml"
            | "application/x-yaml"
            | "text/yaml"
            | "text/x-yaml"
    ) {
        return None;
    }
    Some(refusal(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        &format!(
            "Content-Type {value:?} is not accepted: send the configuration as application/yaml or application/json"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let lo: SocketAddr = "127.0.0.1:4041".parse().unwrap();
        assert!(origin_allowed("http://127.0.0.1:4041", lo));
        assert!(origin_allowed("http://localhost:4041", lo));
        assert!(origin_allowed("http://LOCALHOST:4041", lo));
        for foreign in [
            "http://evil.example",
            "http://evil.example:4041",
            "https://127.0.0.1:4041",
            "http://127.0.0.1:4042",
            "http://127.0.0.1",
            "http://127.0.0.2:4041",
            "null",
            "",
        ] {
            assert!(!origin_allowed(foreign, lo), "{foreign}");
        }
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        assert!(origin_allowed("http://[::1]", v6));
        assert!(origin_allowed("http://localhost", v6));
        let any: SocketAddr = "0.0.0.0:4041".parse().unwrap();
        assert!(origin_allowed("http://10.1.2.3:4041", any));
        assert!(!origin_allowed("http://rebind.example:4041", any));
        let public: SocketAddr = "10.1.2.3:4041".parse().unwrap();
        assert!(!origin_allowed("http://localhost:4041", public));
    }

    #[test]
    fn hosts_on_loopback() {
        for ok in [
            "127.0.0.1:4041",
            "localhost:4041",
            "LocalHost",
            "[::1]:4041",
            "",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:4041",
            "evil.example",
            "127.0.0.1.nip.io:4041",
            "[evil]:1",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_and_types() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer  tok ".parse().unwrap());
        assert_eq!(bearer(&h), Some("tok"));
        h.insert(
            "content-type",
            "application/yaml; charset=utf-8".parse().unwrap(),
        );
        assert!(refuse_content_type(&h).is_none());
        h.insert("content-type", "text/plain".parse().unwrap());
        assert!(refuse_content_type(&h).is_some());
        h.remove("content-type");
        assert!(refuse_content_type(&h).is_some());
    }
}
