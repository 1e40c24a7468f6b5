//! Ember's HTTP query API, `/api/v1/*` (see the crate docs for the parameters): each handler
//! reads its parameters into an [`ember_query::QueryRequest`], runs one
//! [`ember_query::Querier`] operation and encodes the answer.
//!
//! Besides the parameters in the crate docs, every selection takes `spanSelector=ID,ID`
//! (trace span ids): only the samples whose pprof `span_id` label is one of them count. A
//! selector matcher on a label a series lacks but samples carry (`{service_name="api",
//! endpoint="/pay"}`) selects samples the same way.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use ember_query::{Format, QueryRequest, parse};
use serde_json::json;

use crate::query::{Params, Tenant, max_nodes, output_response, read, request};
use crate::{ApiError, AppState};

/// `GET /api/v1/query`: the merged selection in `format` (flamebearer by default), only the
/// stacks through the call path `focus` (a JSON array of frame names) when it is given. A
/// selection holding a pushed `pprof -diff_base` profile is the diff in every format, its
/// flamebearers `double` (the web UI draws it so), unlike `/pyroscope/render`'s `single`.
pub(crate) async fn query(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let format = Format::parse(params.get("format").map(String::as_str))?;
    if format == Format::CallGraph {
        return crate::single::call_graph(s, tenant, params).await;
    }
    let mut req = request(&params, "")?;
    if let Some(path) = params.get("focus") {
        req.focus = parse::parse_path("focus", path)?;
    }
    if matches!(format, Format::Flamebearer | Format::FlamebearerBin) {
        req.max_nodes = max_nodes(&params)?;
    }
    if format == Format::FlamebearerBin {
        req.min_share = min_share(&params)?;
    }
    let title = params.get("query").cloned().unwrap_or_default();
    let output = read(&s, tenant, move |q, t| q.render(t, &req, format, &title)).await?;
    Ok(output_response(output))
}

/// `minShare` of a binary flame graph: a share of the whole from 0 (the default: every node)
/// to 1; nodes below it are left out ([`ember_query::QueryRequest::min_share`]).
fn min_share(params: &Params) -> Result<f64, ApiError> {
    let Some(text) = params.get("minShare") else {
        return Ok(0.0);
    };
    match text.trim().parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(ApiError::bad_request(
            "bad_request",
            format!("minShare={text:?}: a share of the whole, from 0 to 1 (e.g. 0.0002)"),
        )),
    }
}

/// `GET /api/v1/diff`: the `right` selection against the `left` (baseline) one; its flame
/// graph takes `maxNodes` as `/api/v1/query`'s does, and `focus` (a JSON array of frame
/// names) narrows both sides to the stacks through that call path before the limit.
pub(crate) async fn diff(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let mut left = request(&params, "left")?;
    let mut right = request(&params, "right")?;
    let format = Format::parse(params.get("format").map(String::as_str))?;
    // One zoom path for both sides: the Compare view's zoom into a graph that was cut.
    if let Some(path) = params.get("focus") {
        left.focus = parse::parse_path("focus", path)?;
        right.focus = left.focus.clone();
    }
    // The flame graph is cut at the node limit like the query route's (`maxNodes`).
    let limit = if matches!(format, Format::Flamebearer | Format::FlamebearerBin) {
        max_nodes(&params)?
    } else {
        0
    };
    let title = params
        .get("rightQuery")
        .or_else(|| params.get("query"))
        .cloned()
        .unwrap_or_default();
    let output = read(&s, tenant, move |q, t| {
        q.diff(t, &left, &right)?
            .render_limited(format, &title, limit)
    })
    .await?;
    Ok(output_response(output))
}

/// `GET /api/v1/timeseries`: totals per `step`, grouped by the `groupBy` labels.
pub(crate) async fn timeseries(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let mut req = request(&params, "")?;
    if let Some(step) = params.get("step") {
        req.step_nanos = Some(parse::parse_step("step", step)?);
    }
    req.group_by = params
        .get("groupBy")
        .map(|g| parse::parse_list(g))
        .unwrap_or_default();
    let step = req.step_nanos();
    let series = read(&s, tenant, move |q, t| q.time_series(t, &req)).await?;
    let out: Vec<serde_json::Value> = series
        .into_iter()
        .map(|ts| {
            let labels: serde_json::Map<String, serde_json::Value> =
                ts.labels.into_iter().map(|(k, v)| (k, v.into())).collect();
            let points: Vec<[i64; 2]> = ts
                .points
                .into_iter()
                .map(|(t, v)| [t / 1_000_000, v])
                .collect();
            json!({ "labels": labels, "points": points })
        })
        .collect();
    Ok(Json(json!({ "stepSeconds": step as f64 / 1e9, "series": out })).into_response())
}

/// The selection of a listing route: none (every series ever stored) unless `query`, `from`
/// or `type` is given; then `from` defaults to the beginning of time.
fn listing_selection(params: &Params) -> Result<Vec<QueryRequest>, ApiError> {
    if params.contains_key("query") || params.contains_key("from") || params.contains_key("type") {
        let mut p = params.clone();
        p.entry("from".into()).or_insert_with(|| "0".into());
        Ok(vec![request(&p, "")?])
    } else {
        Ok(Vec::new())
    }
}

/// `GET /api/v1/labels`.
pub(crate) async fn labels(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Json<Vec<String>>, ApiError> {
    let sel = listing_selection(&params)?;
    read(&s, tenant, move |q, t| q.label_names(t, &sel))
        .await
        .map(Json)
}

/// `GET /api/v1/label/{name}/values`.
pub(crate) async fn label_values(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Path(name): Path<String>,
    Query(params): Query<Params>,
) -> Result<Json<Vec<String>>, ApiError> {
    let sel = listing_selection(&params)?;
    read(&s, tenant, move |q, t| q.label_values(t, &name, &sel))
        .await
        .map(Json)
}

/// `GET /api/v1/profile_types`.
pub(crate) async fn profile_types(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
) -> Result<Json<Vec<String>>, ApiError> {
    read(&s, tenant, move |q, t| Ok(q.profile_types(t)))
        .await
        .map(Json)
}

/// `GET /api/v1/series`.
pub(crate) async fn series(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Json<Vec<serde_json::Map<String, serde_json::Value>>>, ApiError> {
    let sel = listing_selection(&params)?;
    let series = read(&s, tenant, move |q, t| q.series(t, &sel)).await?;
    let out: Vec<serde_json::Map<String, serde_json::Value>> = series
        .into_iter()
        .map(|l| l.into_iter().map(|(k, v)| (k, v.into())).collect())
        .collect();
    Ok(Json(out))
}
