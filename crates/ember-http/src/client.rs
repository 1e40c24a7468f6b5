//! The async [`Client`], the [`Request`] it sends and the [`Response`] it returns.

use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use reqwest::header::HeaderMap;

use crate::config::{bearer, header_pair};
use crate::error::{chain, excerpt};
use crate::{ClientConfig, HttpError, parse_retry_after};

/// Most bytes of an error answer's body read to quote it in [`HttpError::Status`].
const ERROR_BODY_BYTES: u64 = 64 << 10;

/// One request: method, URL, headers, body and its own limits. Built with [`Request::get`],
/// [`Request::post`] or [`Request::new`] and the chained setters.
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    bearer_token: Option<String>,
    body: Option<Bytes>,
    timeout: Option<Duration>,
    max_body: Option<u64>,
}

impl Request {
    /// A request with any method (`GET`, `POST`, `PUT`, `DELETE`...).
    pub fn new(method: &str, url: impl Into<String>) -> Request {
        Request {
            method: method.to_string(),
            url: url.into(),
            headers: Vec::new(),
            bearer_token: None,
            body: None,
            timeout: None,
            max_body: None,
        }
    }

    /// A `GET`.
    pub fn get(url: impl Into<String>) -> Request {
        Request::new("GET", url)
    }

    /// A `POST` of `body`.
    pub fn post(url: impl Into<String>, body: impl Into<Bytes>) -> Request {
        Request::new("POST", url).body(body)
    }

    /// Adds a header (after the client's own headers; the same name set twice is sent twice).
    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets `Content-Type`.
    pub fn content_type(self, value: &str) -> Request {
        self.header("content-type", value)
    }

    /// Sets `Content-Encoding` (e.g. `gzip` for a body compressed by the caller).
    pub fn content_encoding(self, value: &str) -> Request {
        self.header("content-encoding", value)
    }

    /// Sends `Authorization: Bearer <token>` (replacing the client's token, if any).
    pub fn bearer_token(mut self, token: &str) -> Request {
        self.bearer_token = Some(token.to_string());
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Bytes>) -> Request {
        self.body = Some(body.into());
        self
    }

    /// Time limit of this exchange, replacing [`ClientConfig::timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Request {
        self.timeout = Some(timeout);
        self
    }

    /// Largest response body accepted, replacing [`ClientConfig::max_body`].
    pub fn max_body(mut self, bytes: u64) -> Request {
        self.max_body = Some(bytes);
        self
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A response whose body has been read (within the request's size cap).
#[derive(Debug, Clone)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The URL that answered (after redirects).
    pub url: String,
    /// The body.
    pub body: Bytes,
    headers: HeaderMap,
}

impl Response {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (any case), if present and valid text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Every header as (lowercase name, value) pairs, in the order received; values that are
    /// not text are skipped.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers
            .iter()
            .filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?)))
    }

    /// The delay the server's `Retry-After` asks for (any status; see
    /// [`crate::parse_retry_after`]).
    pub fn retry_after(&self) -> Option<Duration> {
        parse_retry_after(self.header("retry-after")?, SystemTime::now())
    }

    /// `Ok(self)` for a 2xx status, else [`HttpError::Status`] with a body excerpt and, for
    /// 429 and 503, the `Retry-After` delay.
    pub fn error_for_status(self) -> Result<Response, HttpError> {
        if self.is_success() {
            return Ok(self);
        }
        Err(status_error(
            &self.url,
            self.status,
            &self.headers,
            &self.body,
        ))
    }
}

fn status_error(url: &str, status: u16, headers: &HeaderMap, body: &[u8]) -> HttpError {
    let retry_after = if status == 429 || status == 503 {
        headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()))
    } else {
        None
    };
    HttpError::Status {
        url: url.to_string(),
        status,
        retry_after,
        excerpt: excerpt(body),
    }
}

/// Ember's async HTTP client (see the crate documentation for its policies). Cheap to clone:
/// clones share one connection pool. Use it from a tokio runtime.
#[derive(Debug, Clone)]
pub struct Client {
    inner: reqwest::Client,
    config: ClientConfig,
}

