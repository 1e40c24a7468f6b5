//! Ingest handlers: Pyroscope's legacy `/ingest` and `push.v1.PusherService/Push` (Connect).
//!
//! Owns turning a request into validated pprof profiles with series labels, enforcing the
//! limits, and the durability contract: a request is answered 200 only after all its
//! profiles are in the write-ahead log and fsync'd.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use ember_pprof::{DecodeLimits, PprofError, Profile, ProfileBuilder, ProfileView};
use ember_store::{IngestRecord, LabelPair, Labels};
use prost::Message;

use crate::{ApiError, AppState, proto, tenant};

/// One profile to store: base labels, timestamp override, and the pprof bytes (gzip'd or
/// raw) exactly as they go into the log; `what` names it in errors (`series[0].samples[1]`).
/// It is decoded (and refused when invalid) by [`store_all`], once, before anything is logged.
struct Accepted {
    labels: Labels,
    time_nanos: i64,
    bytes: Vec<u8>,
    what: String,
}

pub(crate) fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Reads the body up to the limit (413 beyond) and undoes `Content-Encoding: gzip`.
async fn read_body(s: &AppState, headers: &HeaderMap, body: Body) -> Result<Vec<u8>, ApiError> {
    let limit = s.limits.max_body_bytes;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::too_large(
            "body_too_large",
            format!("request body exceeds the limit of {limit} bytes"),
        )
    })?;
    let encoding = headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match encoding.as_str() {
        "" | "identity" => Ok(bytes.to_vec()),
        "gzip" => {
            let max = s.limits.max_decompressed_bytes;
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(&bytes[..])
                .take(max + 1)
                .read_to_end(&mut out)
                .map_err(|e| ApiError::bad_request("bad_encoding", format!("gzip body: {e}")))?;
            if out.len() as u64 > max {
                return Err(ApiError::too_large(
                    "decompressed_too_large",
                    format!("decompressed body exceeds the limit of {max} bytes"),
                ));
            }
            Ok(out)
        }
        other => Err(ApiError::bad_request(
            "bad_encoding",
            format!("unsupported Content-Encoding {other:?} (use gzip or none)"),
        )),
    }
}

fn decode_limits(s: &AppState) -> DecodeLimits {
    DecodeLimits {
        max_decompressed_bytes: s.limits.max_decompressed_bytes,
    }
}

/// The API error for a profile that failed to decode: 413 past the size limit, else 400
/// naming the profile and what is wrong with it.
fn profile_error(what: &str, e: PprofError) -> ApiError {
    match e {
        PprofError::TooLarge { .. } => {
            ApiError::too_large("decompressed_too_large", format!("{what}: {e}"))
        }
        e => ApiError::bad_request("bad_profile", format!("{what}: invalid pprof: {e}")),
    }
}

/// Refuses decoded profiles the store cannot use: no sample types, too many samples.
fn check_shape(
    s: &AppState,
    what: &str,
    sample_types: usize,
    samples: usize,
) -> Result<(), ApiError> {
    if sample_types == 0 {
        return Err(ApiError::bad_request(
            "bad_profile",
            format!("{what}: invalid pprof: profile has no sample types"),
        ));
    }
    if samples > s.limits.max_samples_per_profile {
        return Err(ApiError::bad_request(
            "too_many_samples",
            format!(
                "{what}: {samples} samples exceed the limit of {} per profile",
                s.limits.max_samples_per_profile
            ),
        ));
    }
    Ok(())
}

/// Decodes into an owned profile, for the routes that edit it before storing (legacy).
fn decode_profile(s: &AppState, bytes: &[u8], what: &str) -> Result<Profile, ApiError> {
    let profile = ember_pprof::decode_with_limits(bytes, &decode_limits(s))
        .map_err(|e| profile_error(what, e))?;
    check_shape(s, what, profile.sample_type.len(), profile.sample.len())?;
    Ok(profile)
}

