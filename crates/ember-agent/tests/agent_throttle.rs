//! The agent's pusher against a real server that rate-limits pushes
//! (`max_push_requests_per_second: 0.2`, one per 5 s): the server answers 429 with
//! `Retry-After`, the agent waits for it (its own backoff is 100-200 ms, so only Retry-After
//! explains the waits), counts it in /metrics, and everything it queued is delivered later.

mod support;

use std::time::{Duration, Instant};
use support::{RunningAgent, Server, Workload, host_perf_allowed, metric, temp_dir, wait_for};

#[test]
fn pusher_waits_for_retry_after_on_429_and_delivers_later() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-throttle");
    let dir = dir.path();
    let server_config = dir.join("server.json");
    std::fs::write(
        &server_config,
        r#"{"retention_days": 0, "max_push_requests_per_second": 0.2}"#,
    )
    .unwrap();
    let server = Server::start(
        &dir.join("data"),
        &["--config", server_config.to_str().unwrap()],
    );
    let _workload = Workload::start(dir);
    let agent = RunningAgent::start(&format!(
        "admin: {{listen: 127.0.0.1:0}}\n\
         profiling:\n  upload_interval: 1s\n  targets: {{all: false, comm: three_paths}}\n\
         exporters:\n  server: {{url: 'http://{}', min_backoff: 100ms, max_backoff: 200ms}}\n",
        server.addr
    ));
    let started = Instant::now();

    // Profiles come every second, the server takes one request per 5 s: 429s must happen.
    // Wait for four of them and two deliveries: several Retry-After periods (about 15 s when
    // honoured; under a second with the 100-200 ms backoff alone, which the rate check below
    // then catches).
    let counters = |m: &str| {
        (
            metric(m, "ember_agent_push_throttled_total").unwrap_or(0.0),
            metric(m, "ember_agent_push_sent_profiles_total").unwrap_or(0.0),
        )
    };
    assert!(
        wait_for(Duration::from_secs(60), || {
            let (throttled, sent) = counters(&agent.metrics());
            throttled >= 4.0 && sent >= 2.0
        }),
        "not enough 429s or deliveries: {}",
        agent.metrics()
    );
    let m = agent.metrics();
    let elapsed = started.elapsed().as_secs_f64();
    let throttled = metric(&m, "ember_agent_push_throttled_total").unwrap();
    let waits = metric(&m, "ember_agent_push_retry_after_waits_total").unwrap();
    assert!(waits >= throttled - 1.0, "{m}");
    // Honouring Retry-After (about 5 s) allows roughly one 429 per 5 s; the 100-200 ms
    // backoff alone would have produced dozens.
    assert!(
        throttled <= elapsed / 4.0 + 2.0,
        "{throttled} 429s in {elapsed:.0} s: Retry-After not honoured\n{m}"
    );
    let (_, server_metrics) = server.get("/metrics", &[]);
    let rejected = metric(
        &server_metrics,
        "ember_rejected_total{reason=\"rate_limit\"}",
    )
    .unwrap_or(0.0);
    assert!(
        rejected >= throttled,
        "server {rejected} vs agent {throttled}"
    );
    assert_eq!(
        metric(&m, "ember_agent_push_dropped_profiles_total"),
        Some(0.0)
    );
    assert_eq!(
        metric(&m, "ember_agent_push_rejected_profiles_total"),
        Some(0.0)
    );
    // Nothing throttled was lost: every profile is sent or still queued for the next try.
    let sent = metric(&m, "ember_agent_push_sent_profiles_total").unwrap_or(0.0);
    let queued = metric(&m, "ember_agent_push_queue_profiles").unwrap_or(0.0);
    let enqueued = metric(&m, "ember_agent_push_enqueued_profiles_total").unwrap_or(0.0);
    assert!(sent >= 2.0, "{m}");
    // (One cut may be enqueued between the counters' reads.)
    let missing = enqueued - sent - queued;
    assert!(
        (0.0..=1.0).contains(&missing),
        "{missing} profiles unaccounted for\n{m}"
    );
    let (_, services) = server.get("/api/v1/label/service_name/values", &[]);
    assert!(services.contains("three_paths"), "{services}");
    // The queue may not drain before the next Retry-After: only the time is checked (the
    // binary's limit, its 4.5 s budget plus the exit).
    let stopped = agent.terminate();
    assert!(stopped.secs < 5.5, "{stopped:?}");
}
