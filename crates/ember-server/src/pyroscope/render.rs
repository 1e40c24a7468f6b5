//! Pyroscope's read routes: `GET /pyroscope/render` (a merged flame graph as flamebearer JSON
//! with a timeline) and `GET /pyroscope/render-diff` (two selections as a `double`
//! flamebearer), thin adapters over `ember-query`.

use std::sync::Arc;

use crate::query::{Params, Tenant, max_nodes, read, request};
use crate::{ApiError, AppState};
use axum::Json;
use axum::extract::{Query, State};

/// `GET /pyroscope/render?query=&from=&until=&maxNodes=`.
pub(crate) async fn render(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let mut req = request(&params, "")?;
    req.max_nodes = max_nodes(&params)?;
    let title = params.get("query").cloned().unwrap_or_default();
    read(&s, tenant, move |q, t| q.flamebearer(t, &req, &title))
        .await
        .map(Json)
}

/// `GET /pyroscope/render-diff`: `leftQuery`/`leftFrom`/`leftUntil` against the `right*`
/// ones. Unlike `/api/v1/diff`, two empty sides are an empty graph, as in Pyroscope.
pub(crate) async fn render_diff(
    State(s): State<Arc<AppState>>,
    Tenant(tenant): Tenant,
    Query(params): Query<Params>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let left = request(&params, "left")?;
    let right = request(&params, "right")?;
    let title = params.get("rightQuery").cloned().unwrap_or_default();
    read(&s, tenant, move |q, t| {
        q.diff(t, &left, &right).map(|d| d.flamebearer(&title))
    })
    .await
    .map(Json)
}
