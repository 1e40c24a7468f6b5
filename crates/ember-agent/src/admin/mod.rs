//! The agent's admin HTTP endpoint.
//!
//! | Route | What |
//! |---|---|
//! | `GET /metrics` | Prometheus text (see [`crate::metrics`]) |
//! | `GET /ready` | `ready` |
//! | `GET /api/v1/config` | effective configuration as JSON (`?format=yaml` for YAML), every secret shown as `***redacted***` |
//! | `POST /api/v1/config` | body: a YAML/JSON configuration (`Content-Type: application/yaml` or `application/json`, else 415); validates, answers `{"diff", "secrets_changed", "applied"}`; `?dry_run=true` only validates and diffs; invalid: 400 `{"errors": [{"path", "reason"}]}`. A `***redacted***` where the running configuration has a secret keeps that secret |
//! | `GET /api/v1/targets` | scrape targets: up, counts, last error |
//!
//! Access (the `guard` module): a foreign `Origin` gets 403 on every route, and so does a `Host` that
//! names another host when the endpoint is on loopback (DNS rebinding); with an admin token
//! ([`AdminOptions::token`], `ember agent --admin-token-file`) every `/api/v1` route needs
//! `Authorization: Bearer <token>` (401); without one, reads stay open and every change is
//! refused (403, saying how to enable changes).

mod guard;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub use guard::{AdminOptions, TokenFileError, read_token_file};

use crate::Agent;
use crate::config;

/// Serves the admin routes on `listener`, guarded as `options` say, until `shutdown`
/// completes.
pub async fn serve(
    agent: Arc<Agent>,
    listener: tokio::net::TcpListener,
    options: AdminOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let local = listener.local_addr()?;
    if options.token.is_none() && !local.ip().is_loopback() {
        tracing::warn!(
            listen = %local,
            "admin endpoint on a non-loopback address without a token: anyone who reaches it reads the configuration (secrets redacted); changes are refused"
        );
    }
    let guard = guard::Guard {
        token: options.token,
        local,
    };
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/ready", get(|| async { "ready" }))
        .route("/api/v1/config", get(get_config).post(post_config))
        .route("/api/v1/targets", get(targets))
        .layer(axum::middleware::from_fn_with_state(guard, guard::check))
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
    let config = agent.config().redacted();
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
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(refused) = guard::refuse_content_type(&headers) {
        return refused;
    }
    let dry_run = q.get("dry_run").is_some_and(|v| v == "true" || v == "1");
    let running = agent.config();
    let parsed = std::str::from_utf8(&body)
        .map_err(|e| {
            config::ConfigErrors(vec![config::ConfigError {
                path: String::new(),
                reason: format!("the body is not UTF-8: {e}"),
            }])
        })
        .and_then(config::parse)
        .and_then(|mut c| c.restore_secrets(&running).map(|()| c));
    let new = match parsed {
        Ok(c) => c,
        Err(e) => {
            agent
                .metrics()
                .reload_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return (StatusCode::BAD_REQUEST, axum::Json(errors_json(&e.0))).into_response();
        }
    };
    // Both sides redacted: the answer must not carry a secret either, so changed secrets
    // are named in `secrets_changed` instead of shown in the diff.
    let diff = config::diff_lines(&running.redacted().to_yaml(), &new.redacted().to_yaml());
    let secrets_changed = running.changed_secrets(&new);
    if dry_run {
        return axum::Json(serde_json::json!({
            "diff": diff, "secrets_changed": secrets_changed, "applied": false
        }))
        .into_response();
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
            axum::Json(serde_json::json!({
                "diff": diff, "secrets_changed": secrets_changed, "applied": true
            }))
            .into_response()
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
