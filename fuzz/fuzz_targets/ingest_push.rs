//! Fuzz target: `POST /push.v1.PusherService/Push` over Connect, in-process (see
//! `ingest_common`): the body's `Content-Encoding: gzip`, `PushRequest` in protobuf or in its
//! JSON form (base64 `rawProfile`), and then, in the store, every raw profile's
//! decompression, parsing, checks and logging.
//!
//! Input: a flags byte, a shape byte, then the payload.
//! - bit 0: JSON (`application/json`), else protobuf (`application/proto`, or
//!   `application/x-protobuf` with bit 5)
//! - bit 1: structured: the payload is raw profiles separated by `\xffEMB`, built by the
//!   harness into a `PushRequest` over 1–4 series (shape byte); else the payload is the
//!   request body as sent
//! - bit 3: gzip each raw profile; bit 4: gzip each one again (gzip inside gzip)
//! - bit 2: the harness gzips the body and sends `Content-Encoding: gzip`
//! - bit 6: send `Content-Encoding: gzip` with the body as given (seeds carry real gzip)
#![no_main]

#[path = "ingest_common/mod.rs"]
mod ingest_common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use ingest_common as c;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let [flags, shape, payload @ ..] = data else {
        return;
    };
    let json = flags & 1 != 0;
    let structured = flags & 2 != 0;
    let wraps = u8::from(flags & 8 != 0) + u8::from(flags & 16 != 0);
    let built = structured.then(|| {
        let profiles = c::split(payload);
        c::push_request(&profiles, usize::from(shape % 4) + 1, wraps)
    });
    let mut body = match (&built, json) {
        (Some(r), true) => c::push_json(r),
        (Some(r), false) => r.encode_to_vec(),
        (None, _) => payload.to_vec(),
    };
    let mut request = Request::post("/push.v1.PusherService/Push");
    request = request.header(
        "content-type",
        match (json, flags & 32 != 0) {
            (true, _) => "application/json",
            (false, false) => "application/proto",
            (false, true) => "application/x-protobuf",
        },
    );
    if flags & 4 != 0 {
        body = c::gzip(&body);
        request = request.header("content-encoding", "gzip");
    } else if flags & 64 != 0 {
        request = request.header("content-encoding", "gzip");
    }
    let request = request.body(Body::from(body)).expect("request");
    let reply = c::send("ingest_push", request, |r| r.status == StatusCode::OK);
    reply.check_http("push");
    if reply.status == StatusCode::OK
        && let Some(r) = &built
    {
        c::check_accepted_profiles(r);
    }
});
