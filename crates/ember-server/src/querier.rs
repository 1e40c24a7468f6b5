//! `querier.v1.QuerierService` over the Connect protocol (unary POST, `application/proto` or
//! `application/json`): the calls Grafana's Pyroscope data source makes.
//!
//! Each method is a small adapter: it decodes its request, builds the
//! [`ember_query::QueryRequest`] (selector names are `__name__` labels; times are unix
//! milliseconds, an end of 0 unbounded; the node limit defaults to
//! [`ember_query::DEFAULT_MAX_NODES`]) and encodes the [`ember_query::Querier`] answer.
//!
//! Owns the hand-written prost messages of `querier.v1` / `types.v1` (field numbers from
//! Pyroscope's public `querier.proto` and `types.proto`) and their JSON forms. Times in these
//! requests are unix milliseconds; 0 means unbounded.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use ember_query::{DiffTree, NameRule, Querier, QueryRequest, Tree, parse};
use ember_store::Labels;
use prost::Message;
use serde_json::{Value, json};

use crate::{ApiError, AppState, tenant};

pub use ember_proto::querier::*;
pub use ember_proto::types::*;

// ---- JSON request parsing (protobuf JSON mapping: lowerCamelCase, int64 as string or number).

fn jstr(v: &Value, keys: &[&str]) -> String {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .unwrap_or("")
        .to_string()
}

fn jint(v: &Value, keys: &[&str]) -> Option<i64> {
    keys.iter().find_map(|k| match v.get(*k)? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    })
}

fn jstrs(v: &Value, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_array))
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn select_from_json(v: &Value) -> SelectRequest {
    SelectRequest {
        profile_type_id: jstr(v, &["profileTypeID", "profile_typeID", "profileTypeId"]),
        label_selector: jstr(v, &["labelSelector", "label_selector"]),
        start: jint(v, &["start"]).unwrap_or(0),
        end: jint(v, &["end"]).unwrap_or(0),
        max_nodes: jint(v, &["maxNodes", "max_nodes"]),
    }
}

fn labels_json(labels: &[LabelPair]) -> Value {
    Value::Array(
        labels
            .iter()
            .map(|l| json!({"name": l.name, "value": l.value}))
            .collect(),
    )
}

fn label_pairs(labels: Labels) -> Vec<LabelPair> {
    labels
        .into_iter()
        .map(|(name, value)| LabelPair { name, value })
        .collect()
}

fn flamegraph_json(f: &FlameGraph, diff: bool) -> Value {
    let levels: Vec<Value> = f
        .levels
        .iter()
        .map(|l| json!({"values": l.values}))
        .collect();
    let mut v =
        json!({"names": f.names, "levels": levels, "total": f.total, "maxSelf": f.max_self});
    if diff {
        v["leftTicks"] = f.left_ticks.into();
        v["rightTicks"] = f.right_ticks.into();
    }
    v
}

fn flamegraph(tree: &Tree) -> FlameGraph {
    let (levels, max_self) = tree.levels();
    FlameGraph {
        names: tree.names.clone(),
        levels: levels.into_iter().map(|values| Level { values }).collect(),
        total: tree.nodes[0].total,
        max_self,
        left_ticks: 0,
        right_ticks: 0,
    }
}

fn diff_flamegraph(tree: &DiffTree) -> FlameGraph {
    let (levels, max_self) = tree.levels();
    FlameGraph {
        names: tree.names.clone(),
        levels: levels.into_iter().map(|values| Level { values }).collect(),
        total: tree.left_total().saturating_add(tree.right_total()),
        max_self,
        left_ticks: tree.left_total(),
        right_ticks: tree.right_total(),
    }
}

// ---- Requests.

/// The query of one selection: selector, profile type id, unix ms range (end 0 = unbounded).
fn selection(
    selector: &str,
    profile_type: &str,
    start_ms: i64,
    end_ms: i64,
) -> Result<QueryRequest, ApiError> {
    let (start, end) = parse::millis_range(start_ms, end_ms);
    Ok(QueryRequest::parse(
        selector,
        Some(profile_type),
        NameRule::MetricName,
        start,
        end,
    )?)
}

