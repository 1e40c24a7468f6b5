//! `POST /push.v1.PusherService/Push` over Connect (unary, `application/proto` or
//! `application/json`, optional `Content-Encoding: gzip`); the same path over gRPC is
//! handed to [`crate::grpc`].
//!
//! Owns the `PushRequest` → [`IngestBatch`] conversion both transports share (one profile
//! per raw sample, the series' labels on each, named `series[i].samples[j]` in errors), the
//! protobuf JSON form of `PushRequest`, and the per-tenant push rate limit.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use ember_proto::push::{PushRequest, PushResponse, RawProfileSeries, RawSample};
use ember_proto::types::LabelPair;
use ember_store::{IngestBatch, IngestProfile, Labels};
use prost::Message;

use crate::ingest::{self, Converted};
use crate::{ApiError, AppState, tenant};

/// The route: gRPC requests go to [`crate::grpc::push`], Connect ones are answered here.
pub(crate) async fn push(State(s): State<Arc<AppState>>, request: Request) -> Response {
    if crate::grpc::is_grpc(request.headers()) {
        return crate::grpc::push(&s, request).await;
    }
    let started = Instant::now();
    let result = connect(&s, request).await;
    ingest::finish(&s, started, result)
}

async fn connect(s: &Arc<AppState>, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let tenant = tenant(s, &parts.headers)?;
    let content_type = crate::header(&parts.headers, "content-type")
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
    let body = ingest::read_body(s, &parts.headers, body).await?;
    let body_bytes = body.len();
    ingest::store_batch(s, tenant, move |s, tenant| {
        let request = if json {
            from_json(&body)?
        } else {
            // From `Bytes` (taking the body's buffer, no copy), each profile is sliced out
            // of it and copied once into its `Vec`; decoding from `&[u8]` copied every
            // profile twice (into a `BytesMut`, then into the `Vec`).
            PushRequest::decode(axum::body::Bytes::from(body))
                .map_err(|e| ApiError::bad_request("bad_request", format!("PushRequest: {e}")))?
        };
        Ok(Converted {
            batch: batch(s, tenant, request)?,
            body_bytes,
        })
    })
    .await?;
    Ok(if json {
        ([("content-type", "application/json")], "{}").into_response()
    } else {
        (
            [("content-type", "application/proto")],
            PushResponse {}.encode_to_vec(),
        )
            .into_response()
    })
}

/// Takes the tenant's push token (429 when over `max_push_requests_per_second`), then turns
/// every raw sample of `request` into one profile of the batch.
pub(crate) fn batch(
    s: &AppState,
    tenant: &str,
    request: PushRequest,
) -> Result<IngestBatch, ApiError> {
    s.take_push_token(tenant)?;
    let mut profiles = Vec::new();
    for (si, series) in request.series.into_iter().enumerate() {
        let labels: Labels = series
            .labels
            .into_iter()
            .map(|l| (l.name, l.value))
            .collect();
        for (pi, sample) in series.samples.into_iter().enumerate() {
            profiles.push(IngestProfile {
                labels: labels.clone(),
                time_nanos: 0,
                pprof: sample.raw_profile,
                what: format!("series[{si}].samples[{pi}]"),
            });
        }
    }
    Ok(IngestBatch { profiles })
}

/// The array under `key`, empty when missing or not an array.
fn array<'v>(v: &'v serde_json::Value, key: &str) -> &'v [serde_json::Value] {
    v.get(key)
        .and_then(|l| l.as_array())
        .map_or(&[][..], Vec::as_slice)
}

/// `PushRequest` from its protobuf JSON form (`rawProfile` as base64).
fn from_json(body: &[u8]) -> Result<PushRequest, ApiError> {
    let bad = |m: String| ApiError::bad_request("bad_request", m);
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("PushRequest JSON: {e}")))?;
    let mut out = PushRequest::default();
    let empty = Vec::new();
    let series = match v.get("series") {
        None | Some(serde_json::Value::Null) => &empty,
        Some(serde_json::Value::Array(a)) => a,
        Some(_) => return Err(bad("PushRequest JSON: \"series\" must be an array".into())),
    };
    for (si, s) in series.iter().enumerate() {
        let mut rs = RawProfileSeries::default();
        for (li, l) in array(s, "labels").iter().enumerate() {
            let field = |k: &str| l.get(k).and_then(|x| x.as_str()).map(str::to_string);
            let (Some(name), Some(value)) = (field("name"), field("value")) else {
                return Err(bad(format!(
                    "series[{si}].labels[{li}]: needs string \"name\" and \"value\""
                )));
            };
            rs.labels.push(LabelPair { name, value });
        }
        for (pi, p) in array(s, "samples").iter().enumerate() {
            let raw = p
                .get("rawProfile")
                .or_else(|| p.get("raw_profile"))
                .and_then(|x| x.as_str())
                .ok_or_else(|| {
                    bad(format!(
                        "series[{si}].samples[{pi}]: missing \"rawProfile\""
                    ))
                })?;
            let raw_profile = ember_proto::base64_decode(raw).ok_or_else(|| {
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
            rs.samples.push(RawSample { raw_profile, id });
        }
        out.series.push(rs);
    }
    Ok(out)
}