impl Client {
    /// A client with these settings. Fails on a bad CA file, proxy URL or header, so a bad
    /// configuration is reported at start rather than per request.
    pub fn new(config: &ClientConfig) -> Result<Client, HttpError> {
        Ok(Client {
            inner: config.build()?,
            config: config.clone(),
        })
    }

    /// The settings this client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Sends `request` and reads the body (at most its `max_body` bytes); any status is
    /// returned as a [`Response`]. Errors are transport errors and [`HttpError::TooLarge`].
    pub async fn send(&self, request: Request) -> Result<Response, HttpError> {
        self.exchange(request, false).await
    }

    /// Sends `request` and returns the response if its status is 2xx, else
    /// [`HttpError::Status`] (the body of an error answer is read only as far as the excerpt
    /// needs, whatever its size).
    pub async fn fetch(&self, request: Request) -> Result<Response, HttpError> {
        self.exchange(request, true).await
    }

    /// [`Client::send`] and, with `require_success`, [`Client::fetch`]: one exchange, the
    /// body read within its limit.
    async fn exchange(
        &self,
        request: Request,
        require_success: bool,
    ) -> Result<Response, HttpError> {
        let limit = request.max_body.unwrap_or(self.config.max_body);
        let url = request.url.clone();
        let (response, timeout) = self.start(request).await?;
        let status = response.status().as_u16();
        let final_url = response.url().to_string();
        let headers = response.headers().clone();
        if require_success && !response.status().is_success() {
            let body = read_capped(response, &url, ERROR_BODY_BYTES, true, timeout).await?;
            return Err(status_error(&url, status, &headers, &body));
        }
        let body = read_capped(response, &url, limit, false, timeout).await?;
        Ok(Response {
            status,
            url: final_url,
            body,
            headers,
        })
    }

    /// `GET url`: the body of a 2xx answer, at most `max_body` bytes.
    pub async fn get_bytes(&self, url: &str, max_body: u64) -> Result<Bytes, HttpError> {
        let request = Request::get(url).max_body(max_body);
        Ok(self.fetch(request).await?.body)
    }

    /// Streams the body of a 2xx answer to `sink`, chunk by chunk as it arrives, and returns
    /// its length: for downloads too large to hold in memory (debuginfod files). More than the
    /// request's `max_body` bytes is [`HttpError::TooLarge`] (the sink has then seen a
    /// prefix); a failing sink ends the transfer with [`HttpError::Sink`].
    pub async fn download(
        &self,
        request: Request,
        sink: &mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send),
    ) -> Result<u64, HttpError> {
        let mut download = self.open_download(request).await?;
        while let Some(chunk) = download.next_chunk().await? {
            sink(&chunk).map_err(|source| HttpError::Sink {
                url: download.url.clone(),
                source,
            })?;
        }
        Ok(download.received)
    }

    /// Starts a download: the response head of a 2xx answer, else [`HttpError::Status`].
    pub(crate) async fn open_download(&self, request: Request) -> Result<Download, HttpError> {
        let limit = request.max_body.unwrap_or(self.config.max_body);
        let url = request.url.clone();
        let (response, timeout) = self.start(request).await?;
        if !response.status().is_success() {
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = read_capped(response, &url, ERROR_BODY_BYTES, true, timeout).await?;
            return Err(status_error(&url, status, &headers, &body));
        }
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(HttpError::TooLarge { url, limit });
        }
        Ok(Download {
            response,
            url,
            limit,
            timeout,
            received: 0,
        })
    }

    /// Sends the request and waits for the response head; also returns the request's time
    /// limits (for reporting a timeout while reading the body).
    async fn start(&self, request: Request) -> Result<(reqwest::Response, TimeLimit), HttpError> {
        let url = request.url;
        let parsed = crate::parse_url(&url)?;
        let method = reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|e| {
            HttpError::InvalidUrl {
                url: url.clone(),
                reason: format!("method {:?}: {e}", request.method),
            }
        })?;
        let timeout = request.timeout.unwrap_or(self.config.timeout);
        let limit = TimeLimit {
            timeout,
            read: self.config.read_timeout,
            started: std::time::Instant::now(),
        };
        let mut builder = self.inner.request(method, parsed).timeout(timeout);
        for (name, value) in &request.headers {
            let (name, value) = header_pair(name, value)?;
            builder = builder.header(name, value);
        }
        if let Some(token) = &request.bearer_token {
            builder = builder.header(reqwest::header::AUTHORIZATION, bearer(token)?);
        }
        if let Some(body) = request.body {
            builder = builder.body(body);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| self.transport_error(&url, &e, limit))?;
        Ok((response, limit))
    }

    fn transport_error(&self, url: &str, error: &reqwest::Error, limit: TimeLimit) -> HttpError {
        if error.is_timeout() && error.is_connect() {
            return HttpError::Timeout {
                url: url.to_string(),
                after: self.config.connect_timeout.min(limit.timeout),
            };
        }
        if crate::error::is_tls(error) {
            return HttpError::Tls {
                url: url.to_string(),
                detail: chain(error),
            };
        }
        if error.is_connect() {
            return HttpError::Connect {
                url: url.to_string(),
                detail: chain(error),
            };
        }
        transport(url, error, limit)
    }
}

