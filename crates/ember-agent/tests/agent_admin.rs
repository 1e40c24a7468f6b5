//! The admin endpoint as an attacker and an operator meet it (issue 13, item 9): the agent and
//! its admin endpoint run in this process on 127.0.0.1:0, every request is real HTTP.
//!
//! - secrets never leave the agent: the exporter's bearer token is `***redacted***` in
//!   `GET /api/v1/config` (JSON and YAML) and in the answers of a POST (what else counts as a
//!   secret, such as a URL's password, is unit-tested in `config::redact`);
//! - a configuration read from the endpoint and sent back keeps the running secrets;
//! - a web page's cross-origin `text/plain` POST (no CORS preflight) changes nothing, and a
//!   DNS-rebound page (same origin, foreign `Host`) cannot even read;
//! - a POST without the admin token, or to an agent started without one, changes nothing;
//! - a POST with the token is applied.

mod support;

use ember_agent::admin::AdminOptions;
use support::{ADMIN_TOKEN, RunningAgent, http};

const SECRET: &str = "push-token-7f3a9c";

/// An agent that samples nothing and pushes to a server that is not there (the pushes only
/// queue): all that matters here is its configuration.
fn yaml(url: &str, token: &str) -> String {
    format!(
        "admin: {{listen: '127.0.0.1:0'}}\nprofiling: {{enabled: false}}\n\
         exporters: {{server: {{url: '{url}', bearer_token: '{token}'}}}}\n"
    )
}

fn start(options: AdminOptions) -> RunningAgent {
    RunningAgent::try_start_with(&yaml("http://127.0.0.1:9", SECRET), options).unwrap()
}

fn with_token() -> AdminOptions {
    AdminOptions {
        token: Some(ADMIN_TOKEN.into()),
    }
}

fn bearer() -> String {
    format!("Bearer {ADMIN_TOKEN}")
}

/// The exporter settings the agent runs with: (url, bearer token).
fn exporter(agent: &RunningAgent) -> (String, Option<String>) {
    let server = agent
        .agent
        .config()
        .exporters
        .server
        .expect("server exporter");
    (server.url, server.bearer_token)
}

fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

#[test]
fn secrets_are_redacted_in_every_answer() {
    for options in [AdminOptions::default(), with_token()] {
        let guarded = options.token.is_some();
        let agent = start(options);
        let auth = bearer();
        let headers: &[(&str, &str)] = if guarded {
            &[("authorization", &auth)]
        } else {
            &[]
        };
        for path in ["/api/v1/config", "/api/v1/config?format=yaml"] {
            let (status, body) = http(&agent.admin, "GET", path, headers, b"");
            let body = text(&body);
            assert_eq!(status, 200, "{path}: {body}");
            assert!(!body.contains(SECRET), "{path} shows a secret: {body}");
            assert!(body.contains("***redacted***"), "{path}: {body}");
            // What is not secret is shown as it is.
            assert!(body.contains("127.0.0.1:9"), "{path}: {body}");
        }
        if guarded {
            // The diff of a change, and its dry run, do not carry secrets either.
            let new = yaml("http://127.0.0.1:10", "a-new-token-91b");
            for path in ["/api/v1/config?dry_run=true", "/api/v1/config"] {
                let (status, body) = http(
                    &agent.admin,
                    "POST",
                    path,
                    &[
                        ("content-type", "application/yaml"),
                        ("authorization", &auth),
                    ],
                    new.as_bytes(),
                );
                let body = text(&body);
                assert_eq!(status, 200, "{body}");
                for secret in [SECRET, "a-new-token-91b"] {
                    assert!(!body.contains(secret), "{path} shows {secret}: {body}");
                }
                assert!(
                    body.contains("\"secrets_changed\":[\"exporters.server.bearer_token\""),
                    "{body}"
                );
            }
        }
    }
}

