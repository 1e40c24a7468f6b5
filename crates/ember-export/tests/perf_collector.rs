//! perf_collector against a `file://` bucket with the real iperf perf-script
//! corpus: key layout, gzip'd perf-script content that `ember collapse`
//! folds to the same stacks as the original recording, local deletion, and
//! `call_graph: false`.

mod common;

use common::*;
use ember_collapse::{CollapseOptions, collapse};
use ember_export::{PerfCollector, PerfCollectorConfig};
use ember_samples::perf_script::write_samples as write_perf_script;
use std::collections::BTreeMap;

fn folded(bytes: &[u8], tid: bool) -> BTreeMap<String, u64> {
    let opts = CollapseOptions {
        include_tid: tid,
        threads: 1,
        ..Default::default()
    };
    let c = collapse(bytes, &opts).expect("collapse");
    assert!(c.warnings.is_empty(), "collapse warnings: {:?}", c.warnings);
    c.stacks.into_iter().collect()
}

fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn rewritten_script_folds_like_the_original() {
    let path = corpora().join("FlameGraph/test/perf-iperf-stacks-pidtid-01.txt");
    let original = std::fs::read(&path).unwrap();
    let samples = iperf_samples();
    let mut ours = Vec::new();
    write_perf_script(&samples, &mut ours).unwrap();
    for tid in [false, true] {
        let a = folded(&original, tid);
        let b = folded(&ours, tid);
        assert!(!a.is_empty());
        assert_eq!(a, b, "tid={tid}");
    }
    // And our own folding of the events agrees with ember collapse.
    assert_eq!(folded(&ours, false), fold(&samples, true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dumps_land_in_the_bucket_layout_and_leave_no_local_copy() {
    let root = scratch("perf-file");
    let root = root.path();
    let bucket = root.join("bucket");
    let spool = root.join("spool");
    let config = PerfCollectorConfig {
        export_to: format!("file://{}/pfx", bucket.display()),
        bucket_subdirectory: "perf/data".into(),
        node_name: Some("node-7".into()),
        local_dir: Some(spool.clone()),
        ..Default::default()
    };
    let pc = PerfCollector::new(config).unwrap();
    let samples = iperf_samples();
    let (first, second) = samples.split_at(samples.len() / 2);
    for s in first {
        pc.push(s.clone());
    }
    let r1 = pc.dump().await.unwrap();
    assert_eq!(r1.samples, first.len());
    assert_eq!(r1.upload_error, None);
    assert_eq!(r1.uploaded.len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for s in second {
        pc.push(s.clone());
    }
    let r2 = pc.dump().await.unwrap();
    assert_eq!(r2.uploaded.len(), 1);
    // An empty window writes nothing.
    let r3 = pc.dump().await.unwrap();
    assert_eq!((r3.written, r3.uploaded.len()), (None, 0));

    let files = files_under(&bucket.join("pfx"));
    assert_eq!(files.len(), 2, "{files:?}");
    let re = regex_like_layout();
    for f in &files {
        assert!(re(f), "bad key {f}");
    }
    assert_eq!(
        files[0],
        format!("perf/data/node-7/{}", r1.written.unwrap())
    );
    assert!(files_under(&spool).is_empty(), "spool not emptied");

    // Each dump is gzip'd perf script of its own window.
    for (f, part) in files.iter().zip([first, second]) {
        let gz = std::fs::read(bucket.join("pfx").join(f)).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b], "gzip magic");
        assert_eq!(folded(&gz, false), fold(part, true));
    }
    let stats = pc.stats();
    assert_eq!(
        (stats.dumps_written, stats.dumps_uploaded, stats.pending),
        (2, 2, 0)
    );
}

/// `perf/data/node-7/YYYYMMDDTHHMMSS-perf-data.gz`.
fn regex_like_layout() -> impl Fn(&str) -> bool {
    |key: &str| {
        let Some(name) = key.strip_prefix("perf/data/node-7/") else {
            return false;
        };
        let Some(ts) = name.strip_suffix("-perf-data.gz") else {
            return false;
        };
        ts.len() == 15
            && ts.as_bytes()[8] == b'T'
            && ts
                .bytes()
                .enumerate()
                .all(|(i, b)| i == 8 || b.is_ascii_digit())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_graph_false_keeps_only_the_leaf() {
    let root = scratch("perf-leaf");
    let root = root.path();
    let config = PerfCollectorConfig {
        export_to: format!("file://{}/b", root.display()),
        node_name: Some("n".into()),
        local_dir: Some(root.join("spool")),
        call_graph: false,
        ..Default::default()
    };
    let pc = PerfCollector::new(config).unwrap();
    let samples = iperf_samples();
    for s in &samples {
        pc.push(s.clone());
    }
    let r = pc.dump().await.unwrap();
    let name = r.written.unwrap();
    let gz = std::fs::read(root.join("b/n").join(&name)).unwrap();
    let got = folded(&gz, false);
    let mut want = BTreeMap::new();
    for s in &samples {
        let leaf = s.frames.first().map_or(String::new(), collapse_name);
        let key = if s.frames.is_empty() {
            s.comm.to_string()
        } else {
            format!("{};{leaf}", s.comm)
        };
        *want.entry(key).or_insert(0u64) += 1;
    }
    assert_eq!(got, want);
}

#[test]
fn invalid_config_is_refused_with_its_path() {
    let e = PerfCollector::new(PerfCollectorConfig {
        export_to: "ftp://nope".into(),
        ..Default::default()
    })
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("exporters.perf_collector.export_to:"),
        "{e}"
    );
}
