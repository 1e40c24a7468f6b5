//! `POST /ingest` and `POST /pyroscope/ingest`: Pyroscope's legacy ingest.
//!
//! Owns the legacy request shape: the series in `name=app.cpu{k=v}`, the time in
//! `from`/`until`, `aggregationType` (`average` marks the series so queries average it),
//! and the body formats: `folded` (default), `lines`, or `pprof` (raw, or multipart with a
//! `profile` field and an optional `sample_type_config`). Each becomes a one-profile
//! [`IngestBatch`]; folded text and edited profiles are built into pprof here.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::response::{IntoResponse, Response};
use ember_pprof::{DecodeLimits, Profile, ProfileBuilder};
use ember_query::parse::{now_nanos, parse_unix};
use ember_store::{IngestBatch, IngestError, IngestProfile, Labels};

use crate::ingest::{self, Converted};
use crate::{ApiError, AppState, tenant};

/// What the query string says about the profile, parsed before the body is read.
struct Legacy {
    labels: Labels,
    /// The sample type suffix of `name` (`app.cpu` → `cpu`).
    suffix: Option<String>,
    from: Option<i64>,
    until: Option<i64>,
    format: String,
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
    ingest::finish(&s, started, result)
}

async fn legacy_inner(
    s: &Arc<AppState>,
    params: HashMap<String, String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let tenant = tenant(s, &parts.headers)?;
    let legacy = parse_params(&params)?;
    if !matches!(
        legacy.format.as_str(),
        "pprof" | "folded" | "trie" | "" | "lines"
    ) {
        return Err(ApiError::bad_request(
            "bad_format",
            format!(
                "format={:?} is not supported (use pprof, folded or lines)",
                legacy.format
            ),
        ));
    }
    let content_type = crate::header(&parts.headers, "content-type")
        .unwrap_or("")
        .to_string();
    let bytes = ingest::read_body(s, &parts.headers, body).await?;
    let body_bytes = bytes.len();
    // Multipart is only split here (the parts are already in memory); decoding is below.
    let (bytes, config) = if legacy.format == "pprof" && content_type.starts_with("multipart/") {
        multipart_profile(&content_type, bytes).await?
    } else {
        (bytes, None)
    };
    ingest::store_batch(s, tenant, move |s, _| {
        let profile = to_profile(s, legacy, &params, bytes, config)?;
        Ok(Converted {
            batch: IngestBatch {
                profiles: vec![profile],
            },
            body_bytes,
        })
    })
    .await?;
    Ok((axum::http::StatusCode::OK, "").into_response())
}

/// Reads `name`, `from`, `until`, `format`, `spyName` and `aggregationType`.
fn parse_params(params: &HashMap<String, String>) -> Result<Legacy, ApiError> {
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
    match &suffix {
        Some(sfx) => labels.push((
            ember_store::NAME_LABEL.into(),
            ember_store::default_profile_name(sfx).into(),
        )),
        // Without a suffix the store names the profile after its first sample type, as
        // Pyroscope does; a `__name__` tag must not override that.
        None => labels.retain(|(n, _)| n != ember_store::NAME_LABEL),
    }
    Ok(Legacy {
        labels,
        suffix,
        from,
        until,
        format: format.to_string(),
    })
}

/// The profile to store: the client's pprof bytes unchanged when possible (the log keeps
/// them as sent, usually gzip'd), else a profile built here (folded text, or a pprof with
/// its sample types renamed by `sample_type_config`). Runs on the blocking pool.
fn to_profile(
    s: &AppState,
    legacy: Legacy,
    params: &HashMap<String, String>,
    bytes: Vec<u8>,
    config: Option<serde_json::Value>,
) -> Result<IngestProfile, ApiError> {
    let what = "profile";
    let pprof = match (legacy.format.as_str(), config) {
        ("pprof", None) => bytes,
        ("pprof", Some(config)) => {
            let limits = DecodeLimits {
                max_decompressed_bytes: s.limits.max_decompressed_bytes,
            };
            let mut profile = ember_pprof::decode_with_limits(&bytes, &limits)
                .map_err(|source| decode_error(what, source))?;
            apply_sample_type_config(&mut profile, &config)?;
            ember_pprof::encode(&profile)
        }
        (format, _) => {
            let text = String::from_utf8_lossy(&bytes);
            let profile = folded_profile(
                s,
                &text,
                format == "lines",
                legacy.suffix.as_deref(),
                params,
                legacy.from,
                legacy.until,
            )?;
            ember_pprof::encode(&profile)
        }
    };
    Ok(IngestProfile {
        labels: legacy.labels,
        // Legacy clients describe the time with from/until; without them the profile is "now".
        time_nanos: legacy.from.unwrap_or_else(now_nanos),
        pprof,
        what: what.into(),
    })
}

/// The same refusal the store gives for a profile that does not decode.
fn decode_error(what: &str, source: ember_pprof::PprofError) -> ApiError {
    let what = what.to_string();
    match source {
        ember_pprof::PprofError::TooLarge { .. } => IngestError::TooLarge { what, source },
        source => IngestError::BadProfile { what, source },
    }
    .into()
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
