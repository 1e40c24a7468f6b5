//! The HTTP handlers, for any server: an axum [`router`] and a plain hyper [`ProfileService`],
//! both answering through one function ([`respond`]).
//!
//! | Route | Parameters |
//! |---|---|
//! | `GET /profile/cpu` | `seconds` (1..=300, default 5), `frequency` (Hz, 1..=1000, default 99), `format` = `pprof` (default, gzip'd) or `svg` (flame graph), `force` (`true`/`false`, default false) |
//! | `GET /profile/heap` | `format` = `pprof` (default, gzip'd) or `svg` (flame graph of `inuse_space`); with the `jemalloc` feature also `jemalloc` (jemalloc's own `heap_v2` dump, for `jeprof`) |
//!
//! Only one CPU profile is recorded at a time: a second request gets 409 with a message,
//! unless it says `force=true`, which cancels the running one (that request then gets 409
//! saying so) and starts anew; push mode's continuous profiles run alongside either way.
//! Unknown or malformed parameters get 400 with the reason; `/profile/heap` gets 404
//! explaining how to turn heap profiling on when the [`crate::SamplingAllocator`] is not
//! the global allocator (nor jemalloc's profiling on, with the `jemalloc` feature; then
//! `pprof` and `svg` come from jemalloc's sampling). The handlers are unauthenticated by
//! design: profiles hold code addresses and function names, no user data; mount them on an
//! internal port.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};

use crate::cpu::{AdHoc, AdHocError};
use crate::heap;

/// Longest `seconds` of one CPU profile.
pub const MAX_SECONDS: u64 = 300;
/// Highest `frequency` of a CPU profile.
pub const MAX_FREQUENCY: u32 = 1000;

/// State shared by the handlers: the one ad hoc CPU profile slot.
#[derive(Debug, Clone, Default)]
pub struct Profiling {
    adhoc: Arc<AdHoc>,
}

impl Profiling {
    /// New handler state.
    pub fn new() -> Profiling {
        Profiling::default()
    }
}

/// An answer: status, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Body.
    pub body: Vec<u8>,
}

impl Answer {
    fn text(status: u16, message: impl Into<String>) -> Answer {
        let mut body = message.into().into_bytes();
        body.push(b'\n');
        Answer {
            status,
            content_type: "text/plain; charset=utf-8",
            body,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Pprof,
    Svg,
    /// jemalloc's raw dump (`/profile/heap` with the `jemalloc` feature only).
    #[cfg(feature = "jemalloc")]
    Jemalloc,
}

/// Query pairs, percent-decoded (`+` is a space).
fn parse_query(query: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.push((decode(k)?, decode(v)?));
    }
    Ok(out)
}

fn decode(s: &str) -> Result<String, String> {
    let mut bytes = Vec::with_capacity(s.len());
    let mut it = s.bytes();
    while let Some(b) = it.next() {
        match b {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hex = [it.next(), it.next()];
                let h = match hex {
                    [Some(a), Some(b)] => std::str::from_utf8(&[a, b])
                        .ok()
                        .and_then(|t| u8::from_str_radix(t, 16).ok()),
                    _ => None,
                };
                bytes.push(h.ok_or_else(|| format!("bad percent-encoding in {s:?}"))?);
            }
            b => bytes.push(b),
        }
    }
    String::from_utf8(bytes).map_err(|_| format!("{s:?} is not UTF-8"))
}

struct CpuParams {
    seconds: u64,
    frequency: u32,
    format: Format,
    force: bool,
}

fn parse_format(v: &str) -> Result<Format, String> {
    match v {
        "pprof" => Ok(Format::Pprof),
        "svg" => Ok(Format::Svg),
        _ => Err(format!("format must be pprof or svg, got {v:?}")),
    }
}

