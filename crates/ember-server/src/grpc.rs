//! gRPC transport of `push.v1.PusherService/Push`, the protocol Grafana Alloy's
//! `pyroscope.write` speaks when it is not configured for Connect.
//!
//! Owns the gRPC wire rules for one unary method: the request must arrive over HTTP/2 (the
//! listener accepts cleartext HTTP/2 with prior knowledge next to HTTP/1.1), its body is one
//! length-prefixed message (1-byte compressed flag, 4-byte big-endian length), optionally
//! gzip'd as announced by `grpc-encoding`. The answer is HTTP 200 with a framed
//! `PushResponse` and the `grpc-status`/`grpc-message` trailers; a failure is a
//! "trailers-only" response whose headers carry the status. A small hand-written handler
//! keeps tonic (and its code generation) out of the build.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::Frame;
use prost::Message;

use ember_proto::push::{PushRequest, PushResponse};

use crate::ingest::{self, Converted};
use crate::{ApiError, AppState, tenant};

/// True when the request's content type selects the gRPC protocol.
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    crate::header(headers, "content-type").is_some_and(|v| {
        let v = v.trim().to_ascii_lowercase();
        v == "application/grpc" || v.starts_with("application/grpc+proto")
    })
}

/// gRPC status code for an API error (the Connect code names map one to one).
fn status_code(code: &str) -> u32 {
    match code {
        "canceled" => 1,
        "invalid_argument" => 3,
        "deadline_exceeded" => 4,
        "not_found" => 5,
        "already_exists" => 6,
        "permission_denied" => 7,
        "resource_exhausted" => 8,
        "failed_precondition" => 9,
        "aborted" => 10,
        "out_of_range" => 11,
        "unimplemented" => 12,
        "internal" => 13,
        "unavailable" => 14,
        "data_loss" => 15,
        "unauthenticated" => 16,
        _ => 2,
    }
}

/// `grpc-message` is percent-encoded: bytes outside printable ASCII, and `%` itself.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A body of one data frame followed by trailers: the shape of every successful gRPC reply.
struct DataThenTrailers {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl http_body::Body for DataThenTrailers {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(data) = this.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }
}

/// Frames `message` with the 5-byte gRPC prefix (uncompressed).
pub(crate) fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Extracts the single message of a unary request body, undoing `grpc-encoding: gzip`
/// (`encoding` is that header's value).
/// An uncompressed message is a slice of `body` (no copy), so a `PushRequest` decoded from
/// it copies each profile once, into its `Vec`.
fn unframe(s: &AppState, encoding: &str, body: &Bytes) -> Result<Bytes, ApiError> {
    let bad = |m: String| ApiError::bad_request("bad_request", m);
    if body.len() < 5 {
        return Err(bad(format!(
            "gRPC body of {} bytes is shorter than the 5-byte message prefix",
            body.len()
        )));
    }
    let compressed = body[0];
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    let message = body.slice(5..);
    if message.len() != len {
        return Err(bad(format!(
            "gRPC message prefix announces {len} bytes but the body holds {} (a unary call carries exactly one message)",
            message.len()
        )));
    }
    match compressed {
        0 => Ok(message),
        1 => {
            if encoding != "gzip" {
                return Err(ApiError {
                    retry_after_secs: None,
                    status: StatusCode::OK,
                    code: "unimplemented",
                    reason: "bad_encoding",
                    message: format!(
                        "compressed message with grpc-encoding {encoding:?}: only gzip is supported"
                    ),
                });
            }
            let max = s.limits.max_decompressed_bytes;
            ingest::gunzip(&message, max, "gzip'd gRPC message", "message").map(Bytes::from)
        }
        f => Err(bad(format!("gRPC compressed flag {f} is neither 0 nor 1"))),
    }
}

/// `POST /push.v1.PusherService/Push` with `Content-Type: application/grpc`.
pub(crate) async fn push(s: &Arc<AppState>, request: axum::extract::Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let result = async {
        let tenant = tenant(s, &parts.headers)?;
        let limit = s.limits.max_body_bytes;
        let raw = axum::body::to_bytes(body, limit.saturating_add(5))
            .await
            .map_err(|_| {
                ApiError::too_large(
                    "body_too_large",
                    format!("request body exceeds the limit of {limit} bytes"),
                )
            })?;
        let encoding = crate::header(&parts.headers, "grpc-encoding")
            .unwrap_or("identity")
            .trim()
            .to_ascii_lowercase();
        ingest::store_batch(s, tenant, move |s, tenant| {
            let message = unframe(s, &encoding, &raw)?;
            let request = PushRequest::decode(message)
                .map_err(|e| ApiError::bad_request("bad_request", format!("PushRequest: {e}")))?;
            Ok(Converted {
                batch: crate::push::batch(s, tenant, request)?,
                body_bytes: raw.len(),
            })
        })
        .await
    }
    .await;
    match result {
        Ok(()) => {
            ingest::count_success(s, started);
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let body = DataThenTrailers {
                data: Some(Bytes::from(frame(&PushResponse {}.encode_to_vec()))),
                trailers: Some(trailers),
            };
            ([("content-type", "application/grpc")], Body::new(body)).into_response()
        }
        Err(e) => {
            s.metrics.reject(e.reason);
            error_response(&e)
        }
    }
}

/// A trailers-only gRPC reply carrying the error's status and message.
fn error_response(e: &ApiError) -> Response {
    let mut r = StatusCode::OK.into_response();
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/grpc"));
    h.insert("grpc-status", HeaderValue::from(status_code(e.code)));
    if let Ok(v) = HeaderValue::from_str(&percent_encode(&e.message)) {
        h.insert("grpc-message", v);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_encoding_and_codes() {
        assert_eq!(percent_encode("a b%c\n€"), "a b%25c%0A%E2%82%AC");
        assert_eq!(status_code("invalid_argument"), 3);
        assert_eq!(status_code("resource_exhausted"), 8);
        assert_eq!(status_code("unauthenticated"), 16);
        assert_eq!(status_code("something else"), 2);
        assert_eq!(frame(b"ab"), vec![0, 0, 0, 0, 2, b'a', b'b']);
    }
}
