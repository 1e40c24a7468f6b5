//! The accept loop: every connection the server takes, over plain TCP or TLS, HTTP/1.1 or
//! HTTP/2 (cleartext with prior knowledge for gRPC, or chosen by ALPN over TLS), and the
//! bounds that keep slow or silent clients from holding the server's sockets and memory.
//!
//! `axum::serve` waits forever for a request that is never completed; this loop drives hyper
//! itself (as `axum::serve` does) and adds, from [`crate::Limits`]:
//!
//! - `header_read_timeout_seconds` (10): a connection must deliver its first complete request
//!   head (TLS handshake included) this long after it was accepted, and on HTTP/1.1 each later
//!   head this long after the previous answer (hyper's own header timer), so an idle HTTP/1.1
//!   keep-alive connection is closed after as long;
//! - `body_read_timeout_seconds` (60): a request's whole body must arrive this long after its
//!   head; beyond, the request is answered 408 and, on HTTP/1.1, the connection closed (on
//!   HTTP/2 only that stream ends);
//! - `idle_timeout_seconds` (60): a connection with no request in flight is closed this long
//!   after its last answer (HTTP/2: GOAWAY first, so a client's next call opens a new
//!   connection instead of failing);
//! - `max_connections` (4,096): beyond it the loop stops accepting, so new connections **wait**
//!   in the kernel's listen backlog and are taken as soon as one closes. Waiting rather than
//!   refusing: the timeouts above free a held slot within seconds, and a profile push that
//!   waits a moment is better than one that fails; once the backlog is full too the kernel
//!   drops new connection attempts and clients' own connect timeouts apply.
//!
//! A connection closed by a timeout gets a graceful close first (HTTP/1.1: closed when idle;
//! HTTP/2: GOAWAY) and is dropped [`CLOSE_GRACE`] later whatever the client does.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response, StatusCode, Version};
use axum::response::IntoResponse;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use crate::{AppState, Limits, ServerError};

/// Time a connection closed by a timeout gets to finish its graceful close before it is
/// dropped (an HTTP/2 client that ignores GOAWAY, an HTTP/1.1 client that reads no answer).
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// The connection bounds of [`Limits`], checked once at start (`None` = no limit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionOptions {
    header: Option<Duration>,
    body: Option<Duration>,
    idle: Option<Duration>,
    max_connections: usize,
}

impl ConnectionOptions {
    /// Reads the timeouts and the cap of `limits`; a negative or non-finite timeout is an error
    /// (0 disables one).
    pub(crate) fn from_limits(limits: &Limits) -> Result<Self, ServerError> {
        let seconds = |name: &str, value: f64| -> Result<Option<Duration>, ServerError> {
            if value == 0.0 {
                return Ok(None);
            }
            Duration::try_from_secs_f64(value).map(Some).map_err(|_| {
                ServerError::Config(format!(
                    "{name} must be a number of seconds >= 0 (0 = no limit), not {value}"
                ))
            })
        };
        Ok(ConnectionOptions {
            header: seconds(
                "header_read_timeout_seconds",
                limits.header_read_timeout_seconds,
            )?,
            body: seconds(
                "body_read_timeout_seconds",
                limits.body_read_timeout_seconds,
            )?,
            idle: seconds("idle_timeout_seconds", limits.idle_timeout_seconds)?,
            max_connections: limits.max_connections,
        })
    }
}

/// Why the server closed a connection itself (a label of `ember_connections_closed_total`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Closed {
    /// No complete request head in time (slow or silent client).
    HeaderTimeout,
    /// No request for `idle_timeout_seconds`.
    IdleTimeout,
    /// The TLS handshake failed or took longer than the header timeout.
    TlsHandshake,
    /// Plain HTTP sent to the TLS port (answered 400 first).
    PlainHttpOnTls,
}

impl Closed {
    const ALL: [Closed; 4] = [
        Closed::HeaderTimeout,
        Closed::IdleTimeout,
        Closed::TlsHandshake,
        Closed::PlainHttpOnTls,
    ];

