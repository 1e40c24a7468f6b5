//! `ember profiling perfetto-snapshot` against a running `ember agent` whose perfetto_daemon
//! has the HTTP trigger: the command prints the trigger's JSON report, and the trace is in the
//! bucket under BUCKET_SUBDIRECTORY/NODE_NAME/YYYYMMDDTHHMMSS-perfetto-trace.pb. (The
//! exporters themselves, the trace's contents included: crates/ember-agent/tests/agent_export.rs.)

mod agent_util;
mod server_util;

use agent_util::{AgentProc, Workload, free_port, host_perf_allowed, is_stamped};
use server_util::temp_dir;
use std::process::Command;

#[test]
fn perfetto_snapshot_command_triggers_the_running_agent() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-perfetto-cli");
    let dir = dir.path();
    let bucket = dir.join("bucket");
    let trigger_port = free_port();
    let config = dir.join("agent.yaml");
    std::fs::write(
        &config,
        format!(
            "admin: {{listen: 127.0.0.1:0}}\n\
             exporters:\n  server: null\n  perfetto_daemon:\n    export_to: file://{b}\n    \
             bucket_subdirectory: pf\n    node_name: node-a\n    trigger: PERFETTO_TRIGGER_HTTP\n    \
             http_listen: 127.0.0.1:{trigger_port}\n    local_dir: {d}/runs\n",
            b = bucket.display(),
            d = dir.display()
        ),
    )
    .unwrap();
    // Something to sample, so that the snapshot is not empty.
    let _workload = Workload::start(dir);
    let agent = AgentProc::start(&config);
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["profiling", "perfetto-snapshot", "--url"])
        // `localhost`: the static binary resolves it through glibc (bench/COLLAPSE-RESULTS.md).
        .arg(format!("http://localhost:{trigger_port}/trigger"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perfetto-snapshot: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        agent.log()
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["uploaded"], true, "{report}");
    let key = report["key"].as_str().unwrap();
    assert!(key.starts_with("pf/node-a/"), "{key}");
    assert!(
        is_stamped(key.rsplit('/').next().unwrap(), "perfetto-trace.pb"),
        "{key}"
    );
    let trace = bucket.join(key);
    assert!(trace.is_file(), "{}", trace.display());
    let (ok, secs) = agent.terminate();
    assert!(ok && secs < 5.0, "exit ok={ok} after {secs:.1}s");
}
