//! Query handlers: `/pyroscope/render` and the `/api/v1/*` routes (see the crate docs).
//!
//! Owns turning query parameters into an `ember_store::Query` (selector, profile type, time
//! range) and rendering the merged result in each output format.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use ember_store::{Matcher, Merged};
use serde_json::json;

use crate::flamebearer::{Tree, units};
use crate::ingest::{now_nanos, parse_unix};
use crate::{ApiError, AppState, tenant};

type Params = HashMap<String, String>;

const DEFAULT_MAX_NODES: usize = 8192;

/// Parses `now`, `now-<n><s|m|h|d|w>` or a unix timestamp (s/ms/µs/ns).
pub(crate) fn parse_time(text: &str, now: i64) -> Option<i64> {
    let t = text.trim();
    if t == "now" {
        return Some(now);
    }
    if let Some(rel) = t.strip_prefix("now-") {
        let (num, unit) = rel.split_at(rel.find(|c: char| !c.is_ascii_digit())?);
        let n: i64 = num.parse().ok()?;
        let secs = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 604_800,
            _ => return None,
        };
        return Some(now.saturating_sub(n.saturating_mul(secs).saturating_mul(1_000_000_000)));
    }
    parse_unix(t)
}

/// Builds the store query from `query`/`type`/`from`/`until` (keys prefixed by `prefix`).
fn store_query(params: &Params, prefix: &str) -> Result<ember_store::Query, ApiError> {
    // `query` with prefix `left` is `leftQuery`.
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            let mut c = k.chars();
            let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or_default();
            format!("{prefix}{first}{}", c.as_str())
        }
    };
    // A prefixed key falls back to the plain one: `leftFrom`, else `from`.
    let get = |k: &str| {
        params
            .get(&key(k))
            .or_else(|| params.get(k))
            .map(String::as_str)
    };
    let mut selector = ember_store::parse_selector(get("query").unwrap_or("{}"))?;
    let mut profile_type = get("type").filter(|t| !t.is_empty()).map(str::to_string);
    if let Some(name) = selector.name.take() {
        if name.contains(':') {
            profile_type = Some(name);
        } else if let Some((app, sfx)) = name.rsplit_once('.') {
            selector
                .matchers
                .push(Matcher::eq(ember_store::SERVICE_LABEL, app));
            if profile_type.is_none() {
                profile_type = Some(sfx.to_string());
            }
        } else {
            selector
                .matchers
                .push(Matcher::eq(ember_store::SERVICE_LABEL, &name));
        }
    }
    let now = now_nanos();
    let time = |k: &str, default: &str| -> Result<i64, ApiError> {
        let text = get(k).unwrap_or(default);
        parse_time(text, now).ok_or_else(|| {
            ApiError::bad_request(
                "bad_time",
                format!(
                    "{}={text:?}: expected a unix timestamp, now or now-1h",
                    key(k)
                ),
            )
        })
    };
    let start = time("from", "now-1h")?;
    let mut end = time("until", "now")?;
    // A second-resolution `until` means "through the end of that second".
    if get("until").is_some_and(|u| u.trim().parse::<f64>().is_ok_and(|v| v < 1e11)) {
        end = end.saturating_add(999_999_999);
    }
    if end < start {
        return Err(ApiError::bad_request("bad_time", "until is before from"));
    }
    Ok(ember_store::Query {
        selector,
        profile_type,
        start_nanos: start,
        end_nanos: end,
    })
}

pub(crate) async fn blocking<T: Send + 'static>(
    s: &Arc<AppState>,
    f: impl FnOnce(&AppState) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let started = Instant::now();
    let st = s.clone();
    let r = tokio::task::spawn_blocking(move || f(&st))
        .await
        .map_err(|e| ApiError::internal(format!("query failed: {e}")))?;
    s.metrics.queries.fetch_add(1, Ordering::Relaxed);
    s.metrics
        .query_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    Ok(r)
}

fn type_parts(merged: &Merged) -> (String, String, String, String, String) {
    let id = merged
        .profile_types
        .iter()
        .next()
        .cloned()
        .unwrap_or_default();
    let mut p = id.split(':').map(str::to_string);
    let mut next = || p.next().unwrap_or_default();
    (next(), next(), next(), next(), next())
}

fn step_for(start: i64, end: i64, step_param: Option<&String>) -> Result<i64, ApiError> {
    if let Some(s) = step_param {
        let secs: f64 = s
            .parse()
            .ok()
            .filter(|v: &f64| *v > 0.0 && v.is_finite())
            .ok_or_else(|| {
                ApiError::bad_request("bad_step", format!("step={s:?}: expected seconds > 0"))
            })?;
        return Ok((secs * 1e9) as i64);
    }
    // At least 10 s, at most ~1000 points.
    let range = (end - start).max(1);
    let ten = 10_000_000_000i64;
    Ok(((range / 1000) / ten + 1) * ten)
}

