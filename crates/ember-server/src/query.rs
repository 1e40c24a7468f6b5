//! Read-side glue shared by the query front ends (`api`, `pyroscope::render`, `querier`):
//! running an `ember_query` operation off the I/O threads (counted in `/metrics`), mapping its
//! errors to API errors, and reading URL parameters into an [`ember_query::QueryRequest`].
//!
//! What a query means (defaults, selector rules, operations, shapes) lives in `ember-query`;
//! this module only translates.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use ember_query::parse::{self, TimeParam};
use ember_query::{NameRule, Output, Querier, QueryError, QueryRequest};

use crate::{ApiError, AppState};

/// URL query parameters.
pub(crate) type Params = HashMap<String, String>;

/// Runs `f` on a blocking thread and counts it as one query in `/metrics`.
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

/// The request's tenant ([`crate::tenant`]) as an extractor, so a read handler names it in
/// its signature instead of taking the headers to look it up.
pub(crate) struct Tenant(pub(crate) String);

impl FromRequestParts<Arc<AppState>> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &Arc<AppState>) -> Result<Self, ApiError> {
        crate::tenant(s, &parts.headers).map(Tenant)
    }
}

/// Runs one [`Querier`] operation for `tenant` through [`blocking`]: the shape of every read
/// route.
pub(crate) async fn read<T: Send + 'static>(
    s: &Arc<AppState>,
    tenant: String,
    op: impl FnOnce(&Querier<'_>, &str) -> Result<T, QueryError> + Send + 'static,
) -> Result<T, ApiError> {
    Ok(blocking(s, move |st| op(&Querier::new(&st.store), &tenant)).await??)
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> Self {
        let message = e.to_string();
        match e {
            QueryError::Selector(_) | QueryError::Invalid(_) => {
                ApiError::bad_request("bad_query", message)
            }
            QueryError::Time(_) => ApiError::bad_request("bad_time", message),
            QueryError::Step(_) => ApiError::bad_request("bad_step", message),
            QueryError::Unsupported(_) => ApiError {
                retry_after_secs: None,
                status: StatusCode::NOT_IMPLEMENTED,
                code: "unimplemented",
                reason: "unimplemented",
                message,
            },
            QueryError::NotFound(_) => ApiError {
                retry_after_secs: None,
                status: StatusCode::NOT_FOUND,
                code: "not_found",
                reason: "not_found",
                message,
            },
            QueryError::Render(_) => ApiError::internal(message),
        }
    }
}

/// The HTTP response of an encoded answer.
pub(crate) fn output_response(output: Output) -> Response {
    match output {
        Output::Json(v) => Json(v).into_response(),
        Output::Bytes { content_type, body } => {
            ([("content-type", content_type)], body).into_response()
        }
    }
}

/// The request of `query`/`type`/`from`/`until`/`spanSelector` (keys prefixed by `prefix`:
/// with prefix `left`, `leftQuery`, falling back to the plain `query`), with the legacy
/// Pyroscope selector names.
pub(crate) fn request(params: &Params, prefix: &str) -> Result<QueryRequest, ApiError> {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            let mut c = k.chars();
            let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or_default();
            format!("{prefix}{first}{}", c.as_str())
        }
    };
    let get = |k: &str| {
        params
            .get(&key(k))
            .or_else(|| params.get(k))
            .map(String::as_str)
    };
    // The selector first, so a request wrong in both ways reports the selector.
    let (selector, profile_type) = parse::resolve_selector(
        get("query").unwrap_or("{}"),
        get("type"),
        NameRule::PyroscopeApp,
    )?;
    let (from_key, until_key) = (key("from"), key("until"));
    let (start, end) = parse::time_range(
        TimeParam {
            key: &from_key,
            text: get("from"),
        },
        TimeParam {
            key: &until_key,
            text: get("until"),
        },
        parse::now_nanos(),
    )?;
    let mut req = QueryRequest::new(selector, profile_type, start, end);
    req.span_ids = get("spanSelector")
        .map(parse::parse_list)
        .unwrap_or_default();
    // Frame filters, one set for both sides of a diff (plain keys only).
    let plain = |k: &str| params.get(k).map(String::as_str).filter(|v| !v.is_empty());
    if let Some(pattern) = plain("hide") {
        req.filters.hide = Some(ember_query::FrameFilters::parse_hide(pattern)?);
    }
    req.filters.collapse_recursion = match plain("collapseRecursion") {
        None | Some("false" | "0") => false,
        Some("true" | "1") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "bad_request",
                format!("collapseRecursion={other:?}: use true or false"),
            ));
        }
    };
    req.filters.drop_below = plain("dropBelow").map(str::to_string);
    req.filters.focus_function = plain("focusFunction").map(str::to_string);
    Ok(req)
}

/// The node limit of `maxNodes` (or `max-nodes`), the crate default when absent.
pub(crate) fn max_nodes(params: &Params) -> Result<usize, ApiError> {
    match params.get("maxNodes").or_else(|| params.get("max-nodes")) {
        None => Ok(ember_query::DEFAULT_MAX_NODES),
        Some(v) => Ok(parse::parse_max_nodes("maxNodes", v)?),
    }
}