/// A request's time limits, to name the one that fired.
#[derive(Debug, Clone, Copy)]
struct TimeLimit {
    /// The whole exchange's limit.
    timeout: Duration,
    /// The limit on a pause between reads ([`crate::ClientConfig::read_timeout`]).
    read: Option<Duration>,
    /// When the request was sent.
    started: std::time::Instant,
}

impl TimeLimit {
    /// The limit that fired: the whole exchange's once it has run that long, else the
    /// pause between reads (reqwest's error does not say which).
    fn fired(&self) -> Duration {
        match self.read {
            Some(read) if self.started.elapsed() < self.timeout => read,
            _ => self.timeout,
        }
    }
}

/// A reqwest error after connecting: a time limit fired, or a broken exchange.
fn transport(url: &str, error: &reqwest::Error, limit: TimeLimit) -> HttpError {
    match error.is_timeout() {
        true => HttpError::Timeout {
            url: url.to_string(),
            after: limit.fired(),
        },
        false => HttpError::Transport {
            url: url.to_string(),
            detail: chain(error),
        },
    }
}

/// Reads a body of at most `limit` bytes: more is [`HttpError::TooLarge`], or, with
/// `truncate`, the first `limit` bytes (to quote an error answer without reading all of it).
/// A `Content-Length` over the limit fails before reading anything.
async fn read_capped(
    mut response: reqwest::Response,
    url: &str,
    limit: u64,
    truncate: bool,
    timeout: TimeLimit,
) -> Result<Bytes, HttpError> {
    let too_large = || HttpError::TooLarge {
        url: url.to_string(),
        limit,
    };
    let declared = response.content_length();
    if !truncate && declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    // Preallocate what the server announced (bounded by the limit), not more.
    let capacity = declared.unwrap_or(0).min(limit).min(1 << 20) as usize;
    let mut body = BytesMut::with_capacity(capacity);
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| transport(url, &e, timeout))?
    {
        let room = limit.saturating_sub(body.len() as u64) as usize;
        if chunk.len() > room {
            if truncate {
                body.extend_from_slice(&chunk[..room]);
                break;
            }
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// A body being streamed: chunks as they arrive, within the size limit.
#[derive(Debug)]
pub(crate) struct Download {
    response: reqwest::Response,
    /// The request URL (for errors).
    pub(crate) url: String,
    limit: u64,
    timeout: TimeLimit,
    /// Bytes received so far.
    pub(crate) received: u64,
}

impl Download {
    /// The next chunk, `None` at the end; [`HttpError::TooLarge`] past the limit.
    pub(crate) async fn next_chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        let chunk = self
            .response
            .chunk()
            .await
            .map_err(|e| transport(&self.url, &e, self.timeout))?;
        if let Some(chunk) = &chunk {
            self.received += chunk.len() as u64;
            if self.received > self.limit {
                return Err(HttpError::TooLarge {
                    url: self.url.clone(),
                    limit: self.limit,
                });
            }
        }
        Ok(chunk)
    }
}
