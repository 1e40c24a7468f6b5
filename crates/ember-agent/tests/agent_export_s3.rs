//! The agent (in-process) with perf_collector exporting to `s3://` on a real moto_server:
//! uploads, then the bucket goes away (at most max_dumps_retained kept locally, the rest
//! dropped and counted), then it comes back and the kept dumps are uploaded.
//!
//! The S3 client takes its endpoint and credentials from AWS_* variables only, which the
//! binary's test gave its child process: here this test sets them in its own process, which
//! is why it is alone in its test binary.

mod support;

use std::time::Duration;
use support::*;

#[test]
fn perf_collector_to_s3_survives_an_outage() {
    if !host_perf_allowed() || !python_has("import moto.server, flask", "\"moto[server]\"") {
        return;
    }
    let dir = temp_dir("agent-export-s3");
    let dir = dir.path();
    let port = free_port();
    let mut moto = Moto::start(port);
    moto.create_bucket("dumps");
    let spool = dir.join("spool");
    let config = format!(
        "admin: {{listen: 127.0.0.1:0}}\nexporters:\n  server: null\n\
         \x20 perf_collector:\n    export_to: s3://dumps/cluster-a\n    bucket_subdirectory: perf\n    node_name: node-1\n    dump_duration_seconds: 1\n    max_dumps_retained: 2\n    local_dir: {}\n",
        spool.display()
    );
    let env = [
        ("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}")),
        ("AWS_ACCESS_KEY_ID", "testing".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "testing".to_string()),
        ("AWS_REGION", "us-east-1".to_string()),
    ];
    for (name, value) in env {
        // SAFETY: the only test of this binary, and no thread of it reads the environment
        // now: moto runs in its own process and the agent has not started.
        unsafe { std::env::set_var(name, value) };
    }
    let _workload = Workload::start(dir);
    let agent = RunningAgent::start(&config);

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
    // The outage is logged: the exporters' `tracing` warnings.
    for msg in [
        "perf_collector upload failed",
        "perf_collector dropped unuploaded dumps",
    ] {
        assert!(!events(msg).is_empty(), "{msg} not in {}", agent.log());
    }
    let stopped = agent.terminate();
    assert!(stopped.flushed && stopped.secs < 5.0, "{stopped:?}");
}
