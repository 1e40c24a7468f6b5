//! The agent's shutdown (what `ember agent` does on SIGTERM): the profile still being collected
//! (its upload interval far from over) is cut, queued and pushed to the server before
//! `Agent::shutdown` returns, within 5 s.

mod support;

use std::time::Duration;
use support::{
    RunningAgent, Server, cpu_seconds, go_app, host_perf_allowed, metric, query_folded, temp_dir,
    wait_for,
};

/// Folded CPU stacks of `service` on the server (empty when it has none).
fn folded(server: &Server, service: &str) -> String {
    query_folded(
        &server.addr,
        &format!("{{service_name=\"{service}\"}}"),
        "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
    )
}

#[test]
fn shutdown_flushes_the_profile_in_progress() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-flush");
    let dir = dir.path();
    let Some(app) = go_app(dir, "emberflush") else {
        return;
    };
    let server = Server::start(&dir.join("data"), &[]);
    // A 10-minute upload interval: nothing is cut before the test ends unless shutdown cuts it.
    let agent = RunningAgent::start(&format!(
        "admin: {{listen: '127.0.0.1:0'}}\n\
         exporters:\n  server: {{url: 'http://{}'}}\n\
         profiling:\n\
         \x20 upload_interval: 10m\n\
         \x20 cpu: {{sample_rate_hz: 99}}\n\
         \x20 targets: {{all: false, comm: 'emberflush'}}\n",
        server.addr
    ));
    assert!(
        wait_for(Duration::from_secs(10), || metric(
            &agent.metrics(),
            "ember_agent_profiler_running"
        ) == Some(1.0)),
        "{}",
        agent.log()
    );
    // Let the sampler see the busy Go program: a second of its CPU time is about 99 samples.
    let pid = app.child.id();
    let cpu_at_start = cpu_seconds(pid);
    assert!(
        wait_for(Duration::from_secs(30), || cpu_seconds(pid)
            >= cpu_at_start + 1.0),
        "the Go program does not run"
    );
    // Nothing has been sent yet.
    let m = agent.metrics();
    assert_eq!(metric(&m, "ember_agent_profiles_total"), Some(0.0), "{m}");
    assert_eq!(
        metric(&m, "ember_agent_push_sent_profiles_total"),
        Some(0.0),
        "{m}"
    );
    assert!(!folded(&server, "emberflush").contains("emberBurn"));

    let stopped = agent.terminate();
    // The shutdown cut reached the server before shutdown returned, and the queue was empty
    // after it.
    assert!(stopped.secs < 5.0, "{stopped:?}");
    assert!(
        stopped.flushed && stopped.push.queue_profiles == 0,
        "{stopped:?}"
    );
    assert!(stopped.push.sent_profiles > 0, "{stopped:?}");
    let stacks = folded(&server, "emberflush");
    assert!(
        stacks.contains("main.emberBurn"),
        "{stacks}\n{}",
        support::log_text()
    );
}