fn check_labels(s: &AppState, labels: &Labels) -> Result<(), ApiError> {
    let l = &s.limits;
    if labels.len() > l.max_labels_per_series {
        return Err(ApiError::bad_request(
            "too_many_labels",
            format!(
                "series has {} labels; the limit is {}",
                labels.len(),
                l.max_labels_per_series
            ),
        ));
    }
    for (n, v) in labels {
        let valid_name = !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !valid_name {
            return Err(ApiError::bad_request(
                "bad_label",
                format!("invalid label name {n:?} (use letters, digits, '_' and '.')"),
            ));
        }
        if n.len() > l.max_label_name_length {
            return Err(ApiError::bad_request(
                "label_too_long",
                format!(
                    "label name {:?}... is longer than {} bytes",
                    n.chars().take(40).collect::<String>(),
                    l.max_label_name_length
                ),
            ));
        }
        if v.len() > l.max_label_value_length {
            return Err(ApiError::bad_request(
                "label_too_long",
                format!(
                    "value of label {n:?} is longer than {} bytes",
                    l.max_label_value_length
                ),
            ));
        }
    }
    Ok(())
}

/// Validates, logs durably, then applies `items`; the shared tail of every ingest route.
async fn store_all(
    s: &Arc<AppState>,
    tenant: String,
    items: Vec<Accepted>,
    body_bytes: usize,
) -> Result<(), ApiError> {
    // Decoded once, straight from the request bytes (the views borrow them), and kept until
    // the store has interned them after the log acknowledged.
    let limits = decode_limits(s);
    let mut raws = Vec::with_capacity(items.len());
    for item in &items {
        raws.push(
            ember_pprof::decompress(&item.bytes, &limits)
                .map_err(|e| profile_error(&item.what, e))?,
        );
    }
    let mut views = Vec::with_capacity(items.len());
    for (item, raw) in items.iter().zip(&raws) {
        let view = ProfileView::parse(raw).map_err(|e| profile_error(&item.what, e))?;
        check_shape(s, &item.what, view.sample_type.len(), view.sample.len())?;
        views.push(view);
    }
    let mut series = Vec::with_capacity(items.len());
    for (item, view) in items.iter().zip(&views) {
        check_labels(s, &item.labels)?;
        series.push(ember_store::series_labels(&item.labels, view));
    }
    s.store.check_limits(&tenant, series.iter().flatten())?;
    let received = now_nanos();
    let records: Vec<IngestRecord> = items
        .iter()
        .map(|item| IngestRecord {
            tenant: tenant.clone(),
            labels: item
                .labels
                .iter()
                .map(|(name, value)| LabelPair {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect(),
            time_nanos: item.time_nanos,
            profile: item.bytes.clone(),
            received_nanos: received,
        })
        .collect();
    let mut waits = Vec::with_capacity(records.len());
    for r in &records {
        let (tx, rx) = tokio::sync::oneshot::channel();
        s.store.append(
            r,
            Box::new(move |res| {
                let _ = tx.send(res);
            }),
        );
        waits.push(rx);
    }
    for w in waits {
        w.await
            .map_err(|_| ApiError::internal("write-ahead log writer stopped"))??;
    }
    for ((r, view), labels) in records.iter().zip(&views).zip(series) {
        s.store.apply(r, view, labels);
    }
    let m = &s.metrics;
    m.ingested_profiles
        .fetch_add(items.len() as u64, Ordering::Relaxed);
    m.ingested_bytes
        .fetch_add(body_bytes as u64, Ordering::Relaxed);
    Ok(())
}

/// Counts one accepted ingest request and its latency.
pub(crate) fn count_success(s: &AppState, started: Instant) {
    s.metrics.ingest_requests.fetch_add(1, Ordering::Relaxed);
    s.metrics
        .ingest_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
}

fn finish(s: &AppState, started: Instant, result: Result<Response, ApiError>) -> Response {
    match result {
        Ok(r) => {
            count_success(s, started);
            r
        }
        Err(e) => {
            s.metrics.reject(e.reason);
            e.into_response()
        }
    }
}

/// `POST /push.v1.PusherService/Push` (Connect; gRPC requests go to [`crate::grpc`]).
pub(crate) async fn push(State(s): State<Arc<AppState>>, request: Request) -> Response {
    if crate::grpc::is_grpc(request.headers()) {
        return crate::grpc::push(&s, request).await;
    }
    let started = Instant::now();
    let result = push_inner(&s, request).await;
    finish(&s, started, result)
}

async fn push_inner(s: &Arc<AppState>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let tenant = tenant(s, &parts.headers)?;
    let content_type = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/proto")
        .to_ascii_lowercase();
    let json = content_type.starts_with("application/json");
    if !json
        && !content_type.starts_with("application/proto")
        && !content_type.starts_with("application/x-protobuf")
    {
        return Err(ApiError::bad_request(
            "bad_content_type",
            format!(
                "unsupported Content-Type {content_type:?}: use application/proto, application/json (Connect) or application/grpc"
            ),
        ));
    }
    let body = read_body(s, &parts.headers, body).await?;
    let body_len = body.len();
    let request = if json {
        push_from_json(&body)?
    } else {
        proto::PushRequest::decode(&body[..])
            .map_err(|e| ApiError::bad_request("bad_request", format!("PushRequest: {e}")))?
    };
    ingest_push(s, tenant, request, body_len).await?;
    Ok(if json {
        ([("content-type", "application/json")], "{}").into_response()
    } else {
        (
            [("content-type", "application/proto")],
            proto::PushResponse {}.encode_to_vec(),
        )
            .into_response()
    })
}

/// Validates and durably stores every profile of a decoded `PushRequest` (Connect or gRPC).
pub(crate) async fn ingest_push(
    s: &Arc<AppState>,
    tenant: String,
    request: proto::PushRequest,
    body_len: usize,
) -> Result<(), ApiError> {
    s.take_push_token(&tenant)?;
    let mut items = Vec::new();
    for (si, series) in request.series.into_iter().enumerate() {
        let labels: Labels = series
            .labels
            .iter()
            .map(|l| (l.name.clone(), l.value.clone()))
            .collect();
        for (pi, sample) in series.samples.into_iter().enumerate() {
            items.push(Accepted {
                labels: labels.clone(),
                time_nanos: 0,
                bytes: sample.raw_profile,
                what: format!("series[{si}].samples[{pi}]"),
            });
        }
    }
    store_all(s, tenant, items, body_len).await
}

fn push_from_json(body: &[u8]) -> Result<proto::PushRequest, ApiError> {
    let bad = |m: String| ApiError::bad_request("bad_request", m);
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("PushRequest JSON: {e}")))?;
    let mut out = proto::PushRequest::default();
    let empty = Vec::new();
    let series = match v.get("series") {
        None | Some(serde_json::Value::Null) => &empty,
        Some(serde_json::Value::Array(a)) => a,
        Some(_) => return Err(bad("PushRequest JSON: \"series\" must be an array".into())),
    };
    for (si, s) in series.iter().enumerate() {
        let mut rs = proto::RawProfileSeries::default();
        for (li, l) in s
            .get("labels")
            .and_then(|l| l.as_array())
            .unwrap_or(&empty)
            .iter()
            .enumerate()
        {
            let field = |k: &str| l.get(k).and_then(|x| x.as_str()).map(str::to_string);
            let (Some(name), Some(value)) = (field("name"), field("value")) else {
                return Err(bad(format!(
                    "series[{si}].labels[{li}]: needs string \"name\" and \"value\""
                )));
            };
            rs.labels.push(proto::LabelPair { name, value });
        }
        for (pi, p) in s
            .get("samples")
            .and_then(|l| l.as_array())
            .unwrap_or(&empty)
            .iter()
            .enumerate()
        {
            let raw = p
                .get("rawProfile")
                .or_else(|| p.get("raw_profile"))
                .and_then(|x| x.as_str())
                .ok_or_else(|| {
                    bad(format!(
                        "series[{si}].samples[{pi}]: missing \"rawProfile\""
                    ))
                })?;
            let raw_profile = proto::base64_decode(raw).ok_or_else(|| {
                bad(format!(
                    "series[{si}].samples[{pi}].rawProfile: invalid base64"
                ))
            })?;
            let id = p
                .get("ID")
                .or_else(|| p.get("id"))
                .and_then(|x| x.as_str())
                .unwrap_or("")
                .to_string();
            rs.samples.push(proto::RawSample { raw_profile, id });
        }
        out.series.push(rs);
    }
    Ok(out)
}

