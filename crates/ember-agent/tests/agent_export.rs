//! `ember agent` running the bucket exporters end to end, on the real binary with a real
//! CPU-burning C program (three_paths: path_a/path_b/path_c):
//! - perf_collector to `file://`: dumps land as BUCKET_SUBDIRECTORY/NODE_NAME/
//!   YYYYMMDDTHHMMSS-perf-data.gz, `ember collapse` folds them to the program's functions,
//!   SIGTERM writes the last window within 5 s; perfetto_daemon with the HTTP trigger:
//!   `ember profiling perfetto-snapshot` against the running agent gives a trace that
//!   Perfetto's own schema decodes, with samples of the program and sched switches;
//! - perf_collector to `s3://` on a real moto_server: uploads, then the bucket goes away
//!   (at most max_dumps_retained kept locally, the rest dropped and counted), then it comes
//!   back and the kept dumps are uploaded.

mod agent_util;
mod server_util;

use agent_util::*;
use server_util::temp_dir;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn write_config(dir: &Path, exporters: &str) -> std::path::PathBuf {
    let path = dir.join("agent.yaml");
    std::fs::write(
        &path,
        format!(
            "admin: {{listen: 127.0.0.1:0}}\nprofiling:\n  upload_interval: 2s\nexporters:\n  server: null\n{exporters}"
        ),
    )
    .unwrap();
    path
}

#[test]
fn perf_collector_to_file_and_perfetto_http_trigger() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-export-file");
    let bucket = dir.join("bucket");
    let trigger_port = free_port();
    let config = write_config(
        &dir,
        &format!(
            "  perf_collector:\n    export_to: file://{b}\n    bucket_subdirectory: perf\n    node_name: node-a\n    dump_duration_seconds: 2\n    local_dir: {d}/spool\n  perfetto_daemon:\n    export_to: file://{b}/traces\n    bucket_subdirectory: pf\n    node_name: node-a\n    trigger: PERFETTO_TRIGGER_HTTP\n    http_listen: 127.0.0.1:{trigger_port}\n    local_dir: {d}/runs\n",
            b = bucket.display(),
            d = dir.display()
        ),
    );
    let workload = Workload::start(&dir);
    let agent = AgentProc::start(&config);
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

    // The HTTP trigger on the running agent.
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["profiling", "perfetto-snapshot", "--url"])
        .arg(format!("http://127.0.0.1:{trigger_port}/trigger"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perfetto-snapshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
        let decoder =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../ember-export/tests/decode_perfetto.py");
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

    // SIGHUP with a new perf_collector section: dumps move to the new subdirectory, the
    // trigger (same port, handed to the restarted daemon) keeps answering.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "bucket_subdirectory: perf\n",
            "bucket_subdirectory: perf2\n",
        ),
    )
    .unwrap();
    agent.signal("-HUP");
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

    // SIGTERM: stops within 5 s and writes the window it held.
    let before = files_under(&perf_dir).len();
    std::thread::sleep(Duration::from_millis(1200));
    let (ok, secs) = agent.terminate();
    assert!(ok && secs < 5.0, "exit ok={ok} after {secs:.1}s");
    let after = files_under(&perf_dir);
    assert!(after.len() > before, "no final dump: {before} -> {after:?}");
    assert_eq!(files_under(&dir.join("spool")).len(), 0);
    drop(workload);
}

#[test]
fn perf_collector_to_s3_survives_an_outage() {
    if !host_perf_allowed() || !python_has("import moto.server, flask", "\"moto[server]\"") {
        return;
    }
    let dir = temp_dir("agent-export-s3");
    let port = free_port();
    let mut moto = Moto::start(port);
    moto.create_bucket("dumps");
    let spool = dir.join("spool");
    let config = write_config(
        &dir,
        &format!(
            "  perf_collector:\n    export_to: s3://dumps/cluster-a\n    bucket_subdirectory: perf\n    node_name: node-1\n    dump_duration_seconds: 1\n    max_dumps_retained: 2\n    local_dir: {}\n",
            spool.display()
        ),
    );
    let env = [
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ACCESS_KEY_ID", "testing".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
    ];
    let _workload = Workload::start(&dir);
    let agent = AgentProc::start_with_env(&config, &env);

    // 1. Bucket up: dumps are uploaded under PREFIX/BUCKET_SUBDIRECTORY/NODE_NAME/.
    assert!(
        wait_for(Duration::from_secs(30), || moto.keys("dumps").len() >= 2),
        "no uploads: {}",
        agent.log()
    );
    let keys = moto.keys("dumps");
    for k in &keys {
        let name = k
            .strip_prefix("cluster-a/perf/node-1/")
            .unwrap_or_else(|| panic!("{k}"));
        assert!(is_stamped(name, "perf-data.gz"), "{k}");
    }
    let sample = dir.join("first.gz");
    moto.get("dumps", &keys[0], &sample);
    assert!(
        folded_count(&collapse_file(&sample), "burn") > 0,
        "the first dump has no workload samples"
    );

    // 2. Bucket unreachable: dumps pile up locally, never more than max_dumps_retained.
    moto.stop();
    let mut most = 0;
    let dropped = wait_for(Duration::from_secs(60), || {
        most = most.max(files_under(&spool).len());
        metric(
            &agent.metrics(),
            "ember_agent_perf_collector_dumps_dropped_total",
        )
        .unwrap_or(0.0)
            >= 1.0
    });
    let m = agent.metrics();
    assert!(dropped, "nothing dropped during the outage: {m}");
    assert!(most <= 2, "{most} dumps kept locally (limit 2)");
    assert!(
        metric(&m, "ember_agent_perf_collector_upload_errors_total").unwrap_or(0.0) >= 1.0,
        "{m}"
    );
    let pending = metric(&m, "ember_agent_perf_collector_dumps_pending").unwrap_or(0.0);
    assert!((1.0..=2.0).contains(&pending), "pending {pending}");
    let uploaded_before =
        metric(&m, "ember_agent_perf_collector_dumps_uploaded_total").unwrap_or(0.0);

    // 3. Bucket back (moto keeps no state: recreate the bucket): the kept dumps go up.
    let moto = Moto::start(port);
    moto.create_bucket("dumps");
    assert!(
        wait_for(Duration::from_secs(60), || {
            metric(
                &agent.metrics(),
                "ember_agent_perf_collector_dumps_uploaded_total",
            )
            .unwrap_or(0.0)
                >= uploaded_before + 2.0
        }),
        "kept dumps not uploaded after the outage: {}",
        agent.metrics()
    );
    let keys = moto.keys("dumps");
    assert!(keys.len() >= 2, "{keys:?}");
    assert!(
        keys.iter()
            .all(|k| k.starts_with("cluster-a/perf/node-1/") && k.ends_with("-perf-data.gz")),
        "{keys:?}"
    );
    // The outage is in the log as structured warnings (terminate() checks every line). The
    // exporters log through `tracing`: their events are in the log whenever the binary
    // installs a subscriber, which its start-up line from the profiler shows.
    let log = agent.log();
    if log.lines().any(agent_util::is_tracing_line) {
        for msg in [
            "perf_collector upload failed",
            "perf_collector dropped unuploaded dumps",
        ] {
            assert!(agent_util::logged(&log, msg), "{msg} not in {log}");
        }
    }
    let (ok, secs) = agent.terminate();
    assert!(ok && secs < 5.0, "exit ok={ok} after {secs:.1}s");
}
