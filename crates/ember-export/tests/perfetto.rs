//! perfetto_daemon: snapshots of the real iperf recording decoded with
//! Perfetto's own schema (`perfetto_trace_pb2`, PyPI `perfetto`), the HTTP
//! and time-interval triggers, the byte-bounded ring, retention, and the
//! trigger_name check.

mod common;

use common::*;
use ember_export::{
    Event, PerfettoDaemon, PerfettoDaemonConfig, PerfettoTrigger, Sample, build_trace,
    request_snapshot,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PERFETTO_IMPORT: &str = "from perfetto.protos.perfetto.trace import perfetto_trace_pb2";

/// Runs tests/decode_perfetto.py on a trace file.
fn decode(path: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/decode_perfetto.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "decode_perfetto.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("decoder prints JSON")
}

/// `pid;root;...;leaf` → count, as the decoder prints it.
fn expected_stacks(samples: &[Sample]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for s in samples {
        let names: Vec<String> = s
            .frames
            .iter()
            .rev()
            .map(|f| {
                if f.function.is_empty() {
                    format!("[unknown] {:#x}", f.address)
                } else {
                    f.function.to_string()
                }
            })
            .collect();
        *out.entry(format!("{};{}", s.pid, names.join(";")))
            .or_insert(0) += 1;
    }
    out
}

fn stacks_of(v: &serde_json::Value) -> BTreeMap<String, u64> {
    v["stacks"]
        .as_object()
        .expect("stacks")
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

fn check_decoded(v: &serde_json::Value, samples: &[Sample], switches: usize) {
    assert_eq!(v["errors"].as_array().unwrap().len(), 0, "{}", v["errors"]);
    assert_eq!(v["samples"].as_u64().unwrap() as usize, samples.len());
    assert_eq!(stacks_of(v), expected_stacks(samples));
    assert_eq!(v["sched_switches"].as_u64().unwrap() as usize, switches);
    let names: Vec<&str> = v["function_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    for s in samples {
        for f in &s.frames {
            if !f.function.is_empty() {
                assert!(names.contains(&&*f.function), "{} missing", f.function);
            }
        }
    }
    let mut pids: Vec<u64> = samples.iter().map(|s| u64::from(s.pid)).collect();
    pids.sort();
    pids.dedup();
    let got: Vec<u64> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    assert_eq!(got, pids);
}

#[test]
fn trace_decodes_with_perfettos_own_schema() {
    if !python_has(PERFETTO_IMPORT, "perfetto") {
        return;
    }
    let samples = iperf_samples();
    let events = events_of(&samples);
    let switches = switches_from(&samples).len();
    assert!(switches > 10, "the corpus implies {switches} switches");
    let (bytes, summary) = build_trace(&events);
    assert_eq!(summary.samples, samples.len());
    assert_eq!(summary.sched_switches, switches);
    let dir = scratch("trace");
    let dir = dir.path();
    let path = dir.join("t.pb");
    std::fs::write(&path, &bytes).unwrap();
    let v = decode(&path);
    check_decoded(&v, &samples, switches);
    assert_eq!(v["threads"].as_u64().unwrap() as usize, {
        let mut t: Vec<u32> = samples.iter().map(|s| s.tid).collect();
        t.sort();
        t.dedup();
        t.len()
    });
}

/// The daemon's trace, read back by ember-formats' Perfetto reader (the one `ember convert`
/// uses), gives every sample's stack and pid.
#[test]
fn trace_reads_back_with_the_perfetto_reader() {
    let samples = iperf_samples();
    let events = events_of(&samples);
    let (bytes, summary) = build_trace(&events);
    let read = ember_formats::perfetto::read_trace(&bytes).expect("reads");
    assert_eq!(read.stats.cpu_samples as usize, summary.samples);
    assert_eq!(read.stats.unresolved, 0);
    let profile = read.cpu.expect("a CPU profile");
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for (key, n) in expected_stacks(&samples) {
        let stack = key.split_once(';').map_or("", |(_, s)| s).to_owned();
        *want.entry(stack).or_insert(0) += n;
    }
    let got: BTreeMap<String, u64> = ember_pprof::folded_stacks(&profile, 0)
        .into_iter()
        .map(|(s, v)| (s, v as u64))
        .collect();
    assert_eq!(got, want);
    let key = profile
        .string_table
        .iter()
        .position(|s| s == "pid")
        .unwrap() as i64;
    let mut pids: Vec<i64> = profile
        .sample
        .iter()
        .flat_map(|s| s.label.iter().filter(|l| l.key == key).map(|l| l.num))
        .collect();
    pids.sort();
    pids.dedup();
    let mut want_pids: Vec<i64> = samples.iter().map(|s| i64::from(s.pid)).collect();
    want_pids.sort();
    want_pids.dedup();
    assert_eq!(pids, want_pids);
}

fn http_config(root: &Path, size_kb: u64, max_runs: usize) -> PerfettoDaemonConfig {
    PerfettoDaemonConfig {
        config_text: format!(
            "buffers {{ size_kb: {size_kb} fill_policy: RING_BUFFER }}\n\
             data_sources {{ config {{ name: \"linux.perf\" perf_event_config {{ timebase {{ frequency: 199 }} }} }} }}\n\
             trigger_config {{ trigger_mode: STOP_TRACING triggers {{ name: \"on-demand\" stop_delay_ms: 50 }} }}\n"
        ),
        trigger: PerfettoTrigger::Http,
        trigger_name: "on-demand".into(),
        http_listen: "127.0.0.1:0".into(),
        max_retained_runs: max_runs,
        export_to: format!("file://{}/bucket", root.display()),
        bucket_subdirectory: "traces".into(),
        node_name: Some("node-9".into()),
        local_dir: Some(root.join("runs")),
        ..Default::default()
    }
}

fn sorted_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_trigger_snapshots_upload_and_retain() {
    let have_python = python_has(PERFETTO_IMPORT, "perfetto");
    let root = scratch("http");
    let root = root.path();
    let daemon = PerfettoDaemon::new(http_config(root, 64 * 1024, 2)).unwrap();
    assert_eq!(daemon.trace_config().sampling_frequency_hz, Some(199));
    let running = daemon.start().await.unwrap();
    let addr = running.http_addr.expect("http address");
    let url = format!("http://{addr}/trigger");

    let samples = iperf_samples();
    for e in events_of(&samples) {
        daemon.push(e);
    }
    let u = url.clone();
    let body = tokio::task::spawn_blocking(move || request_snapshot(&u, Duration::from_secs(60)))
        .await
        .unwrap()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["samples"].as_u64().unwrap() as usize,
        samples.len(),
        "{body}"
    );
    assert_eq!(v["uploaded"], true, "{body}");
    let key = v["key"].as_str().unwrap().to_string();
    assert!(
        key.starts_with("traces/node-9/") && key.ends_with("-perfetto-trace.pb"),
        "{key}"
    );
    let uploaded = root.join("bucket").join(&key);
    assert!(uploaded.is_file(), "{} missing", uploaded.display());
    if have_python {
        check_decoded(&decode(&uploaded), &samples, switches_from(&samples).len());
    }

    // The ring was drained: the next snapshots are empty traces; retention
    // keeps 2 locally while the bucket gets all 3.
    for _ in 0..2 {
        let u = url.clone();
        let body =
            tokio::task::spawn_blocking(move || request_snapshot(&u, Duration::from_secs(60)))
                .await
                .unwrap()
                .unwrap();
        assert!(body.contains("\"samples\":0"), "{body}");
    }
    assert_eq!(sorted_files(&root.join("runs")).len(), 2);
    let in_bucket = sorted_files(&root.join("bucket/traces/node-9"));
    assert_eq!(in_bucket.len(), 3, "{in_bucket:?}");
    assert_eq!(sorted_files(&root.join("runs")), in_bucket[1..].to_vec());

    // A request for another trigger name is refused.
    let (status, body) = http(addr.port(), "POST", "/trigger?name=other").unwrap();
    assert_eq!(status, 404, "{body}");
    let stats = daemon.stats();
    assert_eq!((stats.snapshots, stats.uploaded), (3, 3));
    running.task.abort();
    // The listener closes when the cancelled task is dropped: wait for it.
    let _ = running.task.await;

    // Nothing listening: a clear error, not a hang.
    let e = request_snapshot(&url, Duration::from_secs(5)).unwrap_err();
    assert!(e.to_string().contains("cannot reach"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ring_keeps_only_the_newest_events_within_size_kb() {
    let root = scratch("ring");
    let root = root.path();
    // 16 KiB holds a few dozen iperf samples, far fewer than the corpus.
    let daemon = PerfettoDaemon::new(http_config(root, 16, 3)).unwrap();
    let samples = iperf_samples();
    let mut sorted = samples.clone();
    sorted.sort_by_key(|s| s.time_ns);
    for s in &sorted {
        daemon.push(Event::Sample(s.clone()));
    }
    let stats = daemon.stats();
    assert!(stats.events_overwritten > 0);
    let kept = stats.buffered_events as usize;
    assert!(kept > 0 && kept < samples.len(), "kept {kept}");
    let approx: usize = sorted[sorted.len() - kept..]
        .iter()
        .map(|s| Event::Sample(s.clone()).approx_bytes())
        .sum();
    assert!(approx <= 16 * 1024, "{approx}");
    let r = daemon.snapshot().await.unwrap();
    assert_eq!(r.summary.samples, kept);
    if python_has(PERFETTO_IMPORT, "perfetto") {
        let v = decode(&root.join("runs").join(&r.file));
        check_decoded(&v, &sorted[sorted.len() - kept..], 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_interval_trigger_writes_snapshots() {
    let root = scratch("interval");
    let root = root.path();
    let mut config = http_config(root, 1024, 5);
    config.trigger = PerfettoTrigger::TimeInterval;
    config.interval = 300;
    let daemon = PerfettoDaemon::new(config).unwrap();
    for e in events_of(&iperf_samples()) {
        daemon.push(e);
    }
    let running = daemon.start().await.unwrap();
    assert!(running.http_addr.is_none());
    let deadline = Instant::now() + Duration::from_secs(30);
    while sorted_files(&root.join("bucket/traces/node-9")).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "no snapshots from the interval trigger"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.task.abort();
    assert!(daemon.stats().snapshots >= 2);
}

#[test]
fn trigger_name_must_match_config_text() {
    let root = scratch("mismatch");
    let root = root.path();
    let mut config = http_config(root, 64, 1);
    config.trigger_name = "nightly".into();
    let e = PerfettoDaemon::new(config).unwrap_err().to_string();
    assert!(
        e.starts_with("exporters.perfetto_daemon.trigger_name:")
            && e.contains("\"nightly\"")
            && e.contains("\"on-demand\""),
        "{e}"
    );
}