fn flamebearer_json(
    s: &AppState,
    tenant: &str,
    q: &ember_store::Query,
    max_nodes: usize,
    title: &str,
) -> serde_json::Value {
    let merged = s.store.merge_stacks(tenant, q);
    let tree = Tree::from_stacks(&merged.stacks).truncate(max_nodes);
    let (levels, max_self) = tree.levels();
    let (_, sample_type, unit, _, _) = type_parts(&merged);
    let (units, sample_rate) = units(&sample_type, &unit);
    let step = step_for(q.start_nanos, q.end_nanos, None).unwrap_or(10_000_000_000);
    let totals = s.store.series_totals(tenant, q, step, &[]);
    let buckets = ((q.end_nanos - q.start_nanos) / step + 1).clamp(1, 100_000) as usize;
    let mut samples = vec![0i64; buckets];
    for ts in &totals {
        for (t, v) in &ts.points {
            let i = ((t - q.start_nanos) / step) as usize;
            if let Some(b) = samples.get_mut(i) {
                *b = b.saturating_add(*v);
            }
        }
    }
    json!({
        "version": 1,
        "flamebearer": {
            "names": tree.names,
            "levels": levels,
            "numTicks": tree.nodes[0].total,
            "maxSelf": max_self,
        },
        "metadata": {
            "format": "single",
            "spyName": "",
            "sampleRate": sample_rate,
            "units": units,
            "name": title,
        },
        "timeline": {
            "startTime": q.start_nanos / 1_000_000_000,
            "samples": samples,
            "durationDelta": step / 1_000_000_000,
        },
        "groups": null,
        "heatmap": null,
    })
}

fn max_nodes(params: &Params) -> Result<usize, ApiError> {
    match params.get("maxNodes").or_else(|| params.get("max-nodes")) {
        None => Ok(DEFAULT_MAX_NODES),
        Some(v) => v.parse().map_err(|_| {
            ApiError::bad_request("bad_query", format!("maxNodes={v:?} is not a number"))
        }),
    }
}

/// `GET /pyroscope/render`.
pub(crate) async fn render(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let q = store_query(&params, "")?;
    let max = max_nodes(&params)?;
    let title = params.get("query").cloned().unwrap_or_default();
    let body = blocking(&s, move |st| flamebearer_json(st, &tenant, &q, max, &title)).await?;
    Ok(Json(body).into_response())
}

pub(crate) fn merged_profile(merged: &Merged) -> ember_pprof::Profile {
    build_profile(
        merged,
        merged.stacks.iter().map(|(f, v)| (f.as_slice(), *v)),
    )
}

/// A one-sample-type pprof profile of `stacks`, typed (sample type and period) like `typed`.
fn build_profile<'a>(
    typed: &Merged,
    stacks: impl Iterator<Item = (&'a [String], i64)>,
) -> ember_pprof::Profile {
    let (_, t, u, pt, pu) = type_parts(typed);
    let mut b = ember_pprof::ProfileBuilder::new(&[(t.as_str(), u.as_str())]);
    if !pt.is_empty() {
        b.set_period((&pt, &pu), 0);
    }
    for (frames, v) in stacks {
        let f: Vec<&str> = frames.iter().map(String::as_str).collect();
        b.add_folded_stack(&f, &[v]);
    }
    b.build()
}

/// The `format` parameter, `flamebearer` when absent; a 400 for anything not in `allowed`.
fn output_format(params: &Params, allowed: &[&str]) -> Result<String, ApiError> {
    let format = params
        .get("format")
        .cloned()
        .unwrap_or_else(|| "flamebearer".into());
    if allowed.contains(&format.as_str()) {
        Ok(format)
    } else {
        Err(ApiError::bad_request(
            "bad_query",
            format!("format={format:?}: use pprof, folded, svg, top or flamebearer"),
        ))
    }
}

/// The 404 of a query whose selection holds no profile.
fn nothing_matches(message: &str) -> ApiError {
    ApiError {
        retry_after_secs: None,
        status: axum::http::StatusCode::NOT_FOUND,
        code: "not_found",
        reason: "not_found",
        message: message.into(),
    }
}

fn text_response(body: String) -> Response {
    ([("content-type", "text/plain; charset=utf-8")], body).into_response()
}

fn top_response(profile: &ember_pprof::Profile) -> Result<Response, ApiError> {
    let table = ember_formats::top(profile, &ember_formats::TopOptions::default())
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(text_response(table.render()))
}

