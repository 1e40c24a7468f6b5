//! Pyroscope's read routes: `GET /pyroscope/render` (a merged flame graph as flamebearer JSON
//! with a timeline) and `GET /pyroscope/render-diff` (two selections as a `double`
//! flamebearer), thin adapters over `ember-query`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use ember_query::Querier;

use crate::query::{Params, blocking, max_nodes, request};
use crate::{ApiError, AppState, tenant};

/// `GET /pyroscope/render?query=&from=&until=&maxNodes=`.
pub(crate) async fn render(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let mut req = request(&params, "")?;
    req.max_nodes = max_nodes(&params)?;
    let title = params.get("query").cloned().unwrap_or_default();
    let body = blocking(&s, move |st| {
        Querier::new(&st.store).flamebearer(&tenant, &req, &title)
    })
    .await??;
    Ok(Json(body).into_response())
}

/// `GET /pyroscope/render-diff`: `leftQuery`/`leftFrom`/`leftUntil` against the `right*`
/// ones. Unlike `/api/v1/diff`, two empty sides are an empty graph, as in Pyroscope.
pub(crate) async fn render_diff(
    State(s): State<Arc<AppState>>,
    headers: HeaderMap,
    Query(params): Query<Params>,
) -> Result<Response, ApiError> {
    let tenant = tenant(&s, &headers)?;
    let left = request(&params, "left")?;
    let right = request(&params, "right")?;
    let title = params.get("rightQuery").cloned().unwrap_or_default();
    let body = blocking(&s, move |st| {
        Querier::new(&st.store)
            .diff(&tenant, &left, &right)
            .map(|d| d.flamebearer(&title))
    })
    .await??;
    Ok(Json(body).into_response())
}