/// The query of a `Select*` request, with its node limit.
fn select_query(r: &SelectRequest) -> Result<QueryRequest, ApiError> {
    let mut q = selection(&r.label_selector, &r.profile_type_id, r.start, r.end)?;
    if let Some(n) = r.max_nodes {
        q.max_nodes = n.max(0) as usize;
    }
    Ok(q)
}

/// One query per matcher (OR'd); every series in the range when there is none.
fn selections(matchers: &[String], start: i64, end: i64) -> Result<Vec<QueryRequest>, ApiError> {
    if matchers.is_empty() {
        return Ok(vec![selection("{}", "", start, end)?]);
    }
    matchers
        .iter()
        .map(|m| selection(m, "", start, end))
        .collect()
}

/// A request body: protobuf, or JSON already parsed.
struct Input<'a> {
    method: &'a str,
    body: &'a [u8],
    json: Option<Value>,
}

impl Input<'_> {
    fn bad(&self, e: impl std::fmt::Display) -> ApiError {
        ApiError::bad_request("bad_request", format!("{}: {e}", self.method))
    }

    /// The request message: decoded from protobuf, or built from the JSON by `from_json`.
    fn decode<T: Message + Default>(
        &self,
        from_json: impl FnOnce(&Value) -> T,
    ) -> Result<T, ApiError> {
        match &self.json {
            Some(v) => Ok(from_json(v)),
            None => T::decode(self.body).map_err(|e| self.bad(e)),
        }
    }
}

/// Output of one method, in both encodings.
enum Reply {
    Proto(Vec<u8>),
    Both(Vec<u8>, Value),
}

impl Reply {
    fn both(message: &impl Message, json: Value) -> Reply {
        Reply::Both(message.encode_to_vec(), json)
    }
}

// ---- The methods: one adapter each.

type Method = fn(&Querier<'_>, &str, &Input<'_>) -> Result<Reply, ApiError>;

fn profile_types(q: &Querier<'_>, tenant: &str, input: &Input<'_>) -> Result<Reply, ApiError> {
    let _req = input.decode(|_| ProfileTypesRequest::default())?;
    let types: Vec<ProfileType> = q
        .profile_types(tenant)
        .into_iter()
        .map(|id| {
            let p: Vec<&str> = id.split(':').collect();
            let g = |i: usize| p.get(i).copied().unwrap_or("").to_string();
            ProfileType {
                name: g(0),
                sample_type: g(1),
                sample_unit: g(2),
                period_type: g(3),
                period_unit: g(4),
                id,
            }
        })
        .collect();
    let j = json!({"profileTypes": types.iter().map(|t| json!({"ID": t.id, "name": t.name, "sampleType": t.sample_type, "sampleUnit": t.sample_unit, "periodType": t.period_type, "periodUnit": t.period_unit})).collect::<Vec<_>>()});
    Ok(Reply::both(
        &ProfileTypesResponse {
            profile_types: types,
        },
        j,
    ))
}

fn label_names(q: &Querier<'_>, tenant: &str, input: &Input<'_>) -> Result<Reply, ApiError> {
    let r = input.decode(|v| LabelNamesRequest {
        matchers: jstrs(v, &["matchers"]),
        start: jint(v, &["start"]).unwrap_or(0),
        end: jint(v, &["end"]).unwrap_or(0),
    })?;
    let names = q.label_names(tenant, &selections(&r.matchers, r.start, r.end)?)?;
    let j = json!({"names": names});
    Ok(Reply::both(&NamesResponse { names }, j))
}

fn label_values(q: &Querier<'_>, tenant: &str, input: &Input<'_>) -> Result<Reply, ApiError> {
    let r = input.decode(|v| LabelValuesRequest {
        name: jstr(v, &["name"]),
        matchers: jstrs(v, &["matchers"]),
        start: jint(v, &["start"]).unwrap_or(0),
        end: jint(v, &["end"]).unwrap_or(0),
    })?;
    let names = q.label_values(tenant, &r.name, &selections(&r.matchers, r.start, r.end)?)?;
    let j = json!({"names": names});
    Ok(Reply::both(&NamesResponse { names }, j))
}

