//! Ember's web UI: the static page, style sheet and JavaScript modules, embedded in the binary
//! with `include_bytes!`, and the axum routes that serve them (`GET /` is the page, `GET
//! /ui/{file}` the assets).
//!
//! The UI is plain HTML, CSS and ES modules written for Ember: no framework, no bundler, so
//! `cargo build` alone builds it and the binary serves it offline (no CDN, no external fonts;
//! the `Content-Security-Policy` sent with the page forbids any other origin). Every figure
//! the page shows comes from the server's JSON API (`/api/v1/*`): this crate holds no query
//! logic and knows nothing of profiles.
//!
//! Caching: every answer carries a strong `ETag` (a hash of the file) and `Cache-Control:
//! no-cache`, so a browser revalidates (a `304 Not Modified` with no body) and never runs a
//! stale script after an upgrade. Text assets are sent gzip'd to clients that accept it (each
//! compressed once, on first use).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

use std::sync::OnceLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// One embedded file.
#[derive(Debug)]
struct Asset {
    /// Name under `/ui/`.
    name: &'static str,
    /// `Content-Type`.
    content_type: &'static str,
    /// The bytes as written in `assets/`.
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("../assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the UI. `index.html` is also the page at `/`.
static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("boot.js", JS),
    asset!("api.js", JS),
    asset!("format.js", JS),
    asset!("state.js", JS),
    asset!("explore.js", JS),
    asset!("selector.js", JS),
    asset!("timeseries.js", JS),
    asset!("flame.js", JS),
    asset!("flamedraw.js", JS),
    asset!("top.js", JS),
    asset!("sandwich.js", JS),
    asset!("compare.js", JS),
    asset!("movers.js", JS),
    asset!("callgraph.js", JS),
    asset!("profile.js", JS),
    asset!("export.js", JS),
    asset!("keys.js", JS),
    asset!("theme.js", JS),
    asset!("hints.js", JS),
    asset!("filters.js", JS),
];

/// The page may load scripts, styles and images from its own origin only and talk to its
/// own origin only: a UI that reaches for a CDN fails loudly instead of leaking requests.
const CSP: &str = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; \
                   script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
                   frame-ancestors 'self'";

/// An asset ready to serve: its strong validator and, for text, its gzip'd bytes.
#[derive(Debug)]
struct Prepared {
    etag: String,
    gzip: Option<Vec<u8>>,
}

fn prepared() -> &'static [Prepared] {
    static PREPARED: OnceLock<Vec<Prepared>> = OnceLock::new();
    PREPARED.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| Prepared {
                etag: format!("\"{:016x}\"", fnv1a(a.body)),
                gzip: (a.content_type.starts_with("text/") || a.content_type.contains("svg"))
                    .then(|| gzip(a.body)),
            })
            .collect()
    })
}

/// 64-bit FNV-1a: a stable content hash for `ETag` (not a security boundary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing into a Vec cannot fail.
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}

/// The UI's routes: `GET /` (the page) and `GET /ui/{file}` (its assets; 404 for any other
/// name). Generic over the state so a server can merge it into its own router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/ui/{*file}", get(file))
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

/// The answer for asset `name` to a request with `headers`: the file (gzip'd when accepted),
/// a 304 when the client's `If-None-Match` holds its `ETag`, or a plain-text 404.
fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("no UI asset {name:?}\n"),
        )
            .into_response();
    };
    let (asset, prep) = (&ASSETS[i], &prepared()[i]);
    let accepts_gzip = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00"));
            name.eq_ignore_ascii_case("gzip") && !refused
        });
    let gz = prep.gzip.as_deref().filter(|_| accepts_gzip);
    // The two encodings are two representations: each gets its own validator.
    let etag = match gz {
        Some(_) => format!("{}-gz\"", prep.etag.trim_end_matches('"')),
        None => prep.etag.clone(),
    };
    let mut out = HeaderMap::new();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    out.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(&etag) {
        out.insert(header::ETAG, v);
    }
    let fresh = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t.trim_start_matches("W/") == etag
        });
    if fresh {
        return (StatusCode::NOT_MODIFIED, out).into_response();
    }
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    if asset.name == "index.html" {
        out.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    match gz {
        Some(body) => {
            out.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            (out, body.to_vec()).into_response()
        }
        None => (out, asset.body).into_response(),
    }
}

#[cfg(test)]
mod tests;
