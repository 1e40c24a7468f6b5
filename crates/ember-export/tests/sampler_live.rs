//! End to end with the real sampler: a compiled C program with three known
//! call paths is sampled by an `ember_sampler::Session` with raw events;
//! `ember_samples::timeline::timeline` feeds both exporters; the perf_collector dump
//! folds (through `ember collapse`) to the program's functions and the
//! Perfetto snapshot decodes with Perfetto's own schema to the same number
//! of samples. Needs perf_event_open (root in CI) and gcc, like the
//! sampler's own tests.

mod common;
#[path = "../../ember-sampler/tests/programs/mod.rs"]
mod programs;

use common::*;
use ember_collapse::{CollapseOptions, collapse};
use ember_export::{
    Event, PerfCollector, PerfCollectorConfig, PerfettoDaemon, PerfettoDaemonConfig,
};
use ember_sampler::{CallGraph, Options, Session, Status, Target};
use ember_samples::Symbolizer;
use ember_samples::timeline::timeline as events_from_recording;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_session_feeds_both_exporters() {
    let root = scratch("live");
    let root = root.path();
    let bin = root.join("three_paths");
    programs::compile_to("three_paths", &programs::FRAME_POINTERS, &bin);

    let mut opts = Options::new(Target::Command(vec![
        bin.clone().into_os_string(),
        "40".into(),
    ]));
    opts.call_graph = CallGraph::Fp;
    opts.frequency = 499;
    opts.raw_events = true;
    opts.off_cpu = true;
    let session = match Session::start(&opts) {
        Ok(s) => Some(s),
        Err(e) => {
            // Off-CPU needs the sched tracepoint or context-switch events;
            // retry on-CPU only before concluding perf is unavailable.
            opts.off_cpu = false;
            match Session::start(&opts) {
                Ok(s) => Some(s),
                Err(e2) if std::env::var_os("CI").is_none() => {
                    eprintln!("SKIPPED: perf_event_open unavailable here: {e}; {e2}");
                    None
                }
                Err(e2) => panic!("perf_event_open must work in CI: {e}; {e2}"),
            }
        }
    };
    let Some(mut session) = session else { return };
    let mut cuts = Vec::new();
    loop {
        let st = session.poll(Duration::from_millis(100));
        if st != Status::Running {
            break;
        }
        if session.elapsed() > Duration::from_secs(1) && cuts.is_empty() {
            cuts.push(session.cut());
        }
        assert!(
            session.elapsed() < Duration::from_secs(60),
            "program did not end"
        );
    }
    cuts.push(session.finish());

    let mut sym = Symbolizer::new();
    let mut events = Vec::new();
    let mut samples_total = 0;
    for rec in &cuts {
        samples_total += rec.samples as usize;
        events.extend(events_from_recording(rec, &mut sym));
    }
    let samples: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Sample(s) => Some(s.clone()),
            Event::Switch(_) => None,
        })
        .collect();
    assert_eq!(samples.len(), samples_total, "one event per sample");
    assert!(samples.len() > 50, "only {} samples", samples.len());

    // perf_collector: the dump folds to the program's call paths.
    let pc = PerfCollector::new(PerfCollectorConfig {
        export_to: format!("file://{}/bucket", root.display()),
        node_name: Some("live".into()),
        local_dir: Some(root.join("spool")),
        ..Default::default()
    })
    .unwrap();
    for s in &samples {
        pc.push(s.clone());
    }
    let r = pc.dump().await.unwrap();
    let gz = std::fs::read(root.join("bucket/live").join(r.written.unwrap())).unwrap();
    let folded = collapse(
        &gz[..],
        &CollapseOptions {
            threads: 1,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(folded.warnings.is_empty(), "{:?}", folded.warnings);
    let total: u64 = folded.stacks.iter().map(|s| s.1).sum();
    assert_eq!(total as usize, samples.len());
    for f in ["main;path_a;burn", "main;path_b;burn", "main;path_c;burn"] {
        assert!(
            folded.stacks.iter().any(|(k, _)| k.contains(f)),
            "{f} not in the folded dump"
        );
    }

    // perfetto_daemon: the snapshot holds every sample, decodable by Perfetto.
    let pd = PerfettoDaemon::new(PerfettoDaemonConfig {
        export_to: format!("file://{}/bucket", root.display()),
        node_name: Some("live".into()),
        local_dir: Some(root.join("runs")),
        ..Default::default()
    })
    .unwrap();
    let switches = events
        .iter()
        .filter(|e| matches!(e, Event::Switch(_)))
        .count();
    for e in events {
        pd.push(e);
    }
    let snap = pd.snapshot().await.unwrap();
    assert_eq!(snap.summary.samples, samples.len());
    assert_eq!(snap.summary.sched_switches, switches);
    if python_has(
        "from perfetto.protos.perfetto.trace import perfetto_trace_pb2",
        "perfetto",
    ) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/decode_perfetto.py");
        let out = Command::new("python3")
            .arg(script)
            .arg(root.join("runs").join(&snap.file))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["samples"].as_u64().unwrap() as usize, samples.len());
        assert_eq!(v["sched_switches"].as_u64().unwrap() as usize, switches);
        assert_eq!(v["errors"].as_array().unwrap().len(), 0);
        let names: Vec<&str> = v["function_names"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str())
            .collect();
        for f in ["path_a", "path_b", "path_c", "burn", "main"] {
            assert!(names.contains(&f), "{f} not interned: {names:?}");
        }
    }
}