#[test]
fn redacted_config_sent_back_keeps_the_running_secrets() {
    let agent = start(with_token());
    let auth = bearer();
    let (status, shown) = http(
        &agent.admin,
        "GET",
        "/api/v1/config?format=yaml",
        &[("authorization", &auth)],
        b"",
    );
    assert_eq!(status, 200);
    // `ember agent describe > f.yaml`, an unrelated edit, `ember agent apply -f f.yaml`.
    let edited = text(&shown).replace("external_labels: {}", "external_labels: {team: perf}");
    assert_ne!(
        edited,
        text(&shown),
        "the edit did not apply to:\n{}",
        text(&shown)
    );
    let (status, body) = http(
        &agent.admin,
        "POST",
        "/api/v1/config",
        &[
            ("content-type", "application/yaml"),
            ("authorization", &auth),
        ],
        edited.as_bytes(),
    );
    assert_eq!(status, 200, "{}", text(&body));
    let config = agent.agent.config();
    assert_eq!(
        config.external_labels.get("team").map(String::as_str),
        Some("perf")
    );
    assert_eq!(
        exporter(&agent),
        ("http://127.0.0.1:9".to_string(), Some(SECRET.to_string())),
        "the placeholder replaced a running secret"
    );
    // A placeholder that stands for no running secret is refused, naming the field.
    let bogus = yaml("http://127.0.0.1:9", "***redacted***");
    let agent2 =
        RunningAgent::try_start_with(&yaml("http://127.0.0.1:9", ""), with_token()).unwrap();
    let (status, body) = http(
        &agent2.admin,
        "POST",
        "/api/v1/config",
        &[
            ("content-type", "application/yaml"),
            ("authorization", &auth),
        ],
        bogus.as_bytes(),
    );
    assert_eq!(status, 400, "{}", text(&body));
    assert!(
        text(&body).contains("exporters.server.bearer_token"),
        "{}",
        text(&body)
    );
    assert_eq!(exporter(&agent2).1.as_deref(), Some(""));
}

#[test]
fn cross_origin_text_plain_post_changes_nothing() {
    let redirect = yaml("http://attacker.example:4040", "stolen");
    for options in [AdminOptions::default(), with_token()] {
        let agent = start(options);
        let before = exporter(&agent);
        let auth = bearer();
        // What `fetch('http://127.0.0.1:4041/api/v1/config', {method: 'POST', mode:
        // 'no-cors', body})` sends from any page: no preflight, so the browser delivers it.
        for extra in [None, Some(("authorization", auth.as_str()))] {
            let mut headers = vec![
                ("content-type", "text/plain;charset=UTF-8"),
                ("origin", "http://attacker.example"),
            ];
            headers.extend(extra);
            let (status, body) = http(
                &agent.admin,
                "POST",
                "/api/v1/config",
                &headers,
                redirect.as_bytes(),
            );
            assert_eq!(status, 403, "{}", text(&body));
            assert!(text(&body).contains("cross-origin"), "{}", text(&body));
        }
        assert_eq!(
            exporter(&agent),
            before,
            "a cross-origin POST changed the config"
        );
        // Same origin but a content type a form can send: 415, nothing changed.
        let own = format!("http://{}", agent.admin);
        let (status, body) = http(
            &agent.admin,
            "POST",
            "/api/v1/config",
            &[
                ("content-type", "text/plain"),
                ("origin", &own),
                ("authorization", &auth),
            ],
            redirect.as_bytes(),
        );
        if agent_has_token(&agent) {
            assert_eq!(status, 415, "{}", text(&body));
        } else {
            assert_eq!(status, 403, "{}", text(&body));
        }
        assert_eq!(exporter(&agent), before);
        // A foreign origin cannot read either.
        let (status, _) = http(
            &agent.admin,
            "GET",
            "/api/v1/config",
            &[
                ("origin", "http://attacker.example"),
                ("authorization", &auth),
            ],
            b"",
        );
        assert_eq!(status, 403);
    }
}

