//! The call tree built straight from a merged selection's frames equals the one built from
//! its stacks as strings, whole and truncated, on real profiles of several languages.

use std::path::{Path, PathBuf};

use ember_query::Tree;
use ember_store::{IngestBatch, IngestProfile, Query, Store, StoreOptions};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

/// Every node of `t` as `(path of names from the root, total, self)`, sorted.
fn flat(t: &Tree) -> Vec<(Vec<String>, i64, i64)> {
    let mut out = Vec::new();
    let mut stack = vec![(0u32, Vec::<String>::new())];
    while let Some((id, path)) = stack.pop() {
        let n = &t.nodes[id as usize];
        for &c in &n.children {
            let mut p = path.clone();
            p.push(t.names[t.nodes[c as usize].name as usize].clone());
            stack.push((c, p));
        }
        out.push((path, n.total, n.self_value));
    }
    out.sort();
    out
}

#[test]
fn tree_from_frames_equals_tree_from_stacks() {
    let dir = std::env::temp_dir().join(format!("ember-query-tree-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, StoreOptions::default()).expect("open store");
    let files = [
        "pyroscope/pkg/pprof/testdata/gotruncatefix/cpu_go_truncated_1.pb.gz",
        "pyroscope/pkg/pprof/testdata/dotnet.labels.pprof",
        "pyroscope/pkg/og/convert/jfr/testdata/cortex-dev-01__kafka-0__cpu__0.jfr.gz.process_cpu_cpu_nanoseconds_cpu_nanoseconds.17241709254077376921.pb.gz",
        "pyroscope/pkg/og/convert/pprof/testdata/cpu-js.pb.gz",
    ];
    for (i, f) in files.iter().enumerate() {
        let pprof = std::fs::read(corpus(f)).expect("read corpus profile");
        let batch = IngestBatch {
            profiles: vec![IngestProfile {
                labels: vec![("service_name".into(), format!("svc{i}"))],
                time_nanos: 1_700_000_000_000_000_000 + i as i64,
                pprof,
                what: (*f).into(),
            }],
        };
        store.ingest("t", batch).expect("ingest");
    }
    let mut checked = 0;
    for labels in store.series("t", None) {
        let selector = ember_store::Selector {
            name: None,
            matchers: labels
                .iter()
                .map(|(n, v)| ember_store::Matcher::eq(n, v))
                .collect(),
        };
        let q = Query {
            selector,
            profile_type: None,
            start_nanos: 0,
            end_nanos: i64::MAX,
        };
        let merged = store.merge_stacks("t", &q);
        if merged.is_empty() {
            // A sample type with no value in the profile (the .NET one's exceptions).
            continue;
        }
        let by_frames = Tree::from_merged(&merged);
        let by_stacks = Tree::from_stacks(&merged.stacks());
        assert_eq!(flat(&by_frames), flat(&by_stacks), "{labels:?}");
        assert_eq!(by_frames.nodes[0].total, merged.total);
        // The pprof made from the frames folds back to the same stacks.
        let pprof = ember_query::pprof_profile(&merged);
        let mut folded = ember_pprof::folded_stacks(&pprof, 0);
        folded.sort();
        let mut stacks: Vec<(String, i64)> = merged
            .stacks()
            .into_iter()
            .map(|(f, v)| (f.join(";"), v))
            .collect();
        stacks.sort();
        assert!(folded == stacks, "{labels:?}: the pprof does not fold back");
        for limit in [1, 2, 16, 100, 1024, 100_000] {
            let expected = flat(&by_stacks.truncate(limit));
            assert_eq!(
                flat(&by_frames.truncate(limit)),
                expected,
                "{labels:?} {limit}"
            );
            assert_eq!(
                flat(&Tree::from_merged_cut(&merged, limit)),
                expected,
                "{labels:?} limit {limit} (cut on the frames)"
            );
        }
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} series");
    let _ = std::fs::remove_dir_all(&dir);
}
