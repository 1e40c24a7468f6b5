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
//! The page runs `boot.js` before anything else, and inline: `page` puts the script's text in
//! place of its `<script src="ui/boot.js">` tag and names it by its SHA-256 in the policy's
//! `script-src`, so the first requests of the view leave without waiting for a round trip.
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
    asset!("api.js", JS),
    asset!("format.js", JS),
    asset!("state.js", JS),
    asset!("explore.js", JS),
    asset!("selector.js", JS),
    asset!("timeseries.js", JS),
    asset!("flame.js", JS),
    asset!("flamedraw.js", JS),
    asset!("diffcolour.js", JS),
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

/// The script the page runs first (its first requests and its first drawing), inlined into
/// the page by `page`; never served as a file of its own.
const BOOT: &str = include_str!("../assets/boot.js");

/// The tag of `index.html` that `page` replaces with [`BOOT`]'s text.
const BOOT_TAG: &str = r#"<script src="ui/boot.js"></script>"#;

/// The page may load scripts, styles and images from its own origin only and talk to its
/// own origin only: a UI that reaches for a CDN fails loudly instead of leaking requests. The
/// one inline script it may run is boot.js, named by its hash (`'sha256-…'` is added to
/// `script-src` by `page`).
const CSP: &str = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; \
                   script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
                   frame-ancestors 'self'";

/// The page as served: `index.html` with boot.js inline, and the policy that lets exactly that
/// script run (`script-src 'self' 'sha256-…'`).
fn page() -> &'static (String, String) {
    static PAGE: OnceLock<(String, String)> = OnceLock::new();
    PAGE.get_or_init(|| {
        let html = std::str::from_utf8(ASSETS[0].body).unwrap_or_default();
        // The script's text ends at the first `</script`: boot.js must not contain one (a
        // test checks), or the page would run only part of it.
        let inline = format!("<script>{BOOT}</script>");
        let page = html.replacen(BOOT_TAG, &inline, 1);
        let hash = ring::digest::digest(&ring::digest::SHA256, BOOT.as_bytes());
        let policy = CSP.replacen(
            "script-src 'self'",
            &format!("script-src 'self' 'sha256-{}'", base64(hash.as_ref())),
            1,
        );
        (page, policy)
    })
}

/// Standard base64 with padding (RFC 4648), as a CSP hash source is written.
fn base64(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(DIGITS[((n >> (18 - 6 * k)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An asset ready to serve: its bytes (the page's with boot.js inline), its strong validator
/// and, for text, its gzip'd bytes.
#[derive(Debug)]
struct Prepared {
    body: &'static [u8],
    etag: String,
    gzip: Option<Vec<u8>>,
}

fn prepared() -> &'static [Prepared] {
    static PREPARED: OnceLock<Vec<Prepared>> = OnceLock::new();
    PREPARED.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let body = match a.name {
                    "index.html" => page().0.as_bytes(),
                    _ => a.body,
                };
                Prepared {
                    etag: format!("\"{:016x}\"", fnv1a(body)),
                    gzip: (a.content_type.starts_with("text/") || a.content_type.contains("svg"))
                        .then(|| gzip(body)),
                    body,
                }
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

/// The comma-separated items of every `name` header (`Accept-Encoding: gzip, br` and a second
/// `Accept-Encoding` line are one list), untrimmed; values that are not text are skipped.
fn list_items<'a>(
    headers: &'a HeaderMap,
    name: header::HeaderName,
) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
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
    let accepts_gzip = list_items(headers, header::ACCEPT_ENCODING).any(|coding| {
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
    let fresh = list_items(headers, header::IF_NONE_MATCH).any(|t| {
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
            HeaderValue::from_str(&page().1).unwrap_or_else(|_| HeaderValue::from_static(CSP)),
        );
    }
    match gz {
        Some(body) => {
            out.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            (out, body.to_vec()).into_response()
        }
        None => (out, prep.body).into_response(),
    }
}

#[cfg(test)]
mod tests;
