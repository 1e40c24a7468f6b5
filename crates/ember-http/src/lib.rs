//! Ember's one HTTP client: every outgoing HTTP request of Ember (pushing profiles, scraping
//! pprof endpoints, debuginfod downloads, the agent's admin and snapshot calls, `ember query`)
//! goes through [`Client`] (async) or [`BlockingClient`] (synchronous code).
//!
//! It is a thin policy layer over `reqwest` so that every caller gets the same behaviour:
//! - `https://` through rustls with the *ring* provider (never aws-lc), trusting the system's
//!   root certificates plus an optional PEM CA file ([`ClientConfig::ca_file`]);
//! - connect and whole-request timeouts with documented defaults;
//! - proxies as curl does it (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`) or an
//!   explicit proxy URL;
//! - response bodies read with a size cap (an error when larger, never buffered unbounded);
//! - status checks that name the URL, the status and an excerpt of the body ([`HttpError`]);
//! - `Retry-After` parsed for 429 and 503 answers ([`parse_retry_after`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), ember_http::HttpError> {
//! let client = ember_http::Client::new(&ember_http::ClientConfig::default())?;
//! let body = client.get_bytes("http://127.0.0.1:6060/debug/pprof/heap", 1 << 20).await?;
//! # let _ = body; Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod blocking;
mod client;
mod config;
mod error;
mod retry_after;
mod url;

pub use blocking::BlockingClient;
pub use bytes::Bytes;
pub use client::{Client, Request, Response};
pub use config::{
    ClientConfig, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_BODY, DEFAULT_TIMEOUT, USER_AGENT,
    install_ring_provider, load_ca_file,
};
pub use error::HttpError;
pub use retry_after::parse_retry_after;
pub use url::{Url, host_port, join_url, parse_url};