/// An SVG flame graph of `lines` (differential when they carry a second count), titled with the
/// query, or `default_title` without one.
fn svg_response(
    lines: Vec<ember_formats::FoldedLine>,
    title: String,
    default_title: &str,
) -> Result<Response, ApiError> {
    let folded = ember_formats::Folded {
        lines,
        ignored_lines: 0,
        has_fractional: false,
    };
    let options = ember_flamegraph::Options {
        title: if title.is_empty() {
            default_title.into()
        } else {
            title
        },
        ..Default::default()
    };
    let mut svg = Vec::new();
    ember_flamegraph::render(&folded, &options, &mut svg)
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(([("content-type", "image/svg+xml")], svg).into_response())
}

/// `GET /api/v1/query`.
pub(crate) async fn query(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let q = store_query(&params, "")?;
    let format = output_format(
        &params,
        &["flamebearer", "json", "pprof", "folded", "svg", "top"],
    )?;
    let title = params.get("query").cloned().unwrap_or_default();
    if format == "flamebearer" || format == "json" {
        let max = max_nodes(&params)?;
        let body = blocking(&s, move |st| flamebearer_json(st, &tenant, &q, max, &title)).await?;
        return Ok(Json(body).into_response());
    }
    blocking(&s, move |st| {
        let merged = st.store.merge_stacks(&tenant, &q);
        if merged.profiles == 0 || merged.stacks.is_empty() {
            return Err(nothing_matches(
                "no profiles match the query in the time range",
            ));
        }
        match format.as_str() {
            "folded" => {
                let mut out = String::new();
                for (frames, v) in &merged.stacks {
                    out.push_str(&frames.join(";"));
                    out.push(' ');
                    out.push_str(&v.to_string());
                    out.push('\n');
                }
                Ok(text_response(out))
            }
            "pprof" => {
                let bytes = ember_pprof::encode_gzip(&merged_profile(&merged));
                Ok(([("content-type", "application/octet-stream")], bytes).into_response())
            }
            "top" => top_response(&merged_profile(&merged)),
            _ => svg_response(
                merged
                    .stacks
                    .iter()
                    .map(|(frames, v)| ember_formats::FoldedLine {
                        stack: frames.join(";"),
                        count: *v as f64,
                        second_count: None,
                    })
                    .collect(),
                title,
                "Flame Graph",
            ),
        }
    })
    .await?
}

fn diff_flamebearer(l: &Merged, r: &Merged, title: &str) -> serde_json::Value {
    let (_, sample_type, unit, _, _) = type_parts(if r.profiles > 0 { r } else { l });
    let (units, sample_rate) = units(&sample_type, &unit);
    let tree = crate::flamebearer::DiffTree::new(&l.stacks, &r.stacks);
    let (levels, max_self) = tree.levels();
    json!({
        "version": 1,
        "flamebearer": {
            "names": tree.names,
            "levels": levels,
            "numTicks": tree.left_total().saturating_add(tree.right_total()),
            "maxSelf": max_self,
        },
        "metadata": {
            "format": "double",
            "spyName": "",
            "sampleRate": sample_rate,
            "units": units,
            "name": title,
        },
        "leftTicks": tree.left_total(),
        "rightTicks": tree.right_total(),
    })
}

/// `GET /pyroscope/render-diff`: `leftQuery`/`leftFrom`/`leftUntil` against the `right*` ones.
pub(crate) async fn render_diff(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let left = store_query(&params, "left")?;
    let right = store_query(&params, "right")?;
    let title = params.get("rightQuery").cloned().unwrap_or_default();
    let body = blocking(&s, move |st| {
        let l = st.store.merge_stacks(&tenant, &left);
        let r = st.store.merge_stacks(&tenant, &right);
        diff_flamebearer(&l, &r, &title)
    })
    .await?;
    Ok(Json(body).into_response())
}

/// `(stack, left value, right value)` over the union of both sides' stacks, sorted.
fn diff_stacks<'a>(l: &'a Merged, r: &'a Merged) -> Vec<(&'a [String], i64, i64)> {
    let mut map: std::collections::BTreeMap<&[String], (i64, i64)> =
        std::collections::BTreeMap::new();
    for (frames, v) in &l.stacks {
        map.entry(frames.as_slice()).or_default().0 += *v;
    }
    for (frames, v) in &r.stacks {
        map.entry(frames.as_slice()).or_default().1 += *v;
    }
    map.into_iter().map(|(k, (a, b))| (k, a, b)).collect()
}

