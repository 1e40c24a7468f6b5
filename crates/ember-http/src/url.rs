//! URL helpers every caller needs the same way: accept only `http://` and `https://` URLs with
//! a host, append an API path to a server's base URL (keeping its path prefix), and name a
//! server `host:port` (the Prometheus `instance` convention).

pub use reqwest::Url;

use crate::HttpError;

/// Parses an `http://` or `https://` URL with a host; anything else is
/// [`HttpError::InvalidUrl`] saying why. `user:password@` is refused: credentials go in a
/// bearer token, not in URLs that end up in logs.
pub fn parse_url(url: &str) -> Result<Url, HttpError> {
    let bad = |reason: &str| HttpError::InvalidUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("must start with http:// or https://"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("user:password@ is not supported: use a bearer token"));
    }
    Ok(parsed)
}

/// `base` with `path` appended to its path, one `/` between them, so a server behind a path
/// prefix (`https://host/ember/`) keeps it; a query in `path` (`/x?y=1`) becomes the query.
/// (`Url::join` would instead replace the last path segment.)
pub fn join_url(base: &Url, path: &str) -> Url {
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut joined = base.clone();
    let prefix = base.path().trim_end_matches('/');
    joined.set_path(&format!("{prefix}/{}", path.trim_start_matches('/')));
    joined.set_query(query);
    joined
}

/// `host:port` of a URL, with the scheme's default port when none is given and IPv6
/// addresses in brackets (`[::1]:80`).
pub fn host_port(url: &Url) -> String {
    let port = url.port_or_known_default().unwrap_or(0);
    // host_str() already brackets IPv6 addresses.
    format!("{}:{port}", url.host_str().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_joined_and_named() {
        let u = parse_url("http://localhost:4040").unwrap();
        assert_eq!(host_port(&u), "localhost:4040");
        assert_eq!(
            join_url(&u, "/push.v1.PusherService/Push").as_str(),
            "http://localhost:4040/push.v1.PusherService/Push"
        );
        let u = parse_url("https://ember.example/base/").unwrap();
        assert_eq!(host_port(&u), "ember.example:443");
        assert_eq!(
            join_url(&u, "push?x=1").as_str(),
            "https://ember.example/base/push?x=1"
        );
        let u = parse_url("http://[::1]:81/debug/pprof/profile?seconds=14").unwrap();
        assert_eq!(host_port(&u), "[::1]:81");
        assert_eq!(
            host_port(&parse_url("http://10.0.0.1/x").unwrap()),
            "10.0.0.1:80"
        );
        for bad in [
            "localhost:4040",
            "ftp://x",
            "http://:80",
            "http://h:99999",
            "http://u@h",
            "http://u:p@h/",
            "no url",
        ] {
            assert!(parse_url(bad).is_err(), "{bad} accepted");
        }
        let e = parse_url("ftp://h").unwrap_err().to_string();
        assert!(e.contains("http://"), "{e}");
    }
}
