//! Server-wide bounds over HTTP: the allow-list of tenants, the series cap over all tenants,
//! and the decompressed size of a whole request (the memory and `/ready` side of the
//! last one is measured on the binary, in `crates/ember/tests/server_limits.rs`).

mod util;

use util::{Server, corpus, enc, push_request, temp_dir};

fn go_cpu() -> Vec<u8> {
    std::fs::read(corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz")).unwrap()
}

/// A server with `config` on a fresh directory, removed when the returned guard drops
/// (after the server: it is declared first).
fn start(name: &str, config: &str, extra: &[&str]) -> (tempfile::TempDir, Server) {
    let dir = temp_dir(name);
    let path = dir.path().join("config.json");
    std::fs::write(&path, config).unwrap();
    let mut args = vec!["--config", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    let server = Server::start(&dir.path().join("data"), &args);
    (dir, server)
}

fn push_as(server: &Server, tenant: Option<&str>, service: &str) -> (u16, serde_json::Value) {
    let mut headers = vec![("Content-Type", "application/proto")];
    if let Some(t) = tenant {
        headers.push(("X-Scope-OrgID", t));
    }
    let (s, b) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &headers,
        &push_request(&[("service_name", service)], &go_cpu()),
    );
    let body = serde_json::from_slice(&b).unwrap_or(serde_json::Value::Null);
    (s, body)
}

#[test]
fn only_allowed_tenants_are_served() {
    let (dir, server) = start(
        "allowed",
        r#"{"retention_days": 0, "allowed_tenants": ["team-a", "anonymous"]}"#,
        &[],
    );
    assert_eq!(push_as(&server, Some("team-a"), "a").0, 200);
    // No X-Scope-OrgID is the tenant "anonymous", listed here.
    assert_eq!(push_as(&server, None, "anon").0, 200);
    let (s, err) = push_as(&server, Some("team-b"), "b");
    assert_eq!(s, 403, "{err}");
    assert_eq!(err["code"], "permission_denied");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("\"team-b\"") && message.contains("allowed_tenants"),
        "{message}"
    );
    // Reads too, and the Pyroscope ingest.
    let query = format!("/api/v1/series?query={}&from=0", enc("{}"));
    let (s, body) = server.get(&query, &[("X-Scope-OrgID", "team-b")]);
    assert_eq!(s, 403, "{body}");
    let (s, body) = server.get(&query, &[("X-Scope-OrgID", "team-a")]);
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("\"a\""), "{body}");
    let (s, b) = server.request(
        "POST",
        "/ingest?name=b.cpu&from=1700000000",
        &[("X-Scope-OrgID", "team-b")],
        b"main;work 10\n",
    );
    assert_eq!(s, 403, "{}", String::from_utf8_lossy(&b));
    let (_, metrics) = server.get("/metrics", &[]);
    assert!(
        metrics.contains("ember_rejected_total{reason=\"tenant_not_allowed\"} 2"),
        "{metrics}"
    );
    drop(server);

    // With tokens, the token's tenant must be allowed as well.
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "tok-a team-a\ntok-c team-c\n").unwrap();
    let (_dir, server) = start(
        "allowed-tokens",
        r#"{"retention_days": 0, "allowed_tenants": ["team-a"]}"#,
        &["--auth-tokens", tokens.to_str().unwrap()],
    );
    let push = |token: &str| {
        let auth = format!("Bearer {token}");
        server
            .request(
                "POST",
                "/push.v1.PusherService/Push",
                &[
                    ("Content-Type", "application/proto"),
                    ("Authorization", &auth),
                ],
                &push_request(&[("service_name", "t")], &go_cpu()),
            )
            .0
    };
    assert_eq!(push("tok-a"), 200);
    assert_eq!(push("tok-c"), 403);
    assert_eq!(push("unknown"), 401);
}

#[test]
fn the_series_cap_spans_tenants() {
    // Each push of the Go CPU profile makes two series (samples and cpu).
    let (_dir, server) = start(
        "series-total",
        r#"{"retention_days": 0, "max_series_total": 5}"#,
        &[],
    );
    assert_eq!(push_as(&server, Some("t1"), "svc").0, 200);
    assert_eq!(push_as(&server, Some("t2"), "svc").0, 200);
    // A new tenant has its own per-tenant allowance, but not beyond the server's.
    let (s, err) = push_as(&server, Some("t3"), "svc");
    assert_eq!(s, 429, "{err}");
    assert_eq!(err["code"], "resource_exhausted");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("at most 5 series over all tenants")
            && message.contains("max_series_total"),
        "{message}"
    );
    // Known series stay writable.
    assert_eq!(push_as(&server, Some("t1"), "svc").0, 200);
    let (_, metrics) = server.get("/metrics", &[]);
    assert!(
        metrics.contains("ember_rejected_total{reason=\"series_total_limit\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_request_whose_profiles_decompress_past_the_request_limit_is_refused_whole() {
    let go = go_cpu();
    let raw = ember_pprof::decompress(&go, &Default::default())
        .unwrap()
        .len();
    // Room for two copies of the profile, not three.
    let config = format!(
        r#"{{"retention_days": 0, "max_request_decompressed_bytes": {}}}"#,
        2 * raw + raw / 2
    );
    let (_dir, server) = start("request-limit", &config, &[]);
    // JSON push (base64 profiles) of three samples: refused as a whole.
    let sample = serde_json::json!({ "rawProfile": util::base64(&go) });
    let request = |n: usize| {
        serde_json::json!({ "series": [{
            "labels": [{ "name": "service_name", "value": "three" }],
            "samples": vec![sample.clone(); n],
        }]})
        .to_string()
    };
    let json = [("Content-Type", "application/json")];
    let (s, b) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &json,
        request(3).as_bytes(),
    );
    let text = String::from_utf8_lossy(&b);
    assert_eq!(s, 413, "{text}");
    assert!(
        text.contains("max_request_decompressed_bytes") && text.contains("nothing was stored"),
        "{text}"
    );
    let series = format!("/api/v1/series?query={}&from=0", enc("{}"));
    let (_, body) = server.get(&series, &[]);
    assert!(!body.contains("three"), "{body}");
    // Two fit.
    let (s, b) = server.request(
        "POST",
        "/push.v1.PusherService/Push",
        &json,
        request(2).as_bytes(),
    );
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let (_, body) = server.get(&series, &[]);
    assert!(body.contains("three"), "{body}");
}
