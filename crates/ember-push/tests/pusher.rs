//! The push client and the background pusher against a real server on 127.0.0.1 port 0 (an
//! axum app standing in for Ember's push route): what goes over the wire, how 4xx and 429
//! answers are handled, and that `Retry-After` is waited for. No fixed sleeps: tests wait on
//! conditions, with deadlines.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use ember_push::{Client, PUSH_PATH, PushConfig, PushError, PushProfile, Pusher, proto};
use prost::Message;

/// A canned answer: status, headers, body.
type Answer = (u16, Vec<(&'static str, &'static str)>, &'static str);

/// What the test server does with the next pushes: each answer is used once, in order; once
/// they run out, every push is accepted.
#[derive(Clone, Default)]
struct Server {
    answers: Arc<Mutex<Vec<Answer>>>,
    received: Arc<Mutex<Vec<Received>>>,
}

/// One push as the server saw it.
#[derive(Clone, Debug)]
struct Received {
    at: Instant,
    headers: HeaderMap,
    request: proto::PushRequest,
}

impl Server {
    /// Starts the server; returns its base URL.
    async fn start(&self) -> String {
        let me = self.clone();
        let app = Router::new().route(
            PUSH_PATH,
            post(move |headers: HeaderMap, body: Bytes| {
                let me = me.clone();
                async move {
                    let request = proto::PushRequest::decode(body).expect("a PushRequest");
                    me.received.lock().unwrap().push(Received {
                        at: Instant::now(),
                        headers,
                        request,
                    });
                    let next = {
                        let mut answers = me.answers.lock().unwrap();
                        (!answers.is_empty()).then(|| answers.remove(0))
                    };
                    let (status, headers, body) = next.unwrap_or((200, vec![], "{}"));
                    let mut map = HeaderMap::new();
                    for (name, value) in headers {
                        map.insert(name, value.parse().unwrap());
                    }
                    (StatusCode::from_u16(status).unwrap(), map, body).into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{addr}")
    }

    fn answer(&self, status: u16, headers: Vec<(&'static str, &'static str)>, body: &'static str) {
        self.answers.lock().unwrap().push((status, headers, body));
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// Waits until `condition` holds, failing the test after `within`.
async fn wait_for(what: &str, within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn profile(tag: &str) -> PushProfile {
    PushProfile {
        labels: vec![
            ("service_name".into(), "push-test".into()),
            ("tag".into(), tag.into()),
        ],
        raw_profile: tag.as_bytes().to_vec(),
    }
}

#[tokio::test]
async fn a_push_carries_labels_tenant_and_token() {
    let server = Server::default();
    let base = server.start().await;
    let client = Client::new(&PushConfig {
        url: format!("{base}/"),
        tenant_id: Some("team-a".into()),
        bearer_token: Some(" tok ".into()),
        ..PushConfig::default()
    })
    .unwrap();
    assert_eq!(client.url(), format!("{base}{PUSH_PATH}"));
    client
        .push(&[profile("one"), profile("two")])
        .await
        .unwrap();
    let received = server.received();
    assert_eq!(received.len(), 1);
    let got = &received[0];
    let header = |name: &str| got.headers.get(name).unwrap().to_str().unwrap().to_string();
    assert_eq!(header("content-type"), "application/proto");
    assert_eq!(header("connect-protocol-version"), "1");
    assert_eq!(header("x-scope-orgid"), "team-a");
    assert_eq!(header("authorization"), "Bearer tok");
    assert_eq!(got.request.series.len(), 2);
    let series = &got.request.series[1];
    assert_eq!(series.labels[1].name, "tag");
    assert_eq!(series.labels[1].value, "two");
    assert_eq!(series.samples[0].raw_profile, b"two");
}

#[tokio::test]
async fn answers_are_classified() {
    let server = Server::default();
    let base = server.start().await;
    let client = Client::new(&PushConfig {
        url: base,
        ..PushConfig::default()
    })
    .unwrap();
    server.answer(
        400,
        vec![("content-type", "application/json")],
        r#"{"code":"invalid_argument","message":"bad pprof"}"#,
    );
    server.answer(503, vec![("retry-after", "12")], "busy");
    server.answer(500, vec![], "");
    match client.push(&[profile("x")]).await {
        Err(e @ PushError::Rejected { status: 400, .. }) => {
            assert!(!e.is_retryable());
            assert!(e.to_string().contains("bad pprof"), "{e}");
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    match client.push(&[profile("x")]).await {
        Err(PushError::Retry {
            status: 503,
            retry_after,
            message,
        }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(12)));
            assert_eq!(message, "busy");
        }
        other => panic!("expected a retry, got {other:?}"),
    }
    match client.push(&[profile("x")]).await {
        Err(e @ PushError::Retry { status: 500, .. }) => assert!(e.is_retryable()),
        other => panic!("expected a retry, got {other:?}"),
    }
    client.push(&[profile("x")]).await.unwrap();
}

/// A 429 with `Retry-After: 1`: the pusher's backoff alone would retry after ~10 ms; it must
/// wait the full second the server asked for, then deliver.
#[tokio::test]
async fn the_pusher_waits_for_retry_after() {
    let server = Server::default();
    let base = server.start().await;
    server.answer(429, vec![("retry-after", "1")], "slow down");
    let pusher = Pusher::start(PushConfig {
        url: base,
        min_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        ..PushConfig::default()
    })
    .unwrap();
    pusher.enqueue(profile("throttled"));
    wait_for("the retried push", Duration::from_secs(10), || {
        pusher.stats().sent_profiles == 1
    })
    .await;
    let received = server.received();
    assert_eq!(received.len(), 2, "one refused, one accepted");
    let waited = received[1].at - received[0].at;
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_secs(5),
        "waited {waited:?}"
    );
    let stats = pusher.stats();
    assert_eq!(stats.throttled_requests, 1, "{stats:?}");
    assert_eq!(stats.retry_after_waits, 1, "{stats:?}");
    assert_eq!(stats.upload_errors, 1, "{stats:?}");
    assert_eq!((stats.queue_profiles, stats.queue_bytes), (0, 0));
    assert_eq!(stats.last_error, None, "cleared by the success");
}

/// A 4xx is final: the batch is counted as rejected and not sent again; later profiles go.
#[tokio::test]
async fn the_pusher_drops_rejected_batches() {
    let server = Server::default();
    let base = server.start().await;
    server.answer(400, vec![], "no");
    let pusher = Pusher::start(PushConfig {
        url: base,
        ..PushConfig::default()
    })
    .unwrap();
    pusher.enqueue(profile("refused"));
    wait_for("the rejection", Duration::from_secs(10), || {
        pusher.stats().rejected_profiles == 1
    })
    .await;
    pusher.enqueue(profile("accepted"));
    assert!(pusher.flush(Duration::from_secs(10)).await);
    let stats = pusher.stats();
    assert_eq!(stats.sent_profiles, 1, "{stats:?}");
    assert_eq!(server.received().len(), 2);
}

#[test]
fn bad_settings_fail_at_start() {
    for url in ["ftp://h", "localhost:4040", "http://"] {
        let error = Client::new(&PushConfig {
            url: url.into(),
            ..PushConfig::default()
        })
        .unwrap_err();
        assert!(error.to_string().contains(url), "{error}");
    }
    let error = Client::new(&PushConfig {
        url: "https://127.0.0.1:1".into(),
        tls_ca_file: Some("/nonexistent/ca.pem".into()),
        ..PushConfig::default()
    })
    .unwrap_err();
    assert!(error.to_string().contains("/nonexistent/ca.pem"), "{error}");
}

/// The one-shot client's retries: busy answers are retried with backoff until `retries` runs
/// out; each retry is reported first.
#[tokio::test]
async fn push_with_retries_retries_busy_answers() {
    let server = Server::default();
    let base = server.start().await;
    let client = Client::new(&PushConfig {
        url: base,
        min_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(20),
        ..PushConfig::default()
    })
    .unwrap();
    server.answer(500, vec![], "oops");
    server.answer(503, vec![], "busy");
    let mut retries = Vec::new();
    client
        .push_with_retries(&[profile("r")], 2, |e, delay, attempt| {
            retries.push((e.to_string(), delay, attempt));
        })
        .await
        .unwrap();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries[0].0.contains("oops") && retries[1].0.contains("busy"));
    assert!(retries.iter().all(|r| r.1 <= Duration::from_millis(20)));
    assert_eq!(server.received().len(), 3);

    // Out of retries: the last error comes back.
    server.answer(503, vec![], "still busy");
    let error = client
        .push_with_retries(&[profile("r")], 0, |_, _, _| panic!("no retry expected"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("still busy"), "{error}");
}
