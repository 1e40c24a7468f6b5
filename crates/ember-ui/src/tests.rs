//! The asset router through axum itself: content types, validators, gzip, 404s.

use super::*;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use tower::ServiceExt;

/// Status, headers and body of `GET path` with `headers`.
async fn get(path: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut req = Request::builder().uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = router::<()>()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = res.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes().to_vec();
    (parts.status, parts.headers, bytes)
}

fn text(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn the_page_is_html_with_a_policy_that_forbids_other_origins() {
    let (status, h, body) = get("/", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text(&h, header::CONTENT_TYPE), "text/html; charset=utf-8");
    let csp = text(&h, header::CONTENT_SECURITY_POLICY);
    assert!(csp.contains("default-src 'self'") && csp.contains("connect-src 'self'"));
    let html = String::from_utf8(body).unwrap();
    assert!(html.contains("<canvas"), "{html}");
    // The page names its assets relative to itself, and only assets that exist.
    for src in html
        .split("src=\"")
        .skip(1)
        .chain(html.split("href=\"").skip(1))
    {
        let path = src.split('"').next().unwrap();
        let name = path.strip_prefix("ui/").unwrap_or_else(|| panic!("{path}"));
        assert!(
            ASSETS.iter().any(|a| a.name == name),
            "{path} is not embedded"
        );
    }
}

#[tokio::test]
async fn every_asset_has_its_content_type() {
    for (path, ty) in [
        ("/ui/style.css", "text/css; charset=utf-8"),
        ("/ui/flame.js", "text/javascript; charset=utf-8"),
        ("/ui/explore.js", "text/javascript; charset=utf-8"),
        ("/ui/favicon.svg", "image/svg+xml"),
        ("/ui/index.html", "text/html; charset=utf-8"),
    ] {
        let (status, h, body) = get(path, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(text(&h, header::CONTENT_TYPE), ty, "{path}");
        assert_eq!(text(&h, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
        assert!(!body.is_empty(), "{path}");
    }
}

#[tokio::test]
async fn every_embedded_module_is_imported_by_the_page_or_another_module() {
    // boot.js (inline in the page) loads explore.js, which imports the rest.
    let all: String = ASSETS
        .iter()
        .map(|a| String::from_utf8_lossy(a.body).into_owned())
        .chain([BOOT.to_string()])
        .collect();
    for a in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
        assert!(
            all.contains(&format!("./{}", a.name)) || all.contains(&format!("ui/{}", a.name)),
            "{} is never loaded",
            a.name
        );
    }
}

#[tokio::test]
async fn unknown_assets_are_404() {
    for path in [
        "/ui/nope.js",
        "/ui/../Cargo.toml",
        "/ui/sub/flame.js",
        "/ui/%2e%2e/lib.rs",
    ] {
        let (status, h, body) = get(path, &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        assert!(
            text(&h, header::CONTENT_TYPE).starts_with("text/plain"),
            "{path}"
        );
        assert!(
            String::from_utf8_lossy(&body).contains("no UI asset"),
            "{path}"
        );
    }
    // No file name at all is not a route of the UI.
    let (status, _, _) = get("/ui/", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn etags_revalidate_and_gzip_is_a_representation_of_its_own() {
    let (_, plain, body) = get("/ui/flame.js", &[]).await;
    let etag = text(&plain, header::ETAG).to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert_eq!(text(&plain, header::CACHE_CONTROL), "no-cache");
    assert!(plain.get(header::CONTENT_ENCODING).is_none());

    let (status, h, empty) = get("/ui/flame.js", &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(empty.is_empty());
    assert_eq!(text(&h, header::ETAG), etag);
    let (status, _, _) = get("/ui/flame.js", &[("if-none-match", "\"other\"")]).await;
    assert_eq!(status, StatusCode::OK);

    let (status, h, gz) = get("/ui/flame.js", &[("accept-encoding", "br, gzip")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(text(&h, header::CONTENT_ENCODING), "gzip");
    assert_ne!(text(&h, header::ETAG), etag);
    assert!(gz.len() < body.len());
    let mut unzipped = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut unzipped).unwrap();
    assert_eq!(unzipped, body);
    // `q=0` refuses the coding.
    let (_, h, _) = get("/ui/flame.js", &[("accept-encoding", "gzip;q=0")]).await;
    assert!(h.get(header::CONTENT_ENCODING).is_none());
}

#[tokio::test]
async fn boot_js_runs_inline_and_the_policy_names_it_by_its_hash() {
    for path in ["/", "/ui/index.html"] {
        let (status, h, body) = get(path, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let html = String::from_utf8(body).unwrap();
        assert!(
            !html.contains("ui/boot.js"),
            "{path}: boot.js is still a file of its own"
        );
        // The first script of the page, before the style sheet, is boot.js's text.
        let open = html.find("<script>").expect("an inline script");
        assert!(
            open < html.find("stylesheet").unwrap(),
            "boot.js comes first"
        );
        let start = open + "<script>".len();
        let script = &html[start..start + html[start..].find("</script>").unwrap()];
        assert_eq!(script, BOOT, "{path}: the whole of boot.js, inline");
        let digest = ring::digest::digest(&ring::digest::SHA256, script.as_bytes());
        let csp = text(&h, header::CONTENT_SECURITY_POLICY);
        let source = format!("script-src 'self' 'sha256-{}';", base64(digest.as_ref()));
        assert!(csp.contains(&source), "{path}: {csp}");
        // Still no other origin, no inline script but that one.
        assert!(
            !csp.contains("unsafe-inline") && csp.contains("default-src 'self'"),
            "{csp}"
        );
    }
    let (status, _, _) = get("/ui/boot.js", &[]).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "boot.js is only served inline"
    );
}

#[test]
fn base64_is_rfc_4648s_with_padding() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
    }
    assert_eq!(base64(&[0xfb, 0xff, 0xbf]), "+/+/");
}
