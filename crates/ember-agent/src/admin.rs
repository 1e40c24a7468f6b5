//! The agent's admin HTTP endpoint.
//!
//! | Route | What |
//! |---|---|
//! | `GET /metrics` | Prometheus text (see [`crate::metrics`]) |
//! | `GET /ready` | `ready` |
//! | `GET /api/v1/config` | effective configuration as JSON (`?format=yaml` for YAML) |
//! | `POST /api/v1/config` | body: a YAML/JSON configuration; validates, answers `{"diff", "applied"}`; `?dry_run=true` only validates and diffs; invalid: 400 `{"errors": [{"path", "reason"}]}` |
//! | `GET /api/v1/targets` | scrape targets: up, counts, last error |

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::Agent;
use crate::config;

/// Serves the admin routes on `listener` until `shutdown` completes.
pub async fn serve(
    agent: Arc<Agent>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/ready", get(|| async { "ready" }))
        .route("/api/v1/config", get(get_config).post(post_config))
        .route("/api/v1/targets", get(targets))
        .with_state(agent);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn metrics(State(agent): State<Arc<Agent>>) -> Response {
    (
        [("content-type", ember_telemetry::CONTENT_TYPE)],
        agent.render_metrics(),
    )
        .into_response()
}

async fn get_config(
    State(agent): State<Arc<Agent>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let config = agent.config();
    if q.get("format").map(String::as_str) == Some("yaml") {
        return ([("content-type", "application/yaml")], config.to_yaml()).into_response();
    }
    axum::Json(config).into_response()
}

async fn targets(State(agent): State<Arc<Agent>>) -> Response {
    axum::Json(agent.metrics().scrape_states()).into_response()
}

fn errors_json(errors: &[config::ConfigError]) -> serde_json::Value {
    serde_json::json!({
        "errors": errors
            .iter()
            .map(|e| serde_json::json!({"path": e.path, "reason": e.reason}))
            .collect::<Vec<_>>()
    })
}

async fn post_config(
    State(agent): State<Arc<Agent>>,
    Query(q): Query<HashMap<String, String>>,
    body: String,
) -> Response {
    let dry_run = q.get("dry_run").is_some_and(|v| v == "true" || v == "1");
    let new = match config::parse(&body) {
        Ok(c) => c,
        Err(e) => {
            agent
                .metrics()
                .reload_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return (StatusCode::BAD_REQUEST, axum::Json(errors_json(&e.0))).into_response();
        }
    };
    let diff = config::diff_lines(&agent.config().to_yaml(), &new.to_yaml());
    if dry_run {
        return axum::Json(serde_json::json!({"diff": diff, "applied": false})).into_response();
    }
    let agent2 = agent.clone();
    // Reconfiguring joins the old profiler thread: keep it off the async workers.
    let result = tokio::task::spawn_blocking(move || {
        let handle = tokio::runtime::Handle::current();
        let _guard = handle.enter();
        agent2.apply(new)
    })
    .await;
    match result {
        Ok(Ok(())) => {
            tracing::info!(via = "api", "configuration applied");
            axum::Json(serde_json::json!({"diff": diff, "applied": true})).into_response()
        }
        Ok(Err(crate::AgentError::Config(e))) => {
            (StatusCode::BAD_REQUEST, axum::Json(errors_json(&e.0))).into_response()
        }
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(serde_json::json!({"errors": [{"path": "", "reason": e.to_string()}]})),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
