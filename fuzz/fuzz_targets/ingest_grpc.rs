//! Fuzz target: `POST /push.v1.PusherService/Push` over gRPC, in-process (see
//! `ingest_common`): the 5-byte message prefix (compressed flag, big-endian length),
//! `grpc-encoding: gzip`, the `PushRequest`, then the store's decoding of every raw profile.
//!
//! Input: a flags byte, a shape byte, then the payload.
//! - bit 0: the payload is the whole request body as sent (prefix included); else the harness
//!   frames the message
//! - bit 1: the harness gzips the message (compressed flag 1) and sends `grpc-encoding: gzip`
//! - bit 2: send `grpc-encoding: gzip` anyway (with bit 0: seeds carry real compressed frames)
//! - bit 3: structured: the payload is raw profiles separated by `\xffEMB`, built into a
//!   `PushRequest` over 1–4 series (shape byte); else the payload is the message
//! - bit 4: gzip each raw profile; bit 5: gzip each one again (gzip inside gzip)
//! - bit 6: `application/grpc+proto` instead of `application/grpc`
//!
//! A gRPC answer is always HTTP 200 with `grpc-status` in the headers (refusals) or the
//! trailers (success); internal (13), unknown (2) and unavailable (14) count as bugs.
#![no_main]

#[path = "ingest_common/mod.rs"]
mod ingest_common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use ingest_common as c;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn accepted(r: &c::Reply) -> bool {
    r.status == StatusCode::OK && r.header("grpc-status") == Some("0")
}

fuzz_target!(|data: &[u8]| {
    let [flags, shape, payload @ ..] = data else {
        return;
    };
    let verbatim = flags & 1 != 0;
    let structured = flags & 8 != 0 && !verbatim;
    let wraps = u8::from(flags & 16 != 0) + u8::from(flags & 32 != 0);
    let built = structured.then(|| {
        let profiles = c::split(payload);
        c::push_request(&profiles, usize::from(shape % 4) + 1, wraps)
    });
    let message = match &built {
        Some(r) => r.encode_to_vec(),
        None => payload.to_vec(),
    };
    let mut gzip_header = flags & 4 != 0;
    let body = if verbatim {
        message
    } else {
        let (flag, message) = if flags & 2 != 0 {
            gzip_header = true;
            (1u8, c::gzip(&message))
        } else {
            (0u8, message)
        };
        let mut framed = Vec::with_capacity(message.len() + 5);
        framed.push(flag);
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(&message);
        framed
    };
    let content_type = if flags & 64 != 0 {
        "application/grpc+proto"
    } else {
        "application/grpc"
    };
    let mut request = Request::post("/push.v1.PusherService/Push")
        .header("content-type", content_type)
        .header("te", "trailers");
    if gzip_header {
        request = request.header("grpc-encoding", "gzip");
    }
    let request = request.body(Body::from(body)).expect("request");
    let reply = c::send("ingest_grpc", request, accepted);
    assert_eq!(reply.status, StatusCode::OK, "gRPC answers are HTTP 200");
    let status = reply
        .header("grpc-status")
        .expect("a gRPC answer without grpc-status")
        .to_string();
    assert!(
        !matches!(status.as_str(), "2" | "13" | "14"),
        "grpc-status {status}: {:?}",
        reply.header("grpc-message")
    );
    if status == "0"
        && let Some(r) = &built
    {
        c::check_accepted_profiles(r);
    }
});