    fn label(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::TlsHandshake => "tls_handshake",
            Closed::PlainHttpOnTls => "plain_http_on_tls",
        }
    }
}

/// Connection counters, exported at `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct ConnectionStats {
    accepted: AtomicU64,
    open: AtomicU64,
    closed: [AtomicU64; 4],
    body_timeouts: AtomicU64,
    cap_waits: AtomicU64,
}

impl ConnectionStats {
    pub(crate) fn closed(&self, why: Closed) {
        self.closed[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds the connection families to a `/metrics` answer.
    pub(crate) fn describe(&self, e: &mut ember_telemetry::Exposition) {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        e.counter(
            "ember_connections_accepted_total",
            "Connections accepted.",
            load(&self.accepted),
        )
        .gauge(
            "ember_connections_open",
            "Connections open now.",
            load(&self.open),
        )
        .counter(
            "ember_connection_cap_waits_total",
            "Times the accept loop waited because max_connections were open.",
            load(&self.cap_waits),
        )
        .counter(
            "ember_request_body_timeouts_total",
            "Requests answered 408 because their body did not arrive within body_read_timeout_seconds.",
            load(&self.body_timeouts),
        );
        let family = e.family(
            "ember_connections_closed_total",
            ember_telemetry::MetricType::Counter,
            "Connections the server closed itself, by reason.",
        );
        for why in Closed::ALL {
            family.sample(&[("reason", why.label())], load(&self.closed[why as usize]));
        }
    }
}

/// Accepts connections on `listener` and serves `router` on each until `shutdown` completes;
/// then stops accepting, closes every connection gracefully and returns once all are gone.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    state: Arc<AppState>,
    tls: Option<Arc<rustls::ServerConfig>>,
    options: ConnectionOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let cap = (options.max_connections > 0)
        .then(|| Arc::new(tokio::sync::Semaphore::new(options.max_connections)));
    let tls = tls.map(tokio_rustls::TlsAcceptor::from);
    let service = TowerToHyperService::new(router);
    // Every connection task holds a sender; `recv` returns `None` once all have ended.
    let (alive, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    let mut at_cap = false;
    loop {
        let permit = match &cap {
            Some(cap) => {
                let permit = match cap.clone().try_acquire_owned() {
                    Ok(p) => p,
                    Err(_) => {
                        state.connections.cap_waits.fetch_add(1, Ordering::Relaxed);
                        if !at_cap {
                            at_cap = true;
                            tracing::warn!(
                                max_connections = options.max_connections,
                                "connection cap reached: new connections wait in the listen backlog until one closes"
                            );
                        }
                        tokio::select! {
                            p = cap.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                            () = &mut shutdown => break,
                        }
                    }
                };
                Some(permit)
            }
            None => None,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment rather than spin,
                    // and keep serving the connections already open.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if at_cap && cap.as_ref().is_some_and(|c| c.available_permits() > 0) {
            at_cap = false;
        }
        // Small request/answer exchanges: do not hold the last segment back (Nagle).
        let _ = stream.set_nodelay(true);
        state.connections.accepted.fetch_add(1, Ordering::Relaxed);
        let conn = Conn {
            accepted_at: Instant::now(),
            service: service.clone(),
            state: state.clone(),
            options,
            stopping: stopping.clone(),
            _alive: alive.clone(),
            _permit: permit,
        };
        let tls = tls.clone();
        tokio::spawn(async move {
            conn.state.connections.open.fetch_add(1, Ordering::Relaxed);
            let stats = conn.state.clone();
            match tls {
                None => conn.serve(stream).await,
                Some(acceptor) => {
                    let deadline = conn.options.header.map(|d| conn.accepted_at + d);
                    let stats = &conn.state.connections;
                    // A shutdown does not wait for a handshake still in progress.
                    let mut stopping = conn.stopping.clone();
                    let stream = tokio::select! {
                        s = crate::tls::handshake(&acceptor, stream, deadline, stats) => s,
                        _ = stopping.changed() => None,
                    };
                    if let Some(stream) = stream {
                        conn.serve(stream).await;
                    }
                }
            }
            stats.connections.open.fetch_sub(1, Ordering::Relaxed);
            tracing::trace!(%peer, "connection closed");
        });
    }
    drop(listener);
    let _ = stop.send(true);
    drop(alive);
    let _ = all_closed.recv().await;
}

/// One accepted connection and what it holds until it ends.
pub(crate) struct Conn {
    accepted_at: Instant,
    service: TowerToHyperService<Router>,
    state: Arc<AppState>,
    options: ConnectionOptions,
    stopping: tokio::sync::watch::Receiver<bool>,
    _alive: tokio::sync::mpsc::Sender<()>,
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Conn {
    /// Serves HTTP/1.1 or HTTP/2 (told apart by the HTTP/2 preface) on `io` until the client
    /// closes, a timeout closes it, or the server shuts down.
    async fn serve<I>(mut self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let watch = Arc::new(Watch::new(self.accepted_at));
        let service = {
            let watch = watch.clone();
            let inner = self.service.clone();
            let state = self.state.clone();
            let body_timeout = self.options.body;
            hyper::service::service_fn(move |req: Request<Incoming>| {
                let guard = InFlight::start(&watch);
                let timed_out = Arc::new(AtomicBool::new(false));
                let version = req.version();
                let req = req.map(|body| match body_timeout {
                    Some(limit) => Body::new(TimedBody::new(body, limit, timed_out.clone())),
                    None => Body::new(body),
                });
                let call = hyper::service::Service::call(&inner, req);
                let state = state.clone();
                async move {
                    let response = match call.await {
                        Ok(r) => r,
                        Err(never) => match never {},
                    };
                    let response = if timed_out.load(Ordering::SeqCst) {
                        state
                            .connections
                            .body_timeouts
                            .fetch_add(1, Ordering::Relaxed);
                        state.metrics.reject("body_timeout");
                        body_timeout_answer(body_timeout.unwrap_or_default(), version)
                    } else {
                        response
                    };
                    Ok::<_, Infallible>(response.map(|inner| Tracked {
                        inner,
                        _guard: guard,
                    }))
                }
            })
        };
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.options.header);
        let conn = builder.serve_connection(TokioIo::new(io), service);
        let mut conn = std::pin::pin!(conn);
        let mut options = self.options;
        let mut stopping = false;
        let mut dropping_at: Option<Instant> = None;
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        let timed_out = e
                            .downcast_ref::<hyper::Error>()
                            .is_some_and(hyper::Error::is_timeout);
                        if timed_out {
                            self.state.connections.closed(Closed::HeaderTimeout);
                        } else {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                    }
                    return;
                }
                changed = self.stopping.changed(), if !stopping => {
                    stopping = true;
                    if changed.is_ok() {
                        conn.as_mut().graceful_shutdown();
                    }
                    // Requests in flight finish; a connection without one goes within
                    // CLOSE_GRACE instead of holding the shutdown for a whole idle timeout.
                    options.idle = Some(CLOSE_GRACE);
                    options.header = Some(options.header.map_or(CLOSE_GRACE, |h| h.min(CLOSE_GRACE)));
                }
                why = watch.expired(options), if dropping_at.is_none() => {
                    self.state.connections.closed(why);
                    conn.as_mut().graceful_shutdown();
                    dropping_at = Some(Instant::now() + CLOSE_GRACE);
                }
                () = sleep_until(dropping_at) => return,
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The 408 that replaces a handler's answer when the request body did not arrive in time.
fn body_timeout_answer(limit: Duration, version: Version) -> Response<Body> {
    let body = serde_json::json!({
        "code": "deadline_exceeded",
        "message": format!(
            "the request body did not arrive within {} s (body_read_timeout_seconds)",
            limit.as_secs_f64()
        ),
    });
    let mut response = (StatusCode::REQUEST_TIMEOUT, axum::Json(body)).into_response();
    // HTTP/1.1: the rest of the body may still come, so the connection cannot carry another
    // request. (HTTP/2 ends only the stream, and forbids the header.)
    if version <= Version::HTTP_11 {
        response.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    response
}

/// What a connection's watchdog needs to know: requests in flight and since when it is idle.
#[derive(Debug)]
struct Watch {
    state: Mutex<WatchState>,
    changed: tokio::sync::Notify,
}

#[derive(Debug)]
struct WatchState {
    in_flight: usize,
    /// Whether a request head has arrived yet (before, the header timeout runs from accept).
    served: bool,
    /// When the connection was accepted, or its last request ended.
    idle_since: Instant,
}

impl Watch {
    fn new(accepted_at: Instant) -> Self {
        Watch {
            state: Mutex::new(WatchState {
                in_flight: 0,
                served: false,
                idle_since: accepted_at,
            }),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// Completes when the connection has been without a request for too long: no first
    /// request within the header timeout, or no new one within the idle timeout.
    async fn expired(&self, options: ConnectionOptions) -> Closed {
        loop {
            // Registered before the state is read: a change after the read still wakes us
            // (`notify_one` keeps a permit when nobody waits).
            let changed = self.changed.notified();
            let deadline = {
                let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                match (s.in_flight, s.served) {
                    (0, false) => options
                        .header
                        .map(|d| (s.idle_since + d, Closed::HeaderTimeout)),
                    (0, true) => options
                        .idle
                        .map(|d| (s.idle_since + d, Closed::IdleTimeout)),
                    _ => None,
                }
            };
            match deadline {
                Some((at, why)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {
                            // A request may have started just now: look again before closing.
                            let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                            if s.in_flight == 0 && Instant::now() >= at {
                                return why;
                            }
                        }
                        () = changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

/// A request in flight on a connection, from its head until its answer's body is sent (or
/// dropped); the connection's idle clock restarts when the last one ends.
#[derive(Debug)]
struct InFlight(Arc<Watch>);

impl InFlight {
    fn start(watch: &Arc<Watch>) -> Self {
        {
            let mut s = watch.state.lock().unwrap_or_else(|e| e.into_inner());
            s.in_flight += 1;
            s.served = true;
        }
        watch.changed.notify_one();
        InFlight(watch.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut s = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
            s.in_flight -= 1;
            if s.in_flight == 0 {
                s.idle_since = Instant::now();
            }
        }
        self.0.changed.notify_one();
    }
}

/// An answer body that keeps its request counted as in flight until it is sent.
struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl http_body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The request body did not arrive within `body_read_timeout_seconds`.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {} s (body_read_timeout_seconds)", .0.as_secs_f64())]
pub(crate) struct BodyTimeout(Duration);

/// A request body that fails with [`BodyTimeout`] when its client has not sent all of it
/// `limit` after the head. Data already received is always handed out first, so a handler that
/// starts reading late is not blamed for the wait.
struct TimedBody {
    inner: Incoming,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    limit: Duration,
    timed_out: Arc<AtomicBool>,
}

impl TimedBody {
    fn new(inner: Incoming, limit: Duration, timed_out: Arc<AtomicBool>) -> Self {
        TimedBody {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep(limit))),
            limit,
            timed_out,
        }
    }
}

impl http_body::Body for TimedBody {
    type Data = axum::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if self.timed_out.load(Ordering::Relaxed) {
            return Poll::Ready(Some(Err(BodyTimeout(self.limit).into())));
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if frame.is_none() {
                    self.deadline = None;
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let limit = self.limit;
                let expired = match self.deadline.as_mut() {
                    Some(deadline) => deadline.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if expired {
                    self.timed_out.store(true, Ordering::SeqCst);
                    return Poll::Ready(Some(Err(BodyTimeout(limit).into())));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