/// `v` as a whole number from 1 to `max`; otherwise the error `"{what} from 1 to {max}, got {v:?}"`.
fn whole_number<T>(v: &str, max: T, what: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + From<u8> + std::fmt::Display + Copy,
{
    v.parse()
        .ok()
        .filter(|n| (T::from(1)..=max).contains(n))
        .ok_or_else(|| format!("{what} from 1 to {max}, got {v:?}"))
}

fn parse_cpu(pairs: &[(String, String)]) -> Result<CpuParams, String> {
    let mut p = CpuParams {
        seconds: 5,
        frequency: 99,
        format: Format::Pprof,
        force: false,
    };
    for (k, v) in pairs {
        match k.as_str() {
            "seconds" => {
                p.seconds = whole_number(v, MAX_SECONDS, "seconds must be a whole number")?
            }
            "frequency" => {
                p.frequency =
                    whole_number(v, MAX_FREQUENCY, "frequency must be a whole number of Hz")?
            }
            "format" => p.format = parse_format(v)?,
            "force" => {
                p.force = match v.as_str() {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    _ => return Err(format!("force must be true or false, got {v:?}")),
                }
            }
            other => {
                return Err(format!(
                    "unknown parameter {other:?}: /profile/cpu takes seconds, frequency, format and force"
                ));
            }
        }
    }
    Ok(p)
}

fn parse_heap(pairs: &[(String, String)]) -> Result<Format, String> {
    let mut format = Format::Pprof;
    for (k, v) in pairs {
        match k.as_str() {
            #[cfg(feature = "jemalloc")]
            "format" if v == "jemalloc" => format = Format::Jemalloc,
            #[cfg(feature = "jemalloc")]
            "format" => {
                format = parse_format(v)
                    .map_err(|_| format!("format must be pprof, svg or jemalloc, got {v:?}"))?
            }
            #[cfg(not(feature = "jemalloc"))]
            "format" => format = parse_format(v)?,
            other => {
                return Err(format!(
                    "unknown parameter {other:?}: /profile/heap takes format"
                ));
            }
        }
    }
    Ok(format)
}

/// The profile in the requested format.
fn render(
    profile: &ember_pprof::Profile,
    format: Format,
    sample_type: &str,
    title: &str,
) -> Answer {
    match format {
        Format::Pprof => Answer {
            status: 200,
            content_type: "application/octet-stream",
            body: ember_pprof::encode_gzip(profile),
        },
        #[cfg(feature = "jemalloc")]
        Format::Jemalloc => Answer::text(400, "format=jemalloc is for /profile/heap only"),
        Format::Svg => {
            let idx = ember_pprof::sample_index(profile, Some(sample_type)).unwrap_or(0);
            let folded = ember_pprof::folded_to_string(&ember_pprof::folded_stacks(profile, idx));
            let parsed = ember_formats::folded::parse_bytes(folded.as_bytes());
            let options = ember_flamegraph::Options {
                title: title.to_string(),
                ..Default::default()
            };
            let mut svg = Vec::new();
            match ember_flamegraph::render(&parsed, &options, &mut svg) {
                Ok(_) => Answer {
                    status: 200,
                    content_type: "image/svg+xml",
                    body: svg,
                },
                Err(ember_flamegraph::FlameGraphError::NoStacks) => {
                    Answer::text(200, "no samples were recorded")
                }
                Err(e) => Answer::text(500, format!("drawing the flame graph: {e}")),
            }
        }
    }
}

/// Answers a request for `path` with query string `query` (without `?`).
pub async fn respond(state: &Profiling, path: &str, query: &str) -> Answer {
    let pairs = match parse_query(query) {
        Ok(p) => p,
        Err(e) => return Answer::text(400, e),
    };
    match path {
        "/profile/cpu" => {
            let p = match parse_cpu(&pairs) {
                Ok(p) => p,
                Err(e) => return Answer::text(400, e),
            };
            match state
                .adhoc
                .profile(Duration::from_secs(p.seconds), p.frequency, p.force)
                .await
            {
                Ok(profile) => render(&profile, p.format, "cpu", "CPU"),
                Err(e @ (AdHocError::Busy | AdHocError::Cancelled)) => {
                    Answer::text(409, e.to_string())
                }
                Err(e) => Answer::text(500, e.to_string()),
            }
        }
        "/profile/heap" => {
            let format = match parse_heap(&pairs) {
                Ok(f) => f,
                Err(e) => return Answer::text(400, e),
            };
            #[cfg(feature = "jemalloc")]
            if format == Format::Jemalloc {
                return match tokio::task::spawn_blocking(heap::jemalloc::jemalloc_dump).await {
                    Ok(Ok(dump)) => Answer {
                        status: 200,
                        content_type: "text/plain; charset=utf-8",
                        body: dump,
                    },
                    Ok(Err(e @ heap::jemalloc::JemallocError::Off)) => {
                        Answer::text(404, e.to_string())
                    }
                    Ok(Err(e)) => Answer::text(500, e.to_string()),
                    Err(e) => Answer::text(500, e.to_string()),
                };
            }
            match tokio::task::spawn_blocking(heap::heap_profile).await {
                Ok(Some(profile)) => render(&profile, format, "inuse_space", "Heap in use"),
                #[cfg(not(feature = "jemalloc"))]
                Ok(None) => Answer::text(404, heap::HEAP_DISABLED),
                #[cfg(feature = "jemalloc")]
                Ok(None) => Answer::text(
                    404,
                    format!(
                        "{}; or, with jemalloc: {}",
                        heap::HEAP_DISABLED,
                        heap::jemalloc::HEAP_JEMALLOC_OFF
                    ),
                ),
                Err(e) => Answer::text(500, e.to_string()),
            }
        }
        _ => Answer::text(
            404,
            "not found: the profiling routes are /profile/cpu and /profile/heap",
        ),
    }
}

fn to_response(a: Answer) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(a.body)));
    *r.status_mut() = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(a.content_type),
    );
    r
}

/// An axum router with `GET /profile/cpu` and `GET /profile/heap`; merge or nest it into the
/// service's own router.
pub fn router(state: Profiling) -> axum::Router {
    async fn handle(
        axum::extract::State(state): axum::extract::State<Profiling>,
        uri: axum::http::Uri,
    ) -> axum::response::Response {
        let answer = respond(&state, uri.path(), uri.query().unwrap_or("")).await;
        to_response(answer).map(axum::body::Body::new)
    }
    axum::Router::new()
        .route("/profile/cpu", axum::routing::get(handle))
        .route("/profile/heap", axum::routing::get(handle))
        .with_state(state)
}

/// The same handlers as a plain `hyper::service::Service`, for servers that are not axum:
/// serve it with `hyper::server::conn::http1::Builder::serve_connection`. Other paths get
/// 404, other methods 405.
#[derive(Debug, Clone, Default)]
pub struct ProfileService {
    state: Profiling,
}

impl ProfileService {
    /// A service over `state`.
    pub fn new(state: Profiling) -> ProfileService {
        ProfileService { state }
    }
}

impl<B> hyper::service::Service<Request<B>> for ProfileService {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<B>) -> Self::Future {
        let state = self.state.clone();
        let method_ok = req.method() == hyper::Method::GET;
        let path = req.uri().path().to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        Box::pin(async move {
            if !method_ok {
                return Ok(to_response(Answer::text(405, "only GET is supported")));
            }
            Ok(to_response(respond(&state, &path, &query).await))
        })
    }
}