fn series(q: &Querier<'_>, tenant: &str, input: &Input<'_>) -> Result<Reply, ApiError> {
    let r = input.decode(|v| SeriesRequest {
        matchers: jstrs(v, &["matchers"]),
        label_names: jstrs(v, &["labelNames", "label_names"]),
        start: jint(v, &["start"]).unwrap_or(0),
        end: jint(v, &["end"]).unwrap_or(0),
    })?;
    // Only the requested label names, and each distinct projection once.
    let sets: BTreeSet<Labels> = q
        .series(tenant, &selections(&r.matchers, r.start, r.end)?)?
        .into_iter()
        .map(|l| {
            l.into_iter()
                .filter(|(n, _)| r.label_names.is_empty() || r.label_names.contains(n))
                .collect()
        })
        .collect();
    let labels_set: Vec<LabelSet> = sets
        .into_iter()
        .map(|l| LabelSet {
            labels: label_pairs(l),
        })
        .collect();
    let j = json!({"labelsSet": labels_set.iter().map(|s| json!({"labels": labels_json(&s.labels)})).collect::<Vec<_>>()});
    Ok(Reply::both(&SeriesResponse { labels_set }, j))
}

fn select_merge_stacktraces(
    q: &Querier<'_>,
    tenant: &str,
    input: &Input<'_>,
) -> Result<Reply, ApiError> {
    let r = input.decode(select_from_json)?;
    let fg = flamegraph(&q.call_tree(tenant, &select_query(&r)?)?);
    Ok(flamegraph_reply(fg, false))
}

/// The answer of the flame graph methods (merge, span merge, diff): the protobuf
/// `FlameGraphResponse` and its JSON form; `diff` adds the two tick totals to the JSON.
fn flamegraph_reply(fg: FlameGraph, diff: bool) -> Reply {
    let j = json!({"flamegraph": flamegraph_json(&fg, diff)});
    Reply::both(
        &FlameGraphResponse {
            flamegraph: Some(fg),
        },
        j,
    )
}

fn select_merge_span_profile(
    q: &Querier<'_>,
    tenant: &str,
    input: &Input<'_>,
) -> Result<Reply, ApiError> {
    let r = input.decode(|v| SelectMergeSpanProfileRequest {
        profile_type_id: jstr(v, &["profileTypeID", "profile_typeID", "profileTypeId"]),
        label_selector: jstr(v, &["labelSelector", "label_selector"]),
        span_selector: jstrs(v, &["spanSelector", "span_selector"]),
        start: jint(v, &["start"]).unwrap_or(0),
        end: jint(v, &["end"]).unwrap_or(0),
        max_nodes: jint(v, &["maxNodes", "max_nodes"]),
    })?;
    let mut req = select_query(&SelectRequest {
        profile_type_id: r.profile_type_id,
        label_selector: r.label_selector,
        start: r.start,
        end: r.end,
        max_nodes: r.max_nodes,
    })?;
    req.span_ids = r.span_selector;
    let fg = flamegraph(&q.call_tree(tenant, &req)?);
    Ok(flamegraph_reply(fg, false))
}

fn select_merge_profile(
    q: &Querier<'_>,
    tenant: &str,
    input: &Input<'_>,
) -> Result<Reply, ApiError> {
    let r = input.decode(select_from_json)?;
    let merged = q.merge(tenant, &select_query(&r)?)?;
    Ok(Reply::Proto(ember_pprof::encode(
        &ember_query::pprof_profile(&merged),
    )))
}

