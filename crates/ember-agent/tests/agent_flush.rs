//! `ember agent` on SIGTERM: the profile still being collected (its upload interval far from
//! over) is cut, queued and pushed to the server before the agent exits, within 5 s.

mod agent_util;
mod server_util;

use agent_util::{AgentProc, go_app, host_perf_allowed, metric, query_folded, wait_for};
use server_util::{Server, temp_dir};
use std::time::Duration;

/// Folded CPU stacks of `service` on the server (empty when it has none).
fn folded(server: &Server, service: &str) -> String {
    query_folded(
        &server.addr,
        &format!("{{service_name=\"{service}\"}}"),
        "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
    )
}

#[test]
fn sigterm_flushes_the_profile_in_progress() {
    if !host_perf_allowed() {
        eprintln!("!!!!!!!! SKIPPING: needs root or perf_event_paranoid <= 0 !!!!!!!!");
        return;
    }
    let dir = temp_dir("agent-flush");
    let Some(_app) = go_app(&dir, "emberflush") else {
        return;
    };
    let server = Server::start(&dir.join("data"), &[]);
    let config = dir.join("agent.yaml");
    // A 10-minute upload interval: nothing is cut before the test ends unless shutdown cuts it.
    std::fs::write(
        &config,
        format!(
            "admin: {{listen: '127.0.0.1:0'}}\n\
             exporters:\n  server: {{url: 'http://{}'}}\n\
             profiling:\n\
             \x20 upload_interval: 10m\n\
             \x20 cpu: {{sample_rate_hz: 99}}\n\
             \x20 targets: {{all: false, comm: 'emberflush'}}\n",
            server.addr
        ),
    )
    .unwrap();
    let agent = AgentProc::start(&config);
    assert!(
        wait_for(Duration::from_secs(10), || metric(
            &agent.metrics(),
            "ember_agent_profiler_running"
        ) == Some(1.0)),
        "{}",
        agent.log()
    );
    // Sample the busy Go program for a while; nothing has been sent yet.
    std::thread::sleep(Duration::from_secs(3));
    let m = agent.metrics();
    assert_eq!(metric(&m, "ember_agent_profiles_total"), Some(0.0), "{m}");
    assert_eq!(
        metric(&m, "ember_agent_push_sent_profiles_total"),
        Some(0.0),
        "{m}"
    );
    assert!(!folded(&server, "emberflush").contains("emberBurn"));

    let log = agent.log.clone();
    let (ok, secs) = agent.terminate();
    assert!(ok && secs < 5.0, "exit ok={ok} after {secs:.1}s");
    let log = log.lock().unwrap().clone();
    // The shutdown cut reached the server before the exit, and the queue was empty after it.
    let stopped = log
        .lines()
        .find(|l| l.contains("msg=\"stopped\""))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        stopped.contains("flushed=true") && stopped.contains("queue_profiles=0"),
        "{stopped}"
    );
    assert!(!stopped.contains("sent_profiles=0 "), "{stopped}");
    let stacks = folded(&server, "emberflush");
    assert!(stacks.contains("main.emberBurn"), "{stacks}\n{log}");
}