/// A GET with `host` as the `Host` header (what a browser sends for a page whose name was
/// rebound to 127.0.0.1): the status.
fn get_with_host(addr: &str, path: &str, host: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

#[test]
fn dns_rebinding_host_is_refused() {
    let agent = start(AdminOptions::default());
    let port = agent.admin.rsplit(':').next().unwrap().to_string();
    let rebound = format!("attacker.example:{port}");
    assert_eq!(get_with_host(&agent.admin, "/api/v1/config", &rebound), 403);
    assert_eq!(
        get_with_host(&agent.admin, "/api/v1/targets", &rebound),
        403
    );
    let local = format!("localhost:{port}");
    assert_eq!(get_with_host(&agent.admin, "/api/v1/config", &local), 200);
    assert_eq!(
        get_with_host(&agent.admin, "/api/v1/config", &agent.admin),
        200
    );
}

/// Whether the agent's admin endpoint wants a token (it refuses an unauthenticated read).
fn agent_has_token(agent: &RunningAgent) -> bool {
    http(&agent.admin, "GET", "/api/v1/config", &[], b"").0 == 401
}

#[test]
fn post_without_token_changes_nothing() {
    let redirect = yaml("http://attacker.example:4040", "stolen");
    // Started with a token: none, or a wrong one, is 401.
    let agent = start(with_token());
    let before = exporter(&agent);
    for auth in [None, Some("Bearer wrong-token"), Some("Basic dGVzdDp0ZXN0")] {
        let mut headers = vec![("content-type", "application/yaml")];
        headers.extend(auth.map(|a| ("authorization", a)));
        let (status, body) = http(
            &agent.admin,
            "POST",
            "/api/v1/config",
            &headers,
            redirect.as_bytes(),
        );
        assert_eq!(status, 401, "{auth:?}: {}", text(&body));
    }
    assert_eq!(exporter(&agent), before);
    // The token also guards reads; /metrics and /ready stay open for scrapers.
    assert_eq!(http(&agent.admin, "GET", "/api/v1/config", &[], b"").0, 401);
    assert_eq!(http(&agent.admin, "GET", "/metrics", &[], b"").0, 200);
    assert_eq!(http(&agent.admin, "GET", "/ready", &[], b"").0, 200);

    // Started without a token: reads stay open, changes are refused with how to enable them.
    let agent = start(AdminOptions::default());
    let before = exporter(&agent);
    let (status, body) = http(
        &agent.admin,
        "POST",
        "/api/v1/config",
        &[("content-type", "application/yaml")],
        redirect.as_bytes(),
    );
    let body = text(&body);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--admin-token-file"), "{body}");
    assert_eq!(exporter(&agent), before);
    assert_eq!(http(&agent.admin, "GET", "/api/v1/config", &[], b"").0, 200);
}

#[test]
fn post_with_token_is_applied_and_placeholder_keeps_secret() {
    let agent = start(with_token());
    let auth = bearer();
    let own = format!("http://{}", agent.admin);
    // A new URL with the token's placeholder: the URL changes, the token stays.
    let new = yaml("http://127.0.0.1:10", "***redacted***");
    let (status, body) = http(
        &agent.admin,
        "POST",
        "/api/v1/config",
        &[
            ("content-type", "application/yaml; charset=utf-8"),
            ("authorization", &auth),
            ("origin", &own),
        ],
        new.as_bytes(),
    );
    let body = text(&body);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"applied\":true"), "{body}");
    assert_eq!(
        exporter(&agent),
        ("http://127.0.0.1:10".to_string(), Some(SECRET.to_string()))
    );
    // JSON works as well, and a real new token is stored as sent.
    let json = r#"{"admin": {"listen": "127.0.0.1:0"}, "profiling": {"enabled": false},
        "exporters": {"server": {"url": "http://127.0.0.1:11", "bearer_token": "rotated"}}}"#;
    let (status, body) = http(
        &agent.admin,
        "POST",
        "/api/v1/config",
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        json.as_bytes(),
    );
    assert_eq!(status, 200, "{}", text(&body));
    assert_eq!(
        exporter(&agent),
        (
            "http://127.0.0.1:11".to_string(),
            Some("rotated".to_string())
        )
    );
}
