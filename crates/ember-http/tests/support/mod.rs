//! Real servers on 127.0.0.1 port 0 for the client tests: an axum app (plain or behind
//! rustls with a private CA made by the `openssl` CLI), a raw responder for answers axum
//! would not send (no length, stalls), and a tiny forward/CONNECT proxy that records what it
//! was asked.

#![allow(dead_code, unreachable_pub)]

mod certs;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub use certs::{Certs, make_certs};

/// Size of `/big`'s body.
pub const BIG: usize = 1 << 20;

/// The test app.
pub fn app() -> Router {
    Router::new()
        .route("/hello", get(|| async { "hello" }))
        .route("/echo", post(echo))
        .route("/big", get(|| async { vec![b'x'; BIG] }))
        .route(
            "/big-error",
            get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "e".repeat(BIG)) }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        )
        .route(
            "/throttle",
            get(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "7")],
                    "slow down",
                )
            }),
        )
        .route(
            "/unavailable",
            get(|| async {
                // A date in the far future: the delay is large but parsed.
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("retry-after", "Fri, 01 Jan 2100 00:00:00 GMT")],
                    "maintenance",
                )
            }),
        )
        .route(
            "/missing",
            get(|| async { (StatusCode::NOT_FOUND, "no such thing") }),
        )
}

/// Echoes the body; the request headers the tests look at come back as `x-seen-<name>`.
async fn echo(headers: HeaderMap, body: axum::body::Bytes) -> impl IntoResponse {
    let mut out = HeaderMap::new();
    for name in [
        "content-type",
        "content-encoding",
        "user-agent",
        "authorization",
        "x-scope-orgid",
    ] {
        if let Some(v) = headers.get(name) {
            out.insert(
                axum::http::HeaderName::from_bytes(format!("x-seen-{name}").as_bytes()).unwrap(),
                v.clone(),
            );
        }
    }
    (out, body)
}

/// Serves the app over plain HTTP; returns its base URL.
pub async fn serve_http() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app()).await;
    });
    format!("http://{addr}")
}

/// A TLS listener for `axum::serve`: accepts TCP, completes the handshake, hands on the
/// stream; failed handshakes (a client that does not trust us) are skipped.
struct TlsListener {
    tcp: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// Serves the app over HTTPS with `certs`' server certificate; returns its base URL
/// (`https://localhost:PORT`, the name the certificate carries).
pub async fn serve_https(certs: &Certs) -> String {
    use rustls_pki_types::pem::PemObject;
    let chain = rustls_pki_types::CertificateDer::pem_file_iter(&certs.server_cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(&certs.server_key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let listener = TlsListener {
        tcp,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    };
    tokio::spawn(async move {
        let _ = axum::serve(listener, app()).await;
    });
    format!("https://localhost:{port}")
}

/// A raw server: every connection gets `answer` after the request head, then the
/// connection stays open for `linger` (to stall a client reading an unfinished body).
pub async fn serve_raw(answer: Vec<u8>, linger: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let _ = read_head(&mut stream).await;
                let _ = stream.write_all(&answer).await;
                tokio::time::sleep(linger).await;
            });
        }
    });
    format!("http://{addr}")
}

/// Reads a request head (through the blank line); returns it and any bytes read past it.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A tiny HTTP proxy: `CONNECT host:port` tunnels, an absolute-form request
/// (`GET http://host:port/path`) is forwarded in origin form. Records each request line.
#[derive(Clone)]
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// Starts the proxy.
    pub async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(proxy_one(stream, record.clone()));
            }
        });
        Proxy { url, seen }
    }

    /// The request lines received so far.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

async fn proxy_one(mut client: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let Ok((head, rest)) = read_head(&mut client).await else {
        return;
    };
    let first = head.lines().next().unwrap_or_default().to_string();
    seen.lock().unwrap().push(first.clone());
    let mut parts = first.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method == "CONNECT" {
        let Ok(mut upstream) = TcpStream::connect(target).await else {
            return;
        };
        let _ = client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await;
        let _ = upstream.write_all(&rest).await;
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        return;
    }
    let Some(after_scheme) = target.strip_prefix("http://") else {
        return;
    };
    let (authority, path) = match after_scheme.find('/') {
        Some(i) => (&after_scheme[..i], &after_scheme[i..]),
        None => (after_scheme, "/"),
    };
    let Ok(mut upstream) = TcpStream::connect(authority).await else {
        return;
    };
    let rewritten = head.replacen(target, path, 1);
    let _ = upstream.write_all(rewritten.as_bytes()).await;
    let _ = upstream.write_all(&rest).await;
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// [`make_certs`] in a fresh temporary directory named after `name`, with the guard that
/// removes the directory when dropped (hold it as long as the files are used).
pub fn temp_certs(name: &str) -> (tempfile::TempDir, Certs) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("ember-http-{name}-"))
        .tempdir()
        .expect("temp dir");
    let certs = make_certs(dir.path());
    (dir, certs)
}
