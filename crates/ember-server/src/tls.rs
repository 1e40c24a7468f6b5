//! Transport security: HTTPS with a certificate and key from PEM files (rustls with the ring
//! provider, the same rustls build as ember-http's client), HTTP/1.1 and HTTP/2 offered by
//! ALPN so gRPC and Connect clients can push over TLS; a clear answer to plain HTTP sent to the
//! TLS port; and the warning at start when the server is reachable from other hosts without
//! its doors closed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::ServerError;
use crate::listen::{Closed, ConnectionStats};

/// The server's certificate chain and private key, PEM files (`ember server --tls-cert FILE
/// --tls-key FILE`). The chain is the server's certificate first, then any intermediates; the
/// key is PKCS#8, PKCS#1 (RSA) or SEC1 (EC).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// PEM file of the certificate chain.
    pub cert: PathBuf,
    /// PEM file of the private key.
    pub key: PathBuf,
}

/// Reads the certificate and key into the TLS configuration; every problem (a missing file, no
/// certificate, a key that does not match) is an error naming the file.
pub(crate) fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, ServerError> {
    let tls_error =
        |path: &Path, what: String| ServerError::Tls(format!("{}: {what}", path.display()));
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| tls_error(&files.cert, format!("reading the certificate: {e}")))?;
    if certs.is_empty() {
        return Err(tls_error(
            &files.cert,
            "no CERTIFICATE block (expected a PEM certificate chain)".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| tls_error(&files.key, format!("reading the private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            let why = match e {
                rustls::Error::InconsistentKeys(_) => {
                    "the private key does not belong to the certificate".to_string()
                }
                e => e.to_string(),
            };
            ServerError::Tls(format!(
                "{} and {}: {why}",
                files.cert.display(),
                files.key.display()
            ))
        })?;
    // HTTP/2 first: gRPC needs it, and the connection then carries concurrent requests.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// What plain HTTP sent to the TLS port gets back before the connection closes.
const PLAIN_HTTP_ANSWER: &str = "This Ember server speaks HTTPS on this port: use https://\n";

/// Runs the TLS handshake of a new connection, which must end by `deadline` (the header
/// timeout). A client speaking plain HTTP gets a 400 naming the problem instead of a TLS
/// alert it cannot read; `None` when the connection is over.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    deadline: Option<Instant>,
    stats: &ConnectionStats,
) -> Option<TlsStream<TcpStream>> {
    let work = async {
        let mut first = [0u8; 1];
        if stream.peek(&mut first).await? == 0 {
            return Ok(None);
        }
        // Every TLS connection opens with a handshake record (content type 22).
        if first[0] != 0x16 {
            stats.closed(Closed::PlainHttpOnTls);
            refuse_plain_http(stream).await;
            return Ok(None);
        }
        acceptor.accept(stream).await.map(Some)
    };
    let result = match deadline {
        Some(at) => tokio::time::timeout_at(at, work)
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
        None => work.await,
    };
    match result {
        Ok(stream) => stream,
        Err(e) => {
            stats.closed(Closed::TlsHandshake);
            tracing::debug!(error = %e, "TLS handshake failed");
            None
        }
    }
}

async fn refuse_plain_http(mut stream: TcpStream) {
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{PLAIN_HTTP_ANSWER}",
        PLAIN_HTTP_ANSWER.len()
    );
    if stream.write_all(answer.as_bytes()).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    // Read what the client sent (a little, briefly) before closing: closing with unread bytes
    // makes the kernel send a reset, which can destroy the answer before the client reads it.
    let mut sink = [0u8; 4096];
    let drain = async {
        let mut total = 0;
        while total < 64 << 10 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
}

/// Logs at start, as a warning, what a server reachable from other hosts leaves open: without
/// `--auth-tokens` everything; with tokens but without TLS, the tokens themselves.
pub(crate) fn warn_if_exposed(listen: SocketAddr, auth: bool, tls: bool, metrics_auth: bool) {
    if listen.ip().is_loopback() {
        return;
    }
    let metrics = if metrics_auth {
        "/metrics needs a token"
    } else {
        "/metrics is open (--metrics-auth closes it)"
    };
    if !auth {
        tracing::warn!(
            %listen,
            "UNPROTECTED: listening on {listen}, reachable from other hosts, without \
             --auth-tokens: anyone who can connect can push profiles as any tenant \
             (X-Scope-OrgID) and read every tenant's profiles, labels and source paths; \
             /ready, /healthz, /metrics and the web UI are open too. Start with --auth-tokens \
             FILE{}, or listen on 127.0.0.1 behind a proxy that authenticates",
            if tls { "" } else { " and --tls-cert/--tls-key" }
        );
    } else if !tls {
        tracing::warn!(
            %listen,
            "listening on {listen}, reachable from other hosts, without TLS: bearer tokens \
             and profiles cross the network in clear text; start with --tls-cert FILE \
             --tls-key FILE, or put a TLS proxy in front ({metrics})"
        );
    } else {
        tracing::info!(%listen, "listening with TLS and bearer-token auth; {metrics}");
    }
}