fn select_series(q: &Querier<'_>, tenant: &str, input: &Input<'_>) -> Result<Reply, ApiError> {
    let r = input.decode(|v| SelectSeriesRequest {
        profile_type_id: jstr(v, &["profileTypeID", "profile_typeID", "profileTypeId"]),
        label_selector: jstr(v, &["labelSelector", "label_selector"]),
        start: jint(v, &["start"]).unwrap_or(0),
        end: jint(v, &["end"]).unwrap_or(0),
        group_by: jstrs(v, &["groupBy", "group_by"]),
        step: v
            .get("step")
            .and_then(|s| s.as_f64().or_else(|| s.as_str()?.parse().ok()))
            .unwrap_or(0.0),
    })?;
    let mut req = selection(&r.label_selector, &r.profile_type_id, r.start, r.end)?;
    // Grafana always sends a step; 15 s (its usual minimum interval) when it is missing.
    req.step_nanos = Some(if r.step > 0.0 {
        (r.step * 1e9) as i64
    } else {
        15_000_000_000
    });
    req.group_by = r.group_by;
    let series: Vec<TypesSeries> = q
        .time_series(tenant, &req)?
        .into_iter()
        .map(|ts| TypesSeries {
            labels: label_pairs(ts.labels),
            points: ts
                .points
                .into_iter()
                .map(|(t, v)| Point {
                    value: v as f64,
                    timestamp: t / 1_000_000,
                })
                .collect(),
        })
        .collect();
    let j = json!({"series": series.iter().map(|s| json!({"labels": labels_json(&s.labels), "points": s.points.iter().map(|p| json!({"value": p.value, "timestamp": p.timestamp})).collect::<Vec<_>>()})).collect::<Vec<_>>()});
    Ok(Reply::both(&SelectSeriesResponse { series }, j))
}

fn diff(q: &Querier<'_>, tenant: &str, input: &Input<'_>) -> Result<Reply, ApiError> {
    let r = input.decode(|v| DiffRequest {
        left: v.get("left").map(select_from_json),
        right: v.get("right").map(select_from_json),
    })?;
    let (Some(left), Some(right)) = (r.left, r.right) else {
        return Err(input.bad("both left and right are required"));
    };
    let diff = q.diff(tenant, &select_query(&left)?, &select_query(&right)?)?;
    let fg = diff_flamegraph(&diff.tree());
    Ok(flamegraph_reply(fg, true))
}

fn call(
    st: &AppState,
    tenant: &str,
    method: &str,
    body: &[u8],
    json_in: bool,
) -> Result<Reply, ApiError> {
    let mut input = Input {
        method,
        body,
        json: None,
    };
    if json_in {
        input.json = Some(serde_json::from_slice(body).map_err(|e| input.bad(e))?);
    }
    let handler: Method = match method {
        "ProfileTypes" => profile_types,
        "LabelNames" => label_names,
        "LabelValues" => label_values,
        "Series" => series,
        "SelectMergeStacktraces" => select_merge_stacktraces,
        "SelectMergeSpanProfile" => select_merge_span_profile,
        "SelectMergeProfile" => select_merge_profile,
        "SelectSeries" => select_series,
        "Diff" => diff,
        other => {
            return Err(ApiError {
                retry_after_secs: None,
                status: axum::http::StatusCode::NOT_FOUND,
                code: "unimplemented",
                reason: "unimplemented",
                message: format!("querier.v1.QuerierService/{other} is not implemented"),
            });
        }
    };
    handler(&Querier::new(&st.store), tenant, &input)
}

/// `POST /querier.v1.QuerierService/{method}`.
pub(crate) async fn querier(
    State(s): State<Arc<AppState>>,
    axum::extract::Path(method): axum::extract::Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let tenant = tenant(&s, &parts.headers)?;
    let json_in = crate::header(&parts.headers, "content-type")
        .is_some_and(|c| c.starts_with("application/json"));
    let body = axum::body::to_bytes(body, s.limits.max_body_bytes)
        .await
        .map_err(|_| ApiError::too_large("body_too_large", "request body too large"))?;
    let reply =
        crate::query::blocking(&s, move |st| call(st, &tenant, &method, &body, json_in)).await??;
    Ok(match (reply, json_in) {
        (Reply::Both(_, j), true) => axum::Json(j).into_response(),
        (Reply::Both(p, _), false) | (Reply::Proto(p), false) => {
            ([("content-type", "application/proto")], p).into_response()
        }
        (Reply::Proto(_), true) => {
            return Err(ApiError::bad_request(
                "bad_content_type",
                "SelectMergeProfile returns a pprof message: call it with application/proto",
            ));
        }
    })
}
