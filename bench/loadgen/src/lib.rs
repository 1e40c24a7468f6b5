//! The load generator behind `ember-loadgen` (`bench/server/run.sh`): pushes pprof files to
//! a server from N concurrent workers, each on its own keep-alive connection, and measures
//! the rate and latency of acknowledged pushes.
//!
//! Owns the two request shapes a benchmark needs: `push.v1` Connect pushes with a rotating
//! set of distinct label sets (live ingest), and legacy `/ingest` requests with explicit
//! `from`/`until` stepping through the past (back-filling a time range for query benchmarks).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod workload;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ember_http::{BlockingClient, ClientConfig, HttpError, Request};
use ember_proto::push::{PushRequest, RawProfileSeries, RawSample};
use ember_proto::types::LabelPair;
use prost::Message;

/// Why a load run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No profiles were given.
    #[error("no profiles to send")]
    NoProfiles,
    /// The server URL is not `http://` or `https://`.
    #[error("bad server URL {0:?}: expected http://host:port")]
    Url(String),
    /// The HTTP client could not be set up.
    #[error(transparent)]
    Http(#[from] HttpError),
}

/// Percent-encodes a query parameter value (RFC 3986 unreserved characters stay).
fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One keep-alive client per worker, as a fleet of agents would connect; proxies from the
/// environment are ignored (a benchmark talks to the server it names).
fn client() -> Result<BlockingClient, HttpError> {
    BlockingClient::new(&ClientConfig {
        env_proxy: false,
        ..ClientConfig::default()
    })
}

/// What each request carries.
#[derive(Debug, Clone)]
pub enum LoadMode {
    /// `POST /push.v1.PusherService/Push` (Connect, protobuf): one profile per request,
    /// labels `service_name=<service>` and `pod=pod-<i mod label_sets>`; the profile keeps
    /// its own timestamp.
    Push,
    /// `POST /ingest?name=<service>.cpu&format=pprof&from=..&until=..`: request `i` covers
    /// `[start + i*step, start + (i+1)*step)`, so a run fills a time range back to back.
    Backfill {
        /// Start of the first profile, unix seconds.
        start_seconds: i64,
        /// Seconds each profile covers.
        step_seconds: i64,
    },
}

/// Options of one load run.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Server base URL (`http://127.0.0.1:4040`).
    pub server: String,
    /// The pprof files' bytes (gzip'd or raw), used round-robin.
    pub profiles: Vec<Vec<u8>>,
    /// Concurrent workers, one connection each.
    pub workers: usize,
    /// Stop after this many requests (`None`: only the duration limits the run).
    pub count: Option<u64>,
    /// Stop starting requests after this long (`None`: only the count limits the run).
    pub duration: Option<Duration>,
    /// Distinct label sets (values of the `pod` label) in push mode.
    pub label_sets: usize,
    /// `service_name` of every profile.
    pub service: String,
    /// Request shape.
    pub mode: LoadMode,
    /// `X-Scope-OrgID` to send, if any.
    pub tenant: Option<String>,
    /// Per-profile series, parallel to `profiles` (empty: labels from `service` and
    /// `label_sets`, back-fill times from the request number). Generated workloads
    /// ([`workload`]) fill it so each profile goes with its own labels and time.
    pub series: Vec<SeriesMeta>,
}

/// The series and time one profile of `LoadOptions::profiles` is sent with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesMeta {
    /// Series labels (`service_name` first), sent as push labels or, in back-fill mode, as
    /// the legacy name `<service_name>.cpu{k=v,...}`.
    pub labels: Vec<(String, String)>,
    /// Start of the profile, unix seconds (the `from` of a back-fill request).
    pub time_seconds: i64,
}

/// Results of a load run.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Requests answered 2xx.
    pub ok: u64,
    /// Requests that failed (non-2xx or transport error).
    pub errors: u64,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    /// Wall time of the run.
    pub seconds: f64,
    /// pprof bytes of the acknowledged profiles.
    pub profile_bytes: u64,
    /// Request body bytes of the acknowledged requests.
    pub request_bytes: u64,
    /// Latency percentiles of acknowledged requests, milliseconds: p50, p90, p99, max.
    pub latency_ms: [f64; 4],
}

impl LoadReport {
    /// Acknowledged profiles per second.
    pub fn profiles_per_second(&self) -> f64 {
        self.ok as f64 / self.seconds.max(1e-9)
    }