/// Parses a unix timestamp in seconds, milliseconds, microseconds or nanoseconds (by magnitude).
pub(crate) fn parse_unix(text: &str) -> Option<i64> {
    let v: f64 = text.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let ns = if v < 1e11 {
        v * 1e9
    } else if v < 1e14 {
        v * 1e6
    } else if v < 1e17 {
        v * 1e3
    } else {
        v
    };
    Some(ns as i64)
}

/// Splits `app.cpu{k=v,k2=v2}` into (application, sample type suffix, labels).
fn parse_legacy_name(name: &str) -> Result<(String, Option<String>, Labels), ApiError> {
    let bad = |m: String| ApiError::bad_request("bad_name", m);
    let (head, tags) = match name.find('{') {
        Some(i) => {
            let rest = name[i + 1..].trim_end();
            let inner = rest
                .strip_suffix('}')
                .ok_or_else(|| bad(format!("name {name:?}: missing closing '}}'")))?;
            (&name[..i], inner)
        }
        None => (name, ""),
    };
    let head = head.trim();
    if head.is_empty() {
        return Err(bad("missing application name in \"name\"".into()));
    }
    let mut labels = Labels::new();
    for pair in tags.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("name {name:?}: tag {pair:?} is not key=value")))?;
        labels.push((k.trim().to_string(), v.trim().trim_matches('"').to_string()));
    }
    let (app, suffix) = match head.rsplit_once('.') {
        Some((a, s)) if !a.is_empty() && !s.is_empty() => (a.to_string(), Some(s.to_string())),
        _ => (head.to_string(), None),
    };
    Ok((app, suffix, labels))
}

