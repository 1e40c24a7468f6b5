//! What the three ingest targets share: the server's routes in-process over a store on tmpfs
//! (`ember_server::fuzzing::router`), one request at a time, and the builders of nested
//! payloads (gzip wrapping, multipart, `PushRequest` in protobuf and JSON, gRPC framing).
//!
//! Every input is one HTTP request. Its first byte holds flags saying which layers the
//! harness adds around the rest (so mutations land on the innermost bytes while the server
//! still has to peel every layer) and which it must find in the input as given (so seeds
//! with real nested gzip, bombs and framing are kept and mutated byte for byte).
//!
//! What counts as a bug besides a panic, a hang or running out of memory: any 5xx answer (a
//! request is either stored or refused with a 4xx naming the problem), and, for requests the
//! server accepted, a profile that `ember_pprof::decode` cannot read back.

#![allow(dead_code)] // each target uses part of it

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;

/// Decompressed-size cap of the fuzzed server: 4 MiB instead of the default 64 MiB, so a bomb
/// found by the fuzzer costs milliseconds, not seconds, and the run explores more inputs.
pub const MAX_DECOMPRESSED: u64 = 4 << 20;

/// Accepted requests after which the store is dropped and a fresh one opened, so the head and
/// the write-ahead log (on tmpfs, i.e. in memory) do not grow for the whole run.
const ROTATE_AFTER: u32 = 2_000;

/// The answer to one request, trailers included (gRPC puts its status there).
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub trailers: Option<HeaderMap>,
    pub body: Vec<u8>,
}

impl Reply {
    /// A header of the answer, from the headers or else the trailers.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .or_else(|| self.trailers.as_ref().and_then(|t| t.get(name)))
            .and_then(|v| v.to_str().ok())
    }

    /// Panics on any 5xx: the server must store a request or refuse it with a 4xx.
    pub fn check_http(&self, what: &str) {
        assert!(
            !self.status.is_server_error(),
            "{what}: server error {}: {}",
            self.status,
            String::from_utf8_lossy(&self.body)
        );
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    router: Option<axum::Router>,
    dir: PathBuf,
    target: &'static str,
    generation: u32,
    accepted: u32,
}

