//! `querier.v1.QuerierService` over the Connect protocol (unary POST, `application/proto` or
//! `application/json`): the calls Grafana's Pyroscope data source makes.
//!
//! Owns the hand-written prost messages of `querier.v1` / `types.v1` (field numbers from
//! Pyroscope's public `querier.proto` and `types.proto`) and their JSON forms. Times in these
//! requests are unix milliseconds; 0 means unbounded.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use ember_store::{Labels, Matcher};
use prost::Message;
use serde_json::{Value, json};

use crate::flamebearer::Tree;
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

// ---- The methods.

fn range(start_ms: i64, end_ms: i64) -> (i64, i64) {
    let start = start_ms.saturating_mul(1_000_000);
    let end = if end_ms <= 0 {
        i64::MAX
    } else {
        end_ms.saturating_mul(1_000_000).saturating_add(999_999)
    };
    (start, end)
}

fn to_query(
    selector: &str,
    profile_type: &str,
    start_ms: i64,
    end_ms: i64,
) -> Result<ember_store::Query, ApiError> {
    let mut sel = ember_store::parse_selector(if selector.trim().is_empty() {
        "{}"
    } else {
        selector
    })?;
    if let Some(name) = sel.name.take() {
        sel.matchers
            .push(Matcher::eq(ember_store::NAME_LABEL, &name));
    }
    let (start_nanos, end_nanos) = range(start_ms, end_ms);
    Ok(ember_store::Query {
        selector: sel,
        profile_type: (!profile_type.is_empty()).then(|| profile_type.to_string()),
        start_nanos,
        end_nanos,
    })
}

