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
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).expect("open store");
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
}

/// A diff's flame graph cut at the node limit keeps the heaviest frames of both sides and
/// sums the rest, side by side, into `other`: both totals stay whole.
#[test]
fn diff_tree_truncation_keeps_the_heaviest_and_sums_the_rest_per_side() {
    let stack = |s: &str, v: i64| (s.split(';').map(str::to_string).collect::<Vec<_>>(), v);
    // 50 light leaves under `main;light`, one heavy leaf that only the comparison has.
    let mut left: Vec<(Vec<String>, i64)> = (0..50)
        .map(|i| stack(&format!("main;light;f{i:02}"), 2))
        .collect();
    let mut right = left.clone();
    left.push(stack("main;hot", 10));
    right.push(stack("main;hot", 10));
    right.push(stack("main;hot;regress", 500));
    let full = ember_query::DiffTree::new(&left, &right);
    assert_eq!(full.nodes.len(), 1 + 1 + 1 + 1 + 1 + 50);
    let cut = full.truncate(5);
    let names = |t: &ember_query::DiffTree| -> Vec<String> {
        t.nodes
            .iter()
            .map(|n| t.names[n.name as usize].clone())
            .collect()
    };
    let got = names(&cut);
    for want in ["main", "hot", "regress", "light", "f00", "other"] {
        assert!(got.contains(&want.to_string()), "{want} in {got:?}");
    }
    // The root, five kept nodes and one `other` (of the 49 leaves cut under `light`).
    assert_eq!(cut.nodes.len(), 7, "{got:?}");
    assert_eq!((cut.left_total(), cut.right_total()), (110, 610));
    let other = &cut.nodes[got.iter().position(|n| n == "other").unwrap()];
    assert_eq!((other.left, other.right), ((98, 98), (98, 98)));
    // Its levels still add up: each level's widths sum to at most the root's, per side.
    let (levels, _) = cut.levels();
    for row in &levels {
        let (l, r) = row.chunks(7).fold((0, 0), |(l, r), n| (l + n[1], r + n[4]));
        assert!(l <= 110 && r <= 610, "{row:?}");
    }
    assert_eq!(full.truncate(0).nodes.len(), full.nodes.len());
}
