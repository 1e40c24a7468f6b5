//! The client against real servers on loopback: plain http, https with a private CA, body
//! caps, timeouts, proxies (explicit and from the environment), status errors with
//! `Retry-After`, and the blocking wrapper inside and outside a runtime.

mod support;

use std::time::{Duration, Instant};

use ember_http::{BlockingClient, Client, ClientConfig, HttpError, Request};
use support::{BIG, Proxy, serve_http, serve_https, serve_raw, temp_certs};

/// Settings for loopback tests: no proxy from the environment (a developer's HTTP_PROXY must
/// not capture 127.0.0.1).
fn local() -> ClientConfig {
    ClientConfig {
        env_proxy: false,
        ..ClientConfig::default()
    }
}

/// `GET {base}/hello` through `client` answers `hello`.
async fn assert_hello(client: &Client, base: &str) {
    let body = client
        .get_bytes(&format!("{base}/hello"), 100)
        .await
        .unwrap();
    assert_eq!(&body[..], b"hello");
}

#[tokio::test]
async fn get_and_post_with_headers() {
    let base = serve_http().await;
    let client = Client::new(&ClientConfig {
        bearer_token: Some("s3cret".into()),
        headers: vec![("X-Scope-OrgID".into(), "tenant-a".into())],
        ..local()
    })
    .unwrap();
    assert_hello(&client, &base).await;

    let request = Request::post(format!("{base}/echo"), b"\x1f\x8bdata".to_vec())
        .content_type("application/x-protobuf")
        .content_encoding("gzip");
    let response = client.fetch(request).await.unwrap();
    assert_eq!(response.status, 200);
    assert_eq!(&response.body[..], b"\x1f\x8bdata");
    let seen = |name: &str| response.header(&format!("x-seen-{name}")).map(String::from);
    assert_eq!(
        seen("content-type").as_deref(),
        Some("application/x-protobuf")
    );
    assert_eq!(seen("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(seen("authorization").as_deref(), Some("Bearer s3cret"));
    assert_eq!(seen("x-scope-orgid").as_deref(), Some("tenant-a"));
    assert_eq!(seen("user-agent").as_deref(), Some(ember_http::USER_AGENT));
    assert!(ember_http::USER_AGENT.starts_with("ember/"));

    // A request's own token replaces the client's.
    let response = client
        .send(Request::post(format!("{base}/echo"), "x").bearer_token("other"))
        .await
        .unwrap();
    assert_eq!(
        response.header("x-seen-authorization"),
        Some("Bearer other")
    );
}

#[tokio::test]
async fn bodies_larger_than_the_cap_are_refused() {
    let base = serve_http().await;
    let client = Client::new(&local()).unwrap();
    let url = format!("{base}/big");
    match client.get_bytes(&url, 1000).await {
        Err(HttpError::TooLarge {
            limit: 1000,
            url: u,
        }) => assert_eq!(u, url),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(client.get_bytes(&url, BIG as u64).await.unwrap().len(), BIG);
    // The default cap is the client's.
    let small = Client::new(&ClientConfig {
        max_body: 10,
        ..local()
    })
    .unwrap();
    assert!(matches!(
        small.send(Request::get(&url)).await,
        Err(HttpError::TooLarge { limit: 10, .. })
    ));

    // No Content-Length (read until close): the cap applies while reading.
    let raw = serve_raw(
        [
            &b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n"[..],
            &vec![b'y'; 100_000],
        ]
        .concat(),
        Duration::ZERO,
    )
    .await;
    assert!(matches!(
        client.get_bytes(&raw, 50_000).await,
        Err(HttpError::TooLarge { limit: 50_000, .. })
    ));
    assert_eq!(
        client.get_bytes(&raw, 100_000).await.unwrap().len(),
        100_000
    );

    // A huge error body does not make the status error fail: it is cut to an excerpt.
    match client.get_bytes(&format!("{base}/big-error"), 10).await {
        Err(HttpError::Status {
            status: 500,
            excerpt,
            ..
        }) => {
            assert!(excerpt.len() <= HttpError::EXCERPT_CHARS + 3, "{excerpt}");
            assert!(excerpt.starts_with("eee"));
        }
        other => panic!("expected a 500, got {other:?}"),
    }
}

#[tokio::test]
async fn streamed_downloads_respect_the_cap() {
    let base = serve_http().await;
    let client = Client::new(&local()).unwrap();
    let mut got = Vec::new();
    let n = client
        .download(
            Request::get(format!("{base}/big")).max_body(BIG as u64),
            &mut |c| {
                got.extend_from_slice(c);
                Ok(())
            },
        )
        .await
        .unwrap();
    assert_eq!((n, got.len()), (BIG as u64, BIG));
    let result = client
        .download(
            Request::get(format!("{base}/big")).max_body(1000),
            &mut |_| Ok(()),
        )
        .await;
    assert!(
        matches!(result, Err(HttpError::TooLarge { .. })),
        "{result:?}"
    );
    let result = client
        .download(Request::get(format!("{base}/missing")), &mut |_| Ok(()))
        .await;
    assert!(
        matches!(result, Err(HttpError::Status { status: 404, .. })),
        "{result:?}"
    );
    let result = client
        .download(Request::get(format!("{base}/big")), &mut |_| {
            Err(std::io::Error::other("disk full"))
        })
        .await;
    assert!(matches!(result, Err(HttpError::Sink { .. })), "{result:?}");
}

#[tokio::test]
async fn timeouts_fire() {
    let base = serve_http().await;
    let client = Client::new(&local()).unwrap();
    let started = Instant::now();
    let url = format!("{base}/slow");
    let result = client
        .send(Request::get(&url).timeout(Duration::from_millis(300)))
        .await;
    match result {
        Err(HttpError::Timeout { url: u, after }) => {
            assert_eq!(u, url);
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));

    // A body that stalls half-way: the whole-request limit covers the body too.
    let stall = serve_raw(
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part".to_vec(),
        Duration::from_secs(30),
    )
    .await;
    let client = Client::new(&ClientConfig {
        timeout: Duration::from_millis(300),
        ..local()
    })
    .unwrap();
    let result = client.get_bytes(&stall, 1000).await;
    assert!(
        matches!(result, Err(HttpError::Timeout { .. })),
        "{result:?}"
    );

    // The same stall under a short read timeout and a long request timeout: the error
    // names the read timeout, the one that fired (it used to say "after 30s" at once).
    let client = Client::new(&ClientConfig {
        timeout: Duration::from_secs(30),
        read_timeout: Some(Duration::from_millis(300)),
        ..local()
    })
    .unwrap();
    let started = Instant::now();
    match client.get_bytes(&stall, 1000).await {
        Err(HttpError::Timeout { after, .. }) => {
            assert_eq!(after, Duration::from_millis(300));
        }
        other => panic!("expected a read timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn status_errors_name_the_url_and_carry_retry_after() {
    let base = serve_http().await;
    let client = Client::new(&local()).unwrap();
    let url = format!("{base}/throttle");
    let error = client.get_bytes(&url, 100).await.unwrap_err();
    match &error {
        HttpError::Status {
            url: u,
            status: 429,
            retry_after,
            excerpt,
        } => {
            assert_eq!(u, &url);
            assert_eq!(*retry_after, Some(Duration::from_secs(7)));
            assert_eq!(excerpt, "slow down");
        }
        other => panic!("expected a 429, got {other:?}"),
    }
    assert!(error.is_transient());
    assert_eq!(error.to_string(), format!("{url} answered 429: slow down"));

    let error = client
        .get_bytes(&format!("{base}/unavailable"), 100)
        .await
        .unwrap_err();
    match error {
        HttpError::Status {
            status: 503,
            retry_after: Some(d),
            ..
        } => assert!(d > Duration::from_secs(365 * 86_400), "{d:?}"),
        other => panic!("expected a 503 with a date, got {other:?}"),
    }

    let error = client
        .get_bytes(&format!("{base}/missing"), 100)
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(404));
    assert!(!error.is_transient());

    // send() returns any status; the response parses Retry-After itself.
    let response = client.send(Request::get(&url)).await.unwrap();
    assert_eq!(response.status, 429);
    assert_eq!(response.retry_after(), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn connection_errors_and_bad_input() {
    let client = Client::new(&local()).unwrap();
    // Port 1 on loopback refuses.
    let error = client
        .get_bytes("http://127.0.0.1:1/x", 10)
        .await
        .unwrap_err();
    assert!(matches!(error, HttpError::Connect { .. }), "{error:?}");
    assert!(error.is_transient());
    assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
    for bad in ["localhost:4040", "ftp://x/", "http://"] {
        let error = client.get_bytes(bad, 10).await.unwrap_err();
        assert!(
            matches!(error, HttpError::InvalidUrl { .. }),
            "{bad}: {error:?}"
        );
    }
    let error = Client::new(&ClientConfig {
        headers: vec![("bad header".into(), "v".into())],
        ..local()
    })
    .unwrap_err();
    assert!(
        matches!(error, HttpError::InvalidHeader { .. }),
        "{error:?}"
    );
    let error = Client::new(&ClientConfig {
        proxy: Some("not a url".into()),
        ..local()
    })
    .unwrap_err();
    assert!(matches!(error, HttpError::Proxy { .. }), "{error:?}");
}

#[tokio::test]
async fn https_with_a_private_ca() {
    let (_certs_dir, certs) = temp_certs("https");
    let base = serve_https(&certs).await;
    let url = format!("{base}/hello");

    let trusting = Client::new(&ClientConfig {
        ca_file: Some(certs.ca.clone()),
        ..local()
    })
    .unwrap();
    assert_eq!(&trusting.get_bytes(&url, 100).await.unwrap()[..], b"hello");

    // The system roots alone do not know the private CA.
    let system = Client::new(&local()).unwrap();
    let error = system.get_bytes(&url, 100).await.unwrap_err();
    assert!(matches!(error, HttpError::Tls { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("TLS") && text.to_lowercase().contains("certificate"),
        "{text}"
    );

    // A CA file that is missing or holds no certificate fails at start.
    let missing = certs.dir.join("nope.pem");
    let error = Client::new(&ClientConfig {
        ca_file: Some(missing.clone()),
        ..local()
    })
    .unwrap_err();
    assert!(
        matches!(&error, HttpError::CaFile { path, .. } if *path == missing),
        "{error:?}"
    );
    let empty = certs.dir.join("empty.pem");
    std::fs::write(&empty, "not pem\n").unwrap();
    assert!(matches!(
        ember_http::load_ca_file(&empty),
        Err(HttpError::CaFile { .. })
    ));
    let _ = std::fs::remove_dir_all(&certs.dir);
}

#[tokio::test]
async fn an_explicit_proxy_is_used_for_http_and_https() {
    let proxy = Proxy::start().await;
    let plain = serve_http().await;
    let (_certs_dir, certs) = temp_certs("proxy");
    let secure = serve_https(&certs).await;
    let client = Client::new(&ClientConfig {
        proxy: Some(proxy.url.clone()),
        ca_file: Some(certs.ca.clone()),
        ..local()
    })
    .unwrap();
    assert_hello(&client, &plain).await;
    assert_hello(&client, &secure).await;
    let seen = proxy.seen();
    let port = secure.rsplit(':').next().unwrap();
    assert!(
        seen.contains(&format!("GET {plain}/hello HTTP/1.1")),
        "{seen:?}"
    );
    assert!(
        seen.contains(&format!("CONNECT localhost:{port} HTTP/1.1")),
        "{seen:?}"
    );
    let _ = std::fs::remove_dir_all(&certs.dir);
}

/// Set in the child process of [`the_proxy_environment_is_honoured`].
const CHILD_URL: &str = "EMBER_HTTP_TEST_CHILD_URL";

/// Runs only as the child of [`the_proxy_environment_is_honoured`] (the proxy variables must
/// be in the environment before the client starts, and tests must not change their own
/// process's environment): fetches the URL it is given with the default settings.
#[tokio::test]
async fn proxy_environment_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let client = Client::new(&ClientConfig::default()).unwrap();
    assert_eq!(&client.get_bytes(&url, 100).await.unwrap()[..], b"hello");
}

/// Runs [`proxy_environment_child`] in a child process with `HTTP_PROXY` and `NO_PROXY` set
/// (and the other proxy variables removed); panics unless it succeeds.
async fn run_child(url: &str, proxy: &str, no_proxy: &'static str) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", "proxy_environment_child"])
        .env(CHILD_URL, url)
        .env("HTTP_PROXY", proxy)
        .env("NO_PROXY", no_proxy)
        .env_remove("http_proxy")
        .env_remove("no_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy");
    let out = tokio::task::spawn_blocking(move || child.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test]
async fn the_proxy_environment_is_honoured() {
    let proxy = Proxy::start().await;
    let plain = serve_http().await;
    let url = format!("{plain}/hello");
    run_child(&url, &proxy.url, "").await;
    assert_eq!(proxy.seen(), vec![format!("GET {url} HTTP/1.1")]);

    // NO_PROXY exempts the host, as with curl: the proxy sees nothing more.
    run_child(&url, &proxy.url, "127.0.0.1").await;
    assert_eq!(proxy.seen().len(), 1, "{:?}", proxy.seen());
}

#[test]
fn the_blocking_client_works_outside_a_runtime() {
    let base = serve_http_on_its_own_thread();
    let client = BlockingClient::new(&local()).unwrap();
    assert_eq!(
        &client.get_bytes(&format!("{base}/hello"), 100).unwrap()[..],
        b"hello"
    );
    let mut got = Vec::new();
    let n = client
        .download(Request::get(format!("{base}/big")), &mut |c| {
            got.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
    assert_eq!((n as usize, got.len()), (BIG, BIG));
    let result = client.download(
        Request::get(format!("{base}/big")).max_body(10),
        &mut |_| Ok(()),
    );
    assert!(
        matches!(result, Err(HttpError::TooLarge { .. })),
        "{result:?}"
    );
    // A sink that gives up stops the transfer.
    let result = client.download(Request::get(format!("{base}/big")), &mut |_| {
        Err(std::io::Error::other("disk full"))
    });
    assert!(matches!(result, Err(HttpError::Sink { .. })), "{result:?}");
    // Still usable afterwards.
    let error = client
        .get_bytes(&format!("{base}/missing"), 100)
        .unwrap_err();
    assert_eq!(error.status(), Some(404));
}

/// Called from a task of a single-threaded runtime: no panic ("cannot start a runtime from
/// within a runtime") and no deadlock, since the work runs on the client's own thread.
#[tokio::test(flavor = "current_thread")]
async fn the_blocking_client_works_inside_a_runtime() {
    let base = serve_http_on_its_own_thread();
    let client = BlockingClient::new(&local()).unwrap();
    let body = client.get_bytes(&format!("{base}/hello"), 100).unwrap();
    assert_eq!(&body[..], b"hello");
    let request = Request::post(format!("{base}/echo"), "hi").content_type("text/plain");
    let response = client.fetch(request).unwrap();
    assert_eq!(&response.body[..], b"hi");
}

/// The test server on a runtime of its own thread (which lives until the test process ends),
/// so that blocking calls cannot starve it.
fn serve_http_on_its_own_thread() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            tx.send(serve_http().await).unwrap();
            std::future::pending::<()>().await
        })
    });
    rx.recv().unwrap()
}