/// Series of all `matchers` (OR'd; every series when empty).
fn matching_series(
    st: &AppState,
    tenant: &str,
    matchers: &[String],
    start: i64,
    end: i64,
) -> Result<Vec<Labels>, ApiError> {
    let selectors: Vec<&str> = if matchers.is_empty() {
        vec!["{}"]
    } else {
        matchers.iter().map(String::as_str).collect()
    };
    let mut out: BTreeSet<Labels> = BTreeSet::new();
    for m in selectors {
        let q = to_query(m, "", start, end)?;
        out.extend(st.store.series(tenant, Some(&q)));
    }
    Ok(out.into_iter().collect())
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

fn merged_tree(st: &AppState, tenant: &str, r: &SelectRequest) -> Result<Tree, ApiError> {
    let q = to_query(&r.label_selector, &r.profile_type_id, r.start, r.end)?;
    let merged = st.store.merge_stacks(tenant, &q);
    let max = r.max_nodes.unwrap_or(16_384).max(0) as usize;
    Ok(Tree::from_stacks(&merged.stacks).truncate(max))
}

/// Output of one method, in both encodings.
enum Reply {
    Proto(Vec<u8>),
    Both(Vec<u8>, Value),
}

fn call(
    st: &AppState,
    tenant: &str,
    method: &str,
    body: &[u8],
    json_in: bool,
) -> Result<Reply, ApiError> {
    let bad = |e: String| ApiError::bad_request("bad_request", format!("{method}: {e}"));
    let v: Value = if json_in {
        serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?
    } else {
        Value::Null
    };
    macro_rules! decode {
        ($t:ty, $json:expr) => {
            if json_in {
                $json
            } else {
                <$t>::decode(body).map_err(|e| bad(e.to_string()))?
            }
        };
    }
    Ok(match method {
        "ProfileTypes" => {
            let _req = decode!(ProfileTypesRequest, ProfileTypesRequest::default());
            let types: Vec<ProfileType> = st
                .store
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
            Reply::Both(
                ProfileTypesResponse {
                    profile_types: types,
                }
                .encode_to_vec(),
                j,
            )
        }
        "LabelNames" => {
            let r = decode!(
                LabelNamesRequest,
                LabelNamesRequest {
                    matchers: jstrs(&v, &["matchers"]),
                    start: jint(&v, &["start"]).unwrap_or(0),
                    end: jint(&v, &["end"]).unwrap_or(0)
                }
            );
            let names: BTreeSet<String> = matching_series(st, tenant, &r.matchers, r.start, r.end)?
                .into_iter()
                .flat_map(|l| l.into_iter().map(|(n, _)| n))
                .collect();
            let names: Vec<String> = names.into_iter().collect();
            let j = json!({"names": names});
            Reply::Both(NamesResponse { names }.encode_to_vec(), j)
        }
        "LabelValues" => {
            let r = decode!(
                LabelValuesRequest,
                LabelValuesRequest {
                    name: jstr(&v, &["name"]),
                    matchers: jstrs(&v, &["matchers"]),
                    start: jint(&v, &["start"]).unwrap_or(0),
                    end: jint(&v, &["end"]).unwrap_or(0)
                }
            );
            let values: BTreeSet<String> =
                matching_series(st, tenant, &r.matchers, r.start, r.end)?
                    .into_iter()
                    .flat_map(|l| l.into_iter().filter(|(n, _)| *n == r.name).map(|(_, v)| v))
                    .collect();
            let names: Vec<String> = values.into_iter().collect();
            let j = json!({"names": names});
            Reply::Both(NamesResponse { names }.encode_to_vec(), j)
        }
        "Series" => {
            let r = decode!(
                SeriesRequest,
                SeriesRequest {
                    matchers: jstrs(&v, &["matchers"]),
                    label_names: jstrs(&v, &["labelNames", "label_names"]),
                    start: jint(&v, &["start"]).unwrap_or(0),
                    end: jint(&v, &["end"]).unwrap_or(0)
                }
            );
            let mut sets: BTreeSet<Labels> = BTreeSet::new();
            for l in matching_series(st, tenant, &r.matchers, r.start, r.end)? {
                sets.insert(
                    l.into_iter()
                        .filter(|(n, _)| r.label_names.is_empty() || r.label_names.contains(n))
                        .collect(),
                );
            }
            let labels_set: Vec<LabelSet> = sets
                .into_iter()
                .map(|l| LabelSet {
                    labels: l
                        .into_iter()
                        .map(|(name, value)| LabelPair { name, value })
                        .collect(),
                })
                .collect();
            let j = json!({"labelsSet": labels_set.iter().map(|s| json!({"labels": labels_json(&s.labels)})).collect::<Vec<_>>()});
            Reply::Both(SeriesResponse { labels_set }.encode_to_vec(), j)
        }
        "SelectMergeStacktraces" => {
            let r = decode!(SelectRequest, select_from_json(&v));
            let fg = flamegraph(&merged_tree(st, tenant, &r)?);
            let j = json!({"flamegraph": flamegraph_json(&fg, false)});
            Reply::Both(
                FlameGraphResponse {
                    flamegraph: Some(fg),
                }
                .encode_to_vec(),
                j,
            )
        }
        "SelectMergeProfile" => {
            let r = decode!(SelectRequest, select_from_json(&v));
            let q = to_query(&r.label_selector, &r.profile_type_id, r.start, r.end)?;
            let merged = st.store.merge_stacks(tenant, &q);
            Reply::Proto(ember_pprof::encode(&crate::query::merged_profile(&merged)))
        }
        "SelectSeries" => {
            let r = decode!(
                SelectSeriesRequest,
                SelectSeriesRequest {
                    profile_type_id: jstr(
                        &v,
                        &["profileTypeID", "profile_typeID", "profileTypeId"]
                    ),
                    label_selector: jstr(&v, &["labelSelector", "label_selector"]),
                    start: jint(&v, &["start"]).unwrap_or(0),
                    end: jint(&v, &["end"]).unwrap_or(0),
                    group_by: jstrs(&v, &["groupBy", "group_by"]),
                    step: v
                        .get("step")
                        .and_then(|s| s.as_f64().or_else(|| s.as_str()?.parse().ok()))
                        .unwrap_or(0.0),
                }
            );
            let q = to_query(&r.label_selector, &r.profile_type_id, r.start, r.end)?;
            let step = if r.step > 0.0 {
                (r.step * 1e9) as i64
            } else {
                15_000_000_000
            };
            let series: Vec<TypesSeries> = st
                .store
                .series_totals(tenant, &q, step, &r.group_by)
                .into_iter()
                .map(|ts| TypesSeries {
                    labels: ts
                        .labels
                        .into_iter()
                        .map(|(name, value)| LabelPair { name, value })
                        .collect(),
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
            Reply::Both(SelectSeriesResponse { series }.encode_to_vec(), j)
        }
        "Diff" => {
            let r = decode!(
                DiffRequest,
                DiffRequest {
                    left: v.get("left").map(select_from_json),
                    right: v.get("right").map(select_from_json),
                }
            );
            let (Some(left), Some(right)) = (r.left, r.right) else {
                return Err(bad("both left and right are required".into()));
            };
            let merge = |side: &SelectRequest| -> Result<Vec<(Vec<String>, i64)>, ApiError> {
                let q = to_query(
                    &side.label_selector,
                    &side.profile_type_id,
                    side.start,
                    side.end,
                )?;
                Ok(st.store.merge_stacks(tenant, &q).stacks)
            };
            let diff = crate::flamebearer::DiffTree::new(&merge(&left)?, &merge(&right)?);
            let (levels, max_self) = diff.levels();
            let fg = FlameGraph {
                names: diff.names.clone(),
                levels: levels.into_iter().map(|values| Level { values }).collect(),
                total: diff.left_total() + diff.right_total(),
                max_self,
                left_ticks: diff.left_total(),
                right_ticks: diff.right_total(),
            };
            let j = json!({"flamegraph": flamegraph_json(&fg, true)});
            Reply::Both(
                FlameGraphResponse {
                    flamegraph: Some(fg),
                }
                .encode_to_vec(),
                j,
            )
        }
        other => {
            return Err(ApiError {
                retry_after_secs: None,
                status: axum::http::StatusCode::NOT_FOUND,
                code: "unimplemented",
                reason: "unimplemented",
                message: format!("querier.v1.QuerierService/{other} is not implemented"),
            });
        }
    })
}

/// `POST /querier.v1.QuerierService/{method}`.
pub(crate) async fn querier(
    State(s): State<Arc<AppState>>,
    axum::extract::Path(method): axum::extract::Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let tenant = tenant(&s, &parts.headers)?;
    let json_in = parts
        .headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
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
