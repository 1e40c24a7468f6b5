//! `/api/v1/profiles` and `/api/v1/profile`: the individual profiles of a selection and
//! exactly one of them; and the pruning parameters of the call graph
//! (`/api/v1/query?format=callgraph`).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use ember_query::{CallGraphOptions, Format, Labels, QueryError, parse};
use serde_json::{Value, json};

use crate::query::{Params, Tenant, max_nodes, output_response, read, request};
use crate::{ApiError, AppState};

/// The labels as a JSON object.
fn labels_json(labels: &Labels) -> serde_json::Map<String, Value> {
    labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect()
}

/// What names one profile in an answer: its series (labels, and the `series` text the
/// single-profile route takes), its time (nanoseconds as a string: a JSON number loses them;
/// and milliseconds for charts) and its total.
fn profile_json(labels: &Labels, time_nanos: i64, total: i64, count: usize) -> Value {
    json!({
        "labels": labels_json(labels),
        "series": ember_query::selector_text(labels),
        "time": time_nanos.to_string(),
        "timeMs": time_nanos.div_euclid(1_000_000),
        "total": total,
        "count": count,
    })
}

/// `GET /api/v1/profiles`: the `limit` most recent profiles of the selection in its range
/// (default [`ember_query::DEFAULT_PROFILE_LIST`], at most [`ember_store::MAX_PROFILE_LIST`]),
/// newest first, with how many it holds in all (`matched`).
pub(crate) async fn profiles(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Json<Value>, ApiError> {
    let req = request(&params, "")?;
    let limit = match params.get("limit") {
        None => ember_query::DEFAULT_PROFILE_LIST,
        Some(v) => v.parse::<usize>().map_err(|_| {
            QueryError::Invalid(format!("limit={v:?}: a count of profiles, 0 or more"))
        })?,
    };
    let list = read(&s, tenant, move |q, t| q.profiles(t, &req, limit)).await?;
    let out: Vec<Value> = list
        .profiles
        .iter()
        .map(|p| profile_json(&p.labels, p.time_nanos, p.total, p.count))
        .collect();
    Ok(Json(json!({
        "profiles": out,
        "matched": list.matched,
        "limit": limit.min(ember_store::MAX_PROFILE_LIST),
    })))
}

/// `GET /api/v1/profile?series=&time=`: exactly the profile of that series (all its labels,
/// `{a="1", ...}` as `/api/v1/profiles` writes it) at that time (unix nanoseconds), in
/// `format` like `/api/v1/query` (with `focus` and `maxNodes`); the flamebearer answer also
/// carries `profile` (labels, time, total).
pub(crate) async fn profile(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let series = params
        .get("series")
        .ok_or_else(|| QueryError::Invalid("series: missing".into()))?;
    let labels = ember_query::parse_series(series)?;
    let time = params
        .get("time")
        .ok_or_else(|| QueryError::Invalid("time: missing".into()))?;
    let time: i64 = time.parse().map_err(|_| {
        QueryError::Time(format!(
            "time={time:?}: the profile's unix time in nanoseconds"
        ))
    })?;
    let format = Format::parse(params.get("format").map(String::as_str))?;
    let focus = match params.get("focus") {
        Some(path) => parse::parse_path("focus", path)?,
        None => Vec::new(),
    };
    let nodes = max_nodes(&params)?;
    let options = graph_options(&params)?;
    let title = series.clone();
    let output = read(&s, tenant, move |q, t| {
        let mut req = q.profile_request(t, &labels, time)?;
        req.focus = focus;
        match format {
            Format::Flamebearer => {
                req.max_nodes = nodes;
                let mut fb = q.flame_graph(t, &req, &title)?;
                let total = q
                    .profiles(t, &req, 1)?
                    .profiles
                    .first()
                    .map_or(0, |p| p.total);
                if let Some(o) = fb.as_object_mut() {
                    o.insert("profile".into(), profile_json(&labels, time, total, 1));
                }
                Ok(ember_query::Output::Json(fb))
            }
            Format::FlamebearerBin => {
                req.max_nodes = nodes;
                q.render(t, &req, format, &title)
            }
            Format::CallGraph => Ok(ember_query::Output::Json(
                q.call_graph(t, &req, &options)?.to_json(),
            )),
            _ => q.render(t, &req, format, &title),
        }
    })
    .await?;
    Ok(output_response(output))
}

/// The call graph's pruning: `nodeFraction`, `edgeFraction` (shares of the total, 0 to 1)
/// and `nodeCount` (0 = no limit), pprof's defaults when absent.
pub(crate) fn graph_options(params: &Params) -> Result<CallGraphOptions, ApiError> {
    let mut o = CallGraphOptions::default();
    let fraction = |key: &str, default: f64| -> Result<f64, QueryError> {
        match params.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|f| (0.0..=1.0).contains(f))
                .ok_or_else(|| QueryError::Invalid(format!("{key}={v:?}: a share from 0 to 1"))),
        }
    };
    o.node_fraction = fraction("nodeFraction", o.node_fraction)?;
    o.edge_fraction = fraction("edgeFraction", o.edge_fraction)?;
    if let Some(v) = params.get("nodeCount") {
        o.max_nodes = v.parse().map_err(|_| {
            QueryError::Invalid(format!("nodeCount={v:?}: a count of functions, 0 = all"))
        })?;
    }
    Ok(o)
}

/// `GET /api/v1/query?format=callgraph`: the call graph of the selection (with `focus`),
/// pruned by [`graph_options`].
pub(crate) async fn call_graph(
    s: Arc<AppState>,
    tenant: String,
    params: Params,
) -> Result<Response, ApiError> {
    let mut req = request(&params, "")?;
    if let Some(path) = params.get("focus") {
        req.focus = parse::parse_path("focus", path)?;
    }
    let options = graph_options(&params)?;
    let graph = read(&s, tenant, move |q, t| q.call_graph(t, &req, &options)).await?;
    Ok(Json(graph.to_json()).into_response())
}