    /// Acknowledged pprof megabytes (10^6) per second.
    pub fn megabytes_per_second(&self) -> f64 {
        self.profile_bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

fn request_for(
    opts: &LoadOptions,
    i: u64,
) -> (String, Vec<(&'static str, String)>, Vec<u8>, usize) {
    let at = (i % opts.profiles.len() as u64) as usize;
    let profile = &opts.profiles[at];
    if let Some(meta) = opts.series.get(at) {
        return series_request(opts, meta, profile);
    }
    match opts.mode {
        LoadMode::Push => {
            let mut labels = vec![LabelPair {
                name: "service_name".into(),
                value: opts.service.clone(),
            }];
            if opts.label_sets > 1 {
                labels.push(LabelPair {
                    name: "pod".into(),
                    value: format!("pod-{}", i % opts.label_sets as u64),
                });
            }
            push_request(labels, profile)
        }
        LoadMode::Backfill {
            start_seconds,
            step_seconds,
        } => {
            let from = start_seconds + i as i64 * step_seconds;
            let name = if opts.label_sets > 1 {
                format!(
                    "{}.cpu{{pod=pod-{}}}",
                    opts.service,
                    i % opts.label_sets as u64
                )
            } else {
                format!("{}.cpu", opts.service)
            };
            (
                format!(
                    "/ingest?name={}&format=pprof&from={from}&until={}",
                    url_encode(&name),
                    from + step_seconds
                ),
                vec![("Content-Type", "application/octet-stream".to_string())],
                profile.clone(),
                profile.len(),
            )
        }
    }
}

/// A `push.v1` Connect request carrying one profile with `labels`.
fn push_request(
    labels: Vec<LabelPair>,
    profile: &[u8],
) -> (String, Vec<(&'static str, String)>, Vec<u8>, usize) {
    let body = PushRequest {
        series: vec![RawProfileSeries {
            labels,
            samples: vec![RawSample {
                raw_profile: profile.to_vec(),
                id: String::new(),
            }],
        }],
    }
    .encode_to_vec();
    (
        "/push.v1.PusherService/Push".to_string(),
        vec![("Content-Type", "application/proto".to_string())],
        body,
        profile.len(),
    )
}

/// The request for a profile with its own series and time ([`SeriesMeta`]).
fn series_request(
    opts: &LoadOptions,
    meta: &SeriesMeta,
    profile: &[u8],
) -> (String, Vec<(&'static str, String)>, Vec<u8>, usize) {
    match opts.mode {
        LoadMode::Push => {
            let labels = meta
                .labels
                .iter()
                .map(|(name, value)| LabelPair {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect();
            push_request(labels, profile)
        }
        LoadMode::Backfill { step_seconds, .. } => {
            let service = meta
                .labels
                .iter()
                .find(|(k, _)| k == "service_name")
                .map_or(opts.service.as_str(), |(_, v)| v.as_str());
            let rest: Vec<String> = meta
                .labels
                .iter()
                .filter(|(k, _)| k != "service_name")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let name = if rest.is_empty() {
                format!("{service}.cpu")
            } else {
                format!("{service}.cpu{{{}}}", rest.join(","))
            };
            let from = meta.time_seconds;
            (
                format!(
                    "/ingest?name={}&format=pprof&from={from}&until={}",
                    url_encode(&name),
                    from + step_seconds
                ),
                vec![("Content-Type", "application/octet-stream".to_string())],
                profile.to_vec(),
                profile.len(),
            )
        }
    }
}

/// Makes `per_file` distinct variants of each profile, so a benchmark does not store the
/// same few profiles over and over (which would flatter de-duplication and compression):
/// every sample value is scaled by its own pseudo-random factor in [0.5, 1.5), zero values
/// stay zero, and the variant is stamped with the current time. Returns gzip'd pprof.
pub fn variants(
    profiles: &[Vec<u8>],
    per_file: usize,
) -> Result<Vec<Vec<u8>>, ember_pprof::PprofError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    // xorshift64*: deterministic, dependency-free, plenty for spreading values.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut out = Vec::with_capacity(profiles.len() * per_file.max(1));
    for v in 0..per_file.max(1) {
        for bytes in profiles {
            let mut p = ember_pprof::decode(bytes)?;
            for sample in &mut p.sample {
                for value in &mut sample.value {
                    let factor = 0.5 + (next() >> 11) as f64 / (1u64 << 53) as f64;
                    *value = ((*value as f64) * factor).round() as i64;
                }
            }
            p.time_nanos = now - v as i64 * 1_000_000;
            out.push(ember_pprof::encode_gzip(&p));
        }
    }
    Ok(out)
}

/// Runs the load and reports; fails only when the options are unusable.
pub fn run(opts: &LoadOptions) -> Result<LoadReport, LoadError> {
    if opts.profiles.is_empty() {
        return Err(LoadError::NoProfiles);
    }
    // Validates the URL and the client settings before any worker starts.
    if !(opts.server.starts_with("http://") || opts.server.starts_with("https://")) {
        return Err(LoadError::Url(opts.server.clone()));
    }
    client()?;
    let base = opts.server.trim_end_matches('/');
    let next = AtomicU64::new(0);
    let first_error: Mutex<Option<String>> = Mutex::new(None);
    let started = Instant::now();
    let results: Vec<(Vec<u32>, u64, u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..opts.workers.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut latencies = Vec::new();
                    let (mut errors, mut pbytes, mut rbytes) = (0u64, 0u64, 0u64);
                    let Ok(client) = client() else {
                        return (latencies, 1, 0, 0);
                    };
                    loop {
                        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
                            break;
                        }
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if opts.count.is_some_and(|c| i >= c) {
                            break;
                        }
                        let (path, headers, body, profile_len) = request_for(opts, i);
                        let body_len = body.len();
                        let mut request = Request::post(format!("{base}{path}"), body);
                        for (name, value) in &headers {
                            request = request.header(name, value);
                        }
                        if let Some(t) = &opts.tenant {
                            request = request.header("X-Scope-OrgID", t);
                        }
                        let t0 = Instant::now();
                        let result = client.send(request);
                        let micros = t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                        let failure = match result {
                            Ok(r) if r.is_success() => None,
                            Ok(r) => Some(format!(
                                "HTTP {}: {}",
                                r.status,
                                String::from_utf8_lossy(&r.body)
                            )),
                            Err(e) => Some(e.to_string()),
                        };
                        match failure {
                            None => {
                                latencies.push(micros);
                                pbytes += profile_len as u64;
                                rbytes += body_len as u64;
                            }
                            Some(f) => {
                                errors += 1;
                                let mut slot =
                                    first_error.lock().unwrap_or_else(|e| e.into_inner());
                                slot.get_or_insert(f);
                            }
                        }
                    }
                    (latencies, errors, pbytes, rbytes)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut report = LoadReport {
        seconds,
        first_error: first_error.into_inner().unwrap_or_else(|e| e.into_inner()),
        ..Default::default()
    };
    let mut all = Vec::new();
    for (lat, errors, pbytes, rbytes) in results {
        report.ok += lat.len() as u64;
        report.errors += errors;
        report.profile_bytes += pbytes;
        report.request_bytes += rbytes;
        all.extend(lat);
    }
    all.sort_unstable();
    let pct = |p: f64| -> f64 {
        if all.is_empty() {
            return 0.0;
        }
        let i = ((all.len() as f64 * p).ceil() as usize).clamp(1, all.len()) - 1;
        f64::from(all[i]) / 1e3
    };
    report.latency_ms = [pct(0.50), pct(0.90), pct(0.99), pct(1.0)];
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(mode: LoadMode) -> LoadOptions {
        LoadOptions {
            server: "http://127.0.0.1:1".into(),
            profiles: vec![vec![1, 2, 3], vec![4, 5]],
            workers: 1,
            count: Some(2),
            duration: None,
            label_sets: 100,
            service: "unused".into(),
            mode,
            tenant: None,
            series: vec![
                SeriesMeta {
                    labels: vec![
                        ("service_name".into(), "checkout".into()),
                        ("pod".into(), "checkout-abc-x1".into()),
                    ],
                    time_seconds: 1000,
                },
                SeriesMeta {
                    labels: vec![("service_name".into(), "cart".into())],
                    time_seconds: 1010,
                },
            ],
        }
    }

    #[test]
    fn series_go_with_their_profiles() {
        let opts = options(LoadMode::Backfill {
            start_seconds: 0,
            step_seconds: 10,
        });
        let (path, _, body, len) = request_for(&opts, 0);
        assert_eq!(
            path,
            "/ingest?name=checkout.cpu%7Bpod%3Dcheckout-abc-x1%7D&format=pprof&from=1000&until=1010"
        );
        assert_eq!((body, len), (vec![1, 2, 3], 3));
        let (path, _, _, _) = request_for(&opts, 3);
        assert!(path.starts_with("/ingest?name=cart.cpu&") && path.contains("from=1010&"));
        let (path, _, body, _) = request_for(&options(LoadMode::Push), 1);
        assert_eq!(path, "/push.v1.PusherService/Push");
        let push = PushRequest::decode(body.as_slice()).unwrap();
        assert_eq!(push.series[0].labels[0].value, "cart");
        assert_eq!(push.series[0].labels.len(), 1, "no pod label added");
        assert_eq!(push.series[0].samples[0].raw_profile, vec![4, 5]);
    }
}
