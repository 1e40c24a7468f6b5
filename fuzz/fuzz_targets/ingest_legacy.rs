//! Fuzz target: Pyroscope's legacy `POST /ingest`, in-process (see `ingest_common`): the
//! body's `Content-Encoding: gzip`, then per `format`: folded text, `lines`, a raw pprof body,
//! or multipart (`profile` and an optional `sample_type_config`), then the store's decoding.
//!
//! Input: a flags byte, a shape byte, then the payload.
//! - bits 0–1: `format=folded`, `lines`, `pprof` (raw body) or `pprof` as multipart
//! - bit 2: the harness gzips the body and sends `Content-Encoding: gzip`
//! - bit 6: send `Content-Encoding: gzip` with the body as given (seeds carry real gzip)
//! - bit 3: gzip the profile itself (pprof), inside the body's own gzip with bit 2
//! - bit 4: multipart with a `sample_type_config` part: the payload is `config\xffEMBprofile`
//! - bit 5: `aggregationType=average`
//! - bit 7: multipart as given: the payload is the whole multipart body (boundary `FUZZ`)
//! - shape byte: the name's suffix (`cpu`, `alloc_objects`, `inuse_space`, `wall`, none),
//!   `units` and `sampleRate`
#![no_main]

#[path = "ingest_common/mod.rs"]
mod ingest_common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use ingest_common as c;
use libfuzzer_sys::fuzz_target;

/// A multipart body with a `profile` file part and, when given, a `sample_type_config` part.
fn multipart(boundary: &str, profile: &[u8], config: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut part = |name: &str, filename: &str, data: &[u8]| {
        out.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    };
    part("profile", "profile.pprof", profile);
    if let Some(config) = config {
        part("sample_type_config", "sample_type_config.json", config);
    }
    out.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    out
}

fuzz_target!(|data: &[u8]| {
    let [flags, shape, payload @ ..] = data else {
        return;
    };
    let suffix = [".cpu", ".alloc_objects", ".inuse_space", ".wall", ""][usize::from(shape % 5)];
    let units = ["samples", "objects", "bytes", "lock_nanoseconds"][usize::from(shape / 5 % 4)];
    let sample_rate = [100, 1, 997][usize::from(shape / 20 % 3)];
    let format = ["folded", "lines", "pprof", "pprof"][usize::from(flags & 3)];
    let is_multipart = flags & 3 == 3 || flags & 128 != 0;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut uri = format!(
        "/ingest?name=fuzz{suffix}%7Benv%3Df%7D&format={}&from={}&until={now}&units={units}&sampleRate={sample_rate}&spyName=fuzz",
        if flags & 128 != 0 { "pprof" } else { format },
        now - 10
    );
    if flags & 32 != 0 {
        uri.push_str("&aggregationType=average");
    }
    let boundary = "FUZZ";
    let mut body = if flags & 128 != 0 {
        payload.to_vec()
    } else if is_multipart {
        let (config, profile) = if flags & 16 != 0 {
            let mut parts = c::split(payload);
            let config = parts.remove(0);
            (Some(config), parts.concat())
        } else {
            (None, payload.to_vec())
        };
        let profile = if flags & 8 != 0 {
            c::gzip(&profile)
        } else {
            profile
        };
        multipart(boundary, &profile, config)
    } else if format == "pprof" && flags & 8 != 0 {
        c::gzip(payload)
    } else {
        payload.to_vec()
    };
    let mut request = Request::post(uri);
    if is_multipart {
        request = request.header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        );
    } else {
        request = request.header("content-type", "application/octet-stream");
    }
    if flags & 4 != 0 {
        body = c::gzip(&body);
        request = request.header("content-encoding", "gzip");
    } else if flags & 64 != 0 {
        request = request.header("content-encoding", "gzip");
    }
    let request = request.body(Body::from(body)).expect("request");
    let reply = c::send("ingest_legacy", request, |r| r.status == StatusCode::OK);
    reply.check_http("ingest");
});