/// `POST /ingest` and `/pyroscope/ingest`.
pub(crate) async fn legacy(
    State(s): State<Arc<AppState>>,
    Query(params): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    let started = Instant::now();
    let result = legacy_inner(&s, params, request).await;
    finish(&s, started, result)
}

async fn legacy_inner(
    s: &Arc<AppState>,
    params: HashMap<String, String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let tenant = tenant(s, &parts.headers)?;
    let name = params.get("name").ok_or_else(|| {
        ApiError::bad_request(
            "bad_name",
            "missing query parameter \"name\" (e.g. app.cpu{env=prod})",
        )
    })?;
    let (app, suffix, mut labels) = parse_legacy_name(name)?;
    let time = |key: &str| -> Result<Option<i64>, ApiError> {
        match params.get(key) {
            None => Ok(None),
            Some(t) => parse_unix(t).map(Some).ok_or_else(|| {
                ApiError::bad_request("bad_time", format!("{key}={t:?} is not a unix timestamp"))
            }),
        }
    };
    let from = time("from")?;
    let until = time("until")?;
    let format = params.get("format").map(String::as_str).unwrap_or("folded");
    let spy = params.get("spyName").cloned().unwrap_or_default();
    // Pyroscope clients send `sum` (the default) or `average`; an averaged series is marked
    // with a label so that queries average its profiles over time instead of adding them.
    match params.get("aggregationType").map(String::as_str) {
        None | Some("") | Some("sum") => {}
        Some("average") => labels.push((
            ember_store::AGGREGATION_LABEL.into(),
            ember_store::AVERAGE.into(),
        )),
        Some(other) => {
            return Err(ApiError::bad_request(
                "bad_aggregation_type",
                format!("aggregationType={other:?} is not supported (use sum or average)"),
            ));
        }
    }
    labels.push((ember_store::SERVICE_LABEL.into(), app));
    if !spy.is_empty() {
        labels.push(("pyroscope_spy".into(), spy));
    }
    let content_type = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let headers = parts.headers.clone();
    let (bytes, body_len) = if content_type.starts_with("multipart/") {
        let raw = read_body(s, &headers, body).await?;
        (raw, 0)
    } else {
        let raw = read_body(s, &headers, body).await?;
        let n = raw.len();
        (raw, n)
    };
    let body_len = if body_len == 0 { bytes.len() } else { body_len };
    // The log keeps the client's (usually gzip'd) bytes when the profile is stored unchanged.
    let mut original = None;
    let profile = match format {
        "pprof" => {
            let (pprof_bytes, config) = if content_type.starts_with("multipart/") {
                multipart_profile(&content_type, bytes).await?
            } else {
                (bytes, None)
            };
            let mut profile = decode_profile(s, &pprof_bytes, "profile")?;
            match config {
                Some(config) => apply_sample_type_config(&mut profile, &config)?,
                None => original = Some(pprof_bytes),
            }
            profile
        }
        "folded" | "trie" | "" | "lines" => {
            let text = String::from_utf8_lossy(&bytes);
            folded_profile(
                s,
                &text,
                format == "lines",
                suffix.as_deref(),
                &params,
                from,
                until,
            )?
        }
        other => {
            return Err(ApiError::bad_request(
                "bad_format",
                format!("format={other:?} is not supported (use pprof, folded or lines)"),
            ));
        }
    };
    let name_label = match suffix.as_deref() {
        Some(sfx) => ember_store::default_profile_name(sfx).to_string(),
        None => {
            let first = profile
                .sample_type
                .first()
                .map(|t| ember_pprof::string(&profile, t.r#type).to_string())
                .unwrap_or_default();
            ember_store::default_profile_name(&first).to_string()
        }
    };
    labels.push((ember_store::NAME_LABEL.into(), name_label));
    let bytes = original.unwrap_or_else(|| ember_pprof::encode(&profile));
    // Legacy clients describe the time with from/until; without them the profile is "now".
    let item = Accepted {
        labels,
        time_nanos: from.unwrap_or_else(now_nanos),
        bytes,
        what: "profile".into(),
    };
    store_all(s, tenant, vec![item], body_len).await?;
    Ok((axum::http::StatusCode::OK, "").into_response())
}

/// The `profile` (and optional `sample_type_config`) fields of a multipart body.
async fn multipart_profile(
    content_type: &str,
    body: Vec<u8>,
) -> Result<(Vec<u8>, Option<serde_json::Value>), ApiError> {
    let request = axum::http::Request::builder()
        .header("content-type", content_type)
        .body(Body::from(body))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut mp =
        <axum::extract::Multipart as axum::extract::FromRequest<()>>::from_request(request, &())
            .await
            .map_err(|e| ApiError::bad_request("bad_multipart", format!("multipart body: {e}")))?;
    let mut profile = None;
    let mut config = None;
    while let Some(field) = mp
        .next_field()
        .await
        .map_err(|e| ApiError::bad_request("bad_multipart", format!("multipart body: {e}")))?
    {
        let name = field.name().unwrap_or("").to_string();
        let data = field.bytes().await.map_err(|e| {
            ApiError::bad_request("bad_multipart", format!("multipart field {name:?}: {e}"))
        })?;
        match name.as_str() {
            "profile" => profile = Some(data.to_vec()),
            "sample_type_config" => {
                config = Some(serde_json::from_slice(&data).map_err(|e| {
                    ApiError::bad_request("bad_multipart", format!("sample_type_config: {e}"))
                })?)
            }
            _ => {}
        }
    }
    let profile = profile.ok_or_else(|| {
        ApiError::bad_request("bad_multipart", "multipart body has no \"profile\" field")
    })?;
    Ok((profile, config))
}

/// Applies Pyroscope's `sample_type_config`: `{"<sample type>": {"display-name": "...", "units": "..."}}`
/// renames sample types and sets their units.
fn apply_sample_type_config(
    profile: &mut Profile,
    config: &serde_json::Value,
) -> Result<(), ApiError> {
    let Some(map) = config.as_object() else {
        return Err(ApiError::bad_request(
            "bad_multipart",
            "sample_type_config must be a JSON object",
        ));
    };
    for i in 0..profile.sample_type.len() {
        let vt = profile.sample_type[i];
        let t = ember_pprof::string(profile, vt.r#type).to_string();
        let Some(entry) = map.get(&t) else { continue };
        if let Some(display) = entry.get("display-name").and_then(|v| v.as_str()) {
            profile.string_table.push(display.to_string());
            profile.sample_type[i].r#type = profile.string_table.len() as i64 - 1;
        }
        if let Some(units) = entry.get("units").and_then(|v| v.as_str()) {
            let unit = match units {
                "objects" => "count",
                u => u,
            };
            profile.string_table.push(unit.to_string());
            profile.sample_type[i].unit = profile.string_table.len() as i64 - 1;
        }
    }
    Ok(())
}

/// Builds a pprof profile from folded (`stack count`) or `lines` (one stack per line) text.
fn folded_profile(
    s: &AppState,
    text: &str,
    lines_format: bool,
    suffix: Option<&str>,
    params: &HashMap<String, String>,
    from: Option<i64>,
    until: Option<i64>,
) -> Result<Profile, ApiError> {
    let units = params.get("units").map(String::as_str).unwrap_or("samples");
    let sample_rate: i64 = match params.get("sampleRate") {
        None => 100,
        Some(r) => r.parse::<i64>().ok().filter(|r| *r > 0).ok_or_else(|| {
            ApiError::bad_request(
                "bad_sample_rate",
                format!("sampleRate={r:?} is not a positive integer"),
            )
        })?,
    };
    let sfx = suffix.unwrap_or("cpu");
    // CPU samples are stored in nanoseconds (samples × period), as Pyroscope converts them.
    let cpu = units == "samples" && matches!(sfx, "cpu" | "itimer" | "wall" | "samples");
    let (sample_type, unit, factor) = if cpu {
        (
            if sfx == "samples" { "cpu" } else { sfx },
            "nanoseconds",
            1_000_000_000 / sample_rate,
        )
    } else {
        let unit = match units {
            "objects" | "goroutines" | "lock_samples" | "samples" => "count",
            "bytes" => "bytes",
            "lock_nanoseconds" | "nanoseconds" => "nanoseconds",
            other => other,
        };
        (sfx, unit, 1)
    };
    let mut b = ProfileBuilder::new(&[(sample_type, unit)]);
    if cpu {
        b.set_period(("cpu", "nanoseconds"), factor);
    }
    if let (Some(f), Some(u)) = (from, until) {
        b.set_time(f, u.saturating_sub(f).max(0));
    }
    let mut samples = 0usize;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let (stack, count) = if lines_format {
            (line, 1i64)
        } else {
            let Some((stack, count)) = line.rsplit_once(' ') else {
                return Err(ApiError::bad_request(
                    "bad_profile",
                    format!("line {}: expected \"stack count\"", n + 1),
                ));
            };
            let count: i64 = count.trim().parse().map_err(|_| {
                ApiError::bad_request(
                    "bad_profile",
                    format!("line {}: count {count:?} is not an integer", n + 1),
                )
            })?;
            (stack, count)
        };
        samples += 1;
        if samples > s.limits.max_samples_per_profile {
            return Err(ApiError::bad_request(
                "too_many_samples",
                format!(
                    "more than {} stacks in one profile",
                    s.limits.max_samples_per_profile
                ),
            ));
        }
        let frames: Vec<&str> = stack.split(';').collect();
        b.add_folded_stack(&frames, &[count.saturating_mul(factor)]);
    }
    Ok(b.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_units_by_magnitude() {
        let ns = 1_700_000_000_000_000_000i64;
        assert_eq!(parse_unix("1700000000"), Some(ns));
        assert_eq!(parse_unix("1700000000000"), Some(ns));
        assert_eq!(parse_unix("1700000000000000"), Some(ns));
        assert_eq!(parse_unix("1700000000000000000"), Some(ns));
        assert_eq!(parse_unix("x"), None);
        assert_eq!(parse_unix("-5"), None);
    }

    #[test]
    fn legacy_names() {
        let (app, sfx, labels) = parse_legacy_name("my.app.cpu{env=prod, region=eu-1}").unwrap();
        assert_eq!(app, "my.app");
        assert_eq!(sfx.as_deref(), Some("cpu"));
        assert_eq!(labels.len(), 2);
        assert!(parse_legacy_name("{a=b}").is_err());
        assert!(parse_legacy_name("app.cpu{a}").is_err());
        assert!(parse_legacy_name("app.cpu{a=b").is_err());
    }
}
