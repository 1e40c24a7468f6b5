//! The agent (in-process) running the bucket exporters end to end with a real CPU-burning C
//! program (three_paths: path_a/path_b/path_c): perf_collector to `file://`: dumps land as
//! BUCKET_SUBDIRECTORY/NODE_NAME/YYYYMMDDTHHMMSS-perf-data.gz and fold (ember-collapse) to the
//! program's functions, a reload moves them, the shutdown writes the last window within 5 s;
//! perfetto_daemon with the HTTP trigger gives a trace that Perfetto's own schema decodes,
//! with samples of the program and sched switches. (To S3: agent_export_s3.rs; the
//! `ember profiling perfetto-snapshot` command: crates/ember/tests/agent_export.rs.)

mod support;

use std::process::Command;
use std::time::Duration;
use support::*;

/// The agent configuration of these tests: host profiling, no server, `exporters` (an
/// `upload_interval` would be refused: it shapes only the server's profiles).
fn config(exporters: &str) -> String {
    format!("admin: {{listen: 127.0.0.1:0}}\nexporters:\n  server: null\n{exporters}")
}

#[test]
fn perf_collector_to_file_and_perfetto_http_trigger() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-export-file");
    let dir = dir.path();
    let bucket = dir.join("bucket");
    let trigger_port = free_port();
    let config = config(&format!(
        "  perf_collector:\n    export_to: file://{b}\n    bucket_subdirectory: perf\n    node_name: node-a\n    dump_duration_seconds: 2\n    local_dir: {d}/spool\n  perfetto_daemon:\n    export_to: file://{b}/traces\n    bucket_subdirectory: pf\n    node_name: node-a\n    trigger: PERFETTO_TRIGGER_HTTP\n    http_listen: 127.0.0.1:{trigger_port}\n    local_dir: {d}/runs\n",
        b = bucket.display(),
        d = dir.display()
    ));
    let workload = Workload::start(dir);
    let agent = RunningAgent::start(&config);
    let perf_dir = bucket.join("perf/node-a");

    // Dumps arrive every 2 s. Gather them until there are two and they hold enough of the
    // workload's samples for the ratio checked below to mean something when the machine is busy
    // (99 Hz on shared cores can leave only a handful per dump).
    let mut folded_by_dump: std::collections::BTreeMap<String, String> = Default::default();
    let mut folded = String::new();
    let enough = wait_for(Duration::from_secs(40), || {
        for name in files_under(&perf_dir) {
            // (`.NAME.tmp` is a dump being written; it is renamed when complete.)
            if !name.starts_with('.') && !folded_by_dump.contains_key(&name) {
                let text = collapse_file(&perf_dir.join(&name));
                folded_by_dump.insert(name, text);
            }
        }
        folded = folded_by_dump.values().map(String::as_str).collect();
        folded_by_dump.len() >= 2
            && folded_count(&folded, "path_a;burn") + folded_count(&folded, "path_c;burn") >= 60
    });
    assert!(
        folded_by_dump.len() >= 2,
        "no dumps under {}: {:?}\n{}",
        perf_dir.display(),
        files_under(&bucket),
        agent.log()
    );
    for name in folded_by_dump.keys() {
        assert!(is_stamped(name, "perf-data.gz"), "{name}");
    }
    let a = folded_count(&folded, "path_a;burn");
    let c = folded_count(&folded, "path_c;burn");
    assert!(
        enough && c > 0 && folded.contains("three_paths;"),
        "workload missing from the dumps (path_a {a}, path_c {c}):\n{}",
        folded.lines().take(30).collect::<Vec<_>>().join("\n")
    );
    // path_a burns 5/2 of path_c's iterations: with 60 samples or more, a <= c is a
    // three-sigma event, not noise.
    assert!(a > c, "path_a {a} <= path_c {c}");
    assert!(
        !agent.log().contains("not run"),
        "stale warning: {}",
        agent.log()
    );

    // The HTTP trigger on the running agent (what `ember profiling perfetto-snapshot` calls).
    let report = ember_export::request_snapshot(
        &format!("http://127.0.0.1:{trigger_port}/trigger"),
        Duration::from_secs(30),
    )
    .expect("perfetto snapshot");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["uploaded"], true, "{report}");
    let key = report["key"].as_str().unwrap();
    assert!(key.starts_with("pf/node-a/"), "{key}");
    assert!(
        is_stamped(key.rsplit('/').next().unwrap(), "perfetto-trace.pb"),
        "{key}"
    );
    let trace = bucket.join("traces").join(key);
    assert!(trace.is_file(), "{}", trace.display());
    if python_has(
        "from perfetto.protos.perfetto.trace import perfetto_trace_pb2",
        "perfetto",
    ) {
        let decoder = workspace_file("crates/ember-export/tests/decode_perfetto.py");
        let out = Command::new("python3")
            .arg(&decoder)
            .arg(&trace)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "decode: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(d["errors"].as_array().map(Vec::len), Some(0), "{d}");
        assert_eq!(d["samples"], report["samples"], "{d}");
        assert!(d["sched_switches"].as_u64().unwrap() > 0, "{d}");
        let pid = workload.child.id();
        let burn: u64 = d["stacks"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{pid};")) && k.contains("path_a;burn"))
            .map(|(_, v)| v.as_u64().unwrap())
            .sum();
        assert!(burn > 0, "no path_a samples of pid {pid} in the trace: {d}");
    }

    let m = agent.metrics();
    assert!(
        metric(&m, "ember_agent_perf_collector_dumps_uploaded_total").unwrap_or(0.0) >= 2.0,
        "{m}"
    );
    assert_eq!(
        metric(&m, "ember_agent_perf_collector_upload_errors_total"),
        Some(0.0)
    );
    assert_eq!(
        metric(&m, "ember_agent_perfetto_snapshots_total"),
        Some(1.0)
    );
    assert_eq!(
        metric(&m, "ember_agent_perfetto_snapshots_uploaded_total"),
        Some(1.0)
    );

    // A reload with a new perf_collector section: dumps move to the new subdirectory, the
    // trigger (same port, handed to the restarted daemon) keeps answering.
    agent.reload(&config.replace(
        "bucket_subdirectory: perf\n",
        "bucket_subdirectory: perf2\n",
    ));
    let perf_dir = bucket.join("perf2/node-a");
    assert!(
        wait_for(Duration::from_secs(20), || !files_under(&perf_dir)
            .is_empty()),
        "no dumps after the reload: {}",
        agent.log()
    );
    let snapshot = ember_export::request_snapshot(
        &format!("http://127.0.0.1:{trigger_port}/trigger"),
        Duration::from_secs(30),
    )
    .expect("trigger after reload");
    assert!(snapshot.contains("\"uploaded\":true"), "{snapshot}");
    assert!(
        metric(&agent.metrics(), "ember_agent_perfetto_snapshots_total") == Some(2.0),
        "a perf_collector reload must keep the same perfetto_daemon (its counters continue)"
    );

    // Shutdown: stops within 5 s and writes the window it held (an empty window writes
    // nothing: let the workload run 0.3 s of CPU, some 30 samples at 99 Hz, into it).
    let before = files_under(&perf_dir).len();
    let pid = workload.child.id();
    let cpu = cpu_seconds(pid);
    assert!(wait_for(Duration::from_secs(10), || cpu_seconds(pid) >= cpu + 0.3));
    let stopped = agent.terminate();
    assert!(stopped.flushed && stopped.secs < 5.0, "{stopped:?}");
    let after = files_under(&perf_dir);
    assert!(after.len() > before, "no final dump: {before} -> {after:?}");
    assert_eq!(files_under(&dir.join("spool")).len(), 0);
    drop(workload);
}