impl Harness {
    fn open(target: &'static str, generation: u32) -> Harness {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        // tmpfs when there is one: every accepted request is fsync'd to the log.
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        if generation == 0 {
            remove_stale(&base, target);
        }
        let dir = base.join(format!(
            "ember-fuzz-{target}-{}-{generation}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let limits = ember_server::Limits {
            max_decompressed_bytes: MAX_DECOMPRESSED,
            max_body_bytes: 1 << 20,
            max_series_per_tenant: 50_000,
            ..Default::default()
        };
        let router = {
            let _guard = runtime.enter();
            ember_server::fuzzing::router(&dir, limits).expect("opening the fuzz store")
        };
        Harness {
            runtime,
            router: Some(router),
            dir,
            target,
            generation,
            accepted: 0,
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // The store closes (its log writer joins) before its directory goes.
        drop(self.router.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

static HARNESS: Mutex<Option<Harness>> = Mutex::new(None);

/// libFuzzer ends the process with `exit`, so the last store's directory is never dropped:
/// the next run removes those of processes that are gone.
fn remove_stale(base: &std::path::Path, target: &str) {
    let prefix = format!("ember-fuzz-{target}-");
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Sends `request` to the in-process server of `target` and collects the whole answer.
/// `accepted` decides from the reply whether the request was stored (counted for rotation).
pub fn send(target: &'static str, request: Request<Body>, accepted: fn(&Reply) -> bool) -> Reply {
    let mut slot = HARNESS.lock().unwrap_or_else(|e| e.into_inner());
    if slot.as_ref().is_some_and(|h| h.accepted >= ROTATE_AFTER) {
        let generation = slot.as_ref().map_or(0, |h| h.generation + 1);
        drop(slot.take());
        *slot = Some(Harness::open(target, generation));
    }
    let h = slot.get_or_insert_with(|| Harness::open(target, 0));
    debug_assert_eq!(h.target, target);
    let router = h.router.clone().expect("router");
    let reply = h.runtime.block_on(async move {
        let response = router.oneshot(request).await.expect("infallible router");
        let (parts, body) = response.into_parts();
        let collected = body.collect().await.expect("response body");
        let trailers = collected.trailers().cloned();
        Reply {
            status: parts.status,
            headers: parts.headers,
            trailers,
            body: collected.to_bytes().to_vec(),
        }
    });
    if accepted(&reply) {
        h.accepted += 1;
    }
    // `EMBER_FUZZ_VERBOSE=1 TARGET corpus/TARGET -runs=0` shows what each seed gets back.
    if std::env::var_os("EMBER_FUZZ_VERBOSE").is_some() {
        let message = reply.header("grpc-message").map(str::to_string);
        let body = String::from_utf8_lossy(&reply.body[..reply.body.len().min(160)]).to_string();
        eprintln!(
            "[{target}] {} grpc-status={:?} {:?} {body}",
            reply.status,
            reply.header("grpc-status"),
            message
        );
    }
    reply
}

/// gzip of `data` (fast level: the harness's own work should stay small).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).expect("gzip to memory");
    e.finish().expect("gzip to memory")
}

/// Splits `data` at every `SEPARATOR` (so one input can carry several profiles).
pub const SEPARATOR: &[u8] = b"\xffEMB";

pub fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) {
        parts.push(&rest[..at]);
        rest = &rest[at + SEPARATOR.len()..];
    }
    parts.push(rest);
    parts
}

/// Standard base64 with padding (the protobuf JSON mapping of `bytes`).
pub fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A `PushRequest` with `profiles` spread round-robin over `series` series (1–4), each raw
/// profile gzip'd `wraps` times (0, 1, or 2 for gzip inside gzip).
pub fn push_request(
    profiles: &[&[u8]],
    series: usize,
    wraps: u8,
) -> ember_proto::push::PushRequest {
    use ember_proto::push::{PushRequest, RawProfileSeries, RawSample};
    use ember_proto::types::LabelPair;
    let series = series.clamp(1, 4);
    let mut request = PushRequest::default();
    for i in 0..series {
        request.series.push(RawProfileSeries {
            labels: vec![
                LabelPair {
                    name: "__name__".into(),
                    value: "process_cpu".into(),
                },
                LabelPair {
                    name: "service_name".into(),
                    value: format!("fuzz-{i}"),
                },
            ],
            samples: Vec::new(),
        });
    }
    for (i, p) in profiles.iter().enumerate() {
        let mut raw = p.to_vec();
        for _ in 0..wraps {
            raw = gzip(&raw);
        }
        request.series[i % series].samples.push(RawSample {
            raw_profile: raw,
            id: String::new(),
        });
    }
    request
}

/// The protobuf JSON form of `request` (`rawProfile` as base64).
pub fn push_json(request: &ember_proto::push::PushRequest) -> Vec<u8> {
    let mut out = String::from("{\"series\":[");
    for (i, s) in request.series.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"labels\":[");
        for (j, l) in s.labels.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "{{\"name\":{:?},\"value\":{:?}}}",
                l.name, l.value
            ));
        }
        out.push_str("],\"samples\":[");
        for (j, p) in s.samples.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "{{\"rawProfile\":\"{}\"}}",
                base64(&p.raw_profile)
            ));
        }
        out.push_str("]}");
    }
    out.push_str("]}");
    out.into_bytes()
}

/// For a request the server accepted: every raw profile must also decode with the owned
/// decoder under the same cap (the store parsed it with the borrowed `ProfileView`).
pub fn check_accepted_profiles(request: &ember_proto::push::PushRequest) {
    let limits = ember_pprof::DecodeLimits {
        max_decompressed_bytes: MAX_DECOMPRESSED,
    };
    for s in &request.series {
        for p in &s.samples {
            let profile = ember_pprof::decode_with_limits(&p.raw_profile, &limits)
                .expect("the server accepted a profile that ember_pprof::decode refuses");
            ember_pprof::validate(&profile)
                .expect("the server accepted a profile that does not validate");
        }
    }
}