/// The pprof form of a diff: right minus left per stack (negative where the right side
/// spends less), like `pprof -diff_base=left right`.
fn diff_profile(l: &Merged, r: &Merged) -> ember_pprof::Profile {
    let typed = if r.profiles > 0 { r } else { l };
    let deltas = diff_stacks(l, r)
        .into_iter()
        .map(|(frames, left, right)| (frames, right.saturating_sub(left)))
        .filter(|(_, delta)| *delta != 0);
    build_profile(typed, deltas)
}

/// `GET /api/v1/diff`: the `right` selection against the `left` (baseline) one.
pub(crate) async fn diff(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let left = store_query(&params, "left")?;
    let right = store_query(&params, "right")?;
    let format = output_format(
        &params,
        &["flamebearer", "json", "folded", "svg", "pprof", "top"],
    )?;
    let title = params
        .get("rightQuery")
        .or_else(|| params.get("query"))
        .cloned()
        .unwrap_or_default();
    blocking(&s, move |st| {
        let l = st.store.merge_stacks(&tenant, &left);
        let r = st.store.merge_stacks(&tenant, &right);
        if l.stacks.is_empty() && r.stacks.is_empty() {
            return Err(nothing_matches(
                "no profiles match either side of the diff in its time range",
            ));
        }
        Ok(match format.as_str() {
            "folded" => {
                let mut out = String::new();
                for (frames, a, b) in diff_stacks(&l, &r) {
                    out.push_str(&frames.join(";"));
                    out.push_str(&format!(" {a} {b}\n"));
                }
                text_response(out)
            }
            "pprof" => (
                [("content-type", "application/octet-stream")],
                ember_pprof::encode_gzip(&diff_profile(&l, &r)),
            )
                .into_response(),
            "top" => top_response(&diff_profile(&l, &r))?,
            "svg" => svg_response(
                diff_stacks(&l, &r)
                    .into_iter()
                    .map(|(frames, a, b)| ember_formats::FoldedLine {
                        stack: frames.join(";"),
                        count: a as f64,
                        second_count: Some(b as f64),
                    })
                    .collect(),
                title,
                "Differential Flame Graph",
            )?,
            _ => Json(diff_flamebearer(&l, &r, &title)).into_response(),
        })
    })
    .await?
}

/// `GET /api/v1/timeseries`.
pub(crate) async fn timeseries(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let q = store_query(&params, "")?;
    let step = step_for(q.start_nanos, q.end_nanos, params.get("step"))?;
    let group_by: Vec<String> = params
        .get("groupBy")
        .map(|g| {
            g.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let series = blocking(&s, move |st| {
        st.store.series_totals(&tenant, &q, step, &group_by)
    })
    .await?;
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

fn optional_query(params: &Params) -> Result<Option<ember_store::Query>, ApiError> {
    if params.contains_key("query") || params.contains_key("from") || params.contains_key("type") {
        let mut p = params.clone();
        p.entry("from".into()).or_insert_with(|| "0".into());
        store_query(&p, "").map(Some)
    } else {
        Ok(None)
    }
}

/// `GET /api/v1/labels`.
pub(crate) async fn labels(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let q = optional_query(&params)?;
    let names = blocking(&s, move |st| st.store.label_names(&tenant, q.as_ref())).await?;
    Ok(Json(names).into_response())
}

/// `GET /api/v1/label/{name}/values`.
pub(crate) async fn label_values(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let q = optional_query(&params)?;
    let values = blocking(&s, move |st| {
        st.store.label_values(&tenant, &name, q.as_ref())
    })
    .await?;
    Ok(Json(values).into_response())
}

/// `GET /api/v1/profile_types`.
pub(crate) async fn profile_types(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let types = blocking(&s, move |st| st.store.profile_types(&tenant)).await?;
    Ok(Json(types).into_response())
}

/// `GET /api/v1/series`.
pub(crate) async fn series(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let q = optional_query(&params)?;
    let series = blocking(&s, move |st| st.store.series(&tenant, q.as_ref())).await?;
    let out: Vec<serde_json::Map<String, serde_json::Value>> = series
        .into_iter()
        .map(|l| l.into_iter().map(|(k, v)| (k, v.into())).collect())
        .collect();
    Ok(Json(out).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_times() {
        let now = 1_700_000_000_000_000_000;
        assert_eq!(parse_time("now", now), Some(now));
        assert_eq!(parse_time("now-1h", now), Some(now - 3_600_000_000_000));
        assert_eq!(parse_time("now-15m", now), Some(now - 900_000_000_000));
        assert_eq!(parse_time("now-1y", now), None);
        assert_eq!(parse_time("now-", now), None);
        assert_eq!(parse_time("1700000000", now), Some(now));
    }
}
