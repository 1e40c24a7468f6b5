//! The call graph of stored selections against two independent computations: the corpus
//! profiles' own folded stacks summed here (each stack once per function and per caller →
//! callee pair, as pprof counts them), and `go tool pprof -top -cum` on the same files (every
//! function's flat and cum, and the set of functions the default node fraction keeps).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use ember_query::{CallGraph, CallGraphOptions, Querier, QueryRequest};
use ember_store::{IngestBatch, IngestProfile, Matcher, Selector, Store, StoreOptions};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

/// `(file, sample type)` of the corpus profiles checked.
const FILES: [(&str, &str); 4] = [
    ("pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof", "cpu"),
    ("pyroscope/pkg/pprof/testdata/profile_java", "cpu"),
    ("pyroscope/pkg/pprof/testdata/profile_python", "samples"),
    (
        "pyroscope/pkg/og/convert/pprof/testdata/cpu-js.pb.gz",
        "wall",
    ),
];

const ALL: CallGraphOptions = CallGraphOptions {
    node_fraction: 0.0,
    edge_fraction: 0.0,
    max_nodes: 0,
};

fn store(name: &str) -> (tempfile::TempDir, Store) {
    // Removed with its content when the caller drops the guard returned.
    let dir = tempfile::Builder::new()
        .prefix(&format!("ember-callgraph-{name}-"))
        .tempdir()
        .expect("temp dir");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open store");
    for (i, (f, _)) in FILES.iter().enumerate() {
        let batch = IngestBatch {
            profiles: vec![IngestProfile {
                labels: vec![("service_name".into(), format!("svc{i}"))],
                time_nanos: 1_700_000_000_000_000_000 + i as i64,
                pprof: std::fs::read(corpus(f)).expect("read corpus profile"),
                what: (*f).into(),
            }],
        };
        store.ingest("t", batch).expect("ingest");
    }
    (dir, store)
}

fn request(service: usize, sample_type: &str) -> QueryRequest {
    let selector = Selector {
        name: None,
        matchers: vec![Matcher::eq("service_name", &format!("svc{service}"))],
    };
    QueryRequest::new(selector, Some(sample_type.into()), 0, i64::MAX)
}

/// The folded stacks of the source file, as the store names frames.
fn stacks(file: &str, sample_type: &str) -> Vec<(Vec<String>, i64)> {
    let p = ember_pprof::read_file(&corpus(file)).unwrap();
    let i = ember_pprof::sample_index(&p, Some(sample_type)).unwrap();
    ember_pprof::folded_stacks(&p, i)
        .into_iter()
        .map(|(s, v)| (s.split(';').map(str::to_string).collect(), v))
        .collect()
}

/// What the graph must hold, summed stack by stack: per function `(self, total)`, per
/// `(caller, callee)` `(weight, residual)`, keeping only the functions `kept` says (all when
/// `None`): a stack's frames of dropped functions are left out and the kept ones around them
/// joined by a residual edge.
type Expected = (
    BTreeMap<String, (i64, i64)>,
    BTreeMap<(String, String), (i64, bool)>,
);

fn independent(stacks: &[(Vec<String>, i64)], kept: Option<&BTreeSet<String>>) -> Expected {
    let mut nodes: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let mut edges: BTreeMap<(String, String), (i64, bool)> = BTreeMap::new();
    for (frames, v) in stacks {
        let seen: BTreeSet<&String> = frames.iter().collect();
        for f in seen {
            nodes.entry(f.clone()).or_default().1 += v;
        }
        nodes.entry(frames.last().unwrap().clone()).or_default().0 += v;
        // The kept frames with, for each, whether dropped frames came just before it.
        let mut path: Vec<(&String, bool)> = Vec::new();
        let mut gap = false;
        for f in frames {
            if kept.is_none_or(|k| k.contains(f)) {
                path.push((f, gap));
                gap = false;
            } else {
                gap = !path.is_empty();
            }
        }
        let mut pairs: HashMap<(&String, &String), bool> = HashMap::new();
        for w in path.windows(2) {
            if w[0].0 != w[1].0 {
                *pairs.entry((w[0].0, w[1].0)).or_default() |= w[1].1;
            }
        }
        for ((a, b), residual) in pairs {
            let e = edges.entry((a.clone(), b.clone())).or_default();
            e.0 += v;
            e.1 |= residual;
        }
    }
    if let Some(k) = kept {
        nodes.retain(|n, _| k.contains(n));
    }
    (nodes, edges)
}

fn as_maps(g: &CallGraph) -> Expected {
    let nodes = g
        .nodes
        .iter()
        .map(|n| (n.name.clone(), (n.self_value, n.total)))
        .collect();
    let name = |i: u32| g.nodes[i as usize].name.clone();
    let edges = g
        .edges
        .iter()
        .map(|e| ((name(e.from), name(e.to)), (e.weight, e.residual)))
        .collect();
    (nodes, edges)
}

#[test]
fn whole_graphs_equal_the_stacks_summed_once_per_stack() {
    let (_dir, store) = store("whole");
    let q = Querier::new(&store);
    for (i, (file, st)) in FILES.iter().enumerate() {
        let g = q.call_graph("t", &request(i, st), &ALL).unwrap();
        let source = stacks(file, st);
        let want = independent(&source, None);
        assert_eq!(g.total, source.iter().map(|s| s.1).sum::<i64>(), "{file}");
        assert_eq!(as_maps(&g), want, "{file}");
        assert_eq!(g.dropped_nodes + g.dropped_edges, 0, "{file}");
        // Heaviest first.
        assert!(
            g.nodes.windows(2).all(|w| w[0].total >= w[1].total),
            "{file}"
        );
    }
}

#[test]
fn pruned_graphs_join_kept_functions_through_dropped_ones() {
    let (_dir, store) = store("pruned");
    let q = Querier::new(&store);
    for (i, (file, st)) in FILES.iter().enumerate() {
        let options = CallGraphOptions {
            max_nodes: 12,
            ..CallGraphOptions::default()
        };
        let g = q.call_graph("t", &request(i, st), &options).unwrap();
        let source = stacks(file, st);
        let (all, _) = independent(&source, None);
        // The kept functions are the 12 heaviest by total over the cut-off.
        let mut order: Vec<(&String, i64)> = all.iter().map(|(n, v)| (n, v.1)).collect();
        order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let total: i64 = source.iter().map(|s| s.1).sum();
        let cutoff = (total as f64 * 0.005) as i64;
        let kept: BTreeSet<String> = order
            .iter()
            .filter(|(_, t)| *t >= cutoff)
            .take(12)
            .map(|(n, _)| (*n).clone())
            .collect();
        let (nodes, mut edges) = independent(&source, Some(&kept));
        let edge_cut = (total as f64 * 0.001) as i64;
        let light = edges.values().filter(|e| e.0 < edge_cut).count();
        edges.retain(|_, e| e.0 >= edge_cut);
        assert_eq!(as_maps(&g), (nodes, edges), "{file}");
        assert_eq!(g.dropped_nodes, all.len() - kept.len(), "{file}");
        assert_eq!(g.dropped_edges, light, "{file}");
    }
}

#[test]
fn a_focused_graph_is_the_graph_of_the_stacks_through_the_path() {
    let (_dir, store) = store("focus");
    let q = Querier::new(&store);
    let (file, st) = FILES[1];
    let source = stacks(file, st);
    // The path to the heaviest child of the heaviest root.
    let mut roots: BTreeMap<&String, i64> = BTreeMap::new();
    for (f, v) in &source {
        *roots.entry(&f[0]).or_default() += v;
    }
    let root = roots.iter().max_by_key(|(_, v)| **v).unwrap().0.to_string();
    let mut second: BTreeMap<&String, i64> = BTreeMap::new();
    for (f, v) in source.iter().filter(|(f, _)| f[0] == root && f.len() > 1) {
        *second.entry(&f[1]).or_default() += v;
    }
    let child = second
        .iter()
        .max_by_key(|(_, v)| **v)
        .unwrap()
        .0
        .to_string();
    let path = vec![root, child];
    let mut req = request(1, st);
    req.focus = path.clone();
    let g = q.call_graph("t", &req, &ALL).unwrap();
    let through: Vec<(Vec<String>, i64)> = source
        .into_iter()
        .filter(|(f, _)| f.starts_with(&path))
        .collect();
    assert!(!through.is_empty() && through.len() < stacks(file, st).len());
    assert_eq!(as_maps(&g), independent(&through, None));
}

fn find_go() -> Option<PathBuf> {
    [
        std::env::var_os("EMBER_GO").map(PathBuf::from),
        Some(PathBuf::from("/usr/lib/go-1.19/bin/go")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file())
}

/// `go tool pprof -top -cum` of `file` in nanoseconds: `(flat, cum)` per function, and the
/// "Showing nodes accounting for" figure.
fn go_top(go: &Path, file: &Path, args: &[&str]) -> (BTreeMap<String, (i64, i64)>, i64) {
    let out = Command::new(go)
        .args([
            "tool",
            "pprof",
            "-top",
            "-cum",
            "-symbolize=none",
            "-unit=ns",
        ])
        .args(["-sample_index=cpu"])
        .args(args)
        .arg(file)
        .env("TZ", "UTC")
        .env("PPROF_TMPDIR", std::env::temp_dir())
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let ns = |s: &str| -> i64 { s.trim_end_matches("ns").parse().unwrap() };
    let mut rows = BTreeMap::new();
    let mut shown = 0;
    let mut table = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Showing nodes accounting for ") {
            shown = ns(rest.split(',').next().unwrap());
        } else if line.trim_start().starts_with("flat") {
            table = true;
        } else if table {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // Go marks inlined calls after the name; the graph's names are the functions'.
            let name = cols[5..]
                .join(" ")
                .trim_end_matches(" (inline)")
                .trim_end_matches(" (partial-inline)")
                .to_string();
            rows.insert(name, (ns(cols[0]), ns(cols[3])));
        }
    }
    (rows, shown)
}

#[test]
fn node_figures_equal_go_tool_pprof() {
    let Some(go) = find_go() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "go is required in CI: run .ci/setup"
        );
        eprintln!(
            "\n!!!!!!!! SKIPPING node_figures_equal_go_tool_pprof: Go 1.19 not found !!!!!!!!\n"
        );
        return;
    };
    let (_dir, store) = store("go");
    let q = Querier::new(&store);
    let (file, st) = FILES[0];
    let whole = q.call_graph("t", &request(0, st), &ALL).unwrap();
    let (rows, _) = go_top(&go, &corpus(file), &["-nodefraction=0", "-nodecount=0"]);
    assert_eq!(as_maps(&whole).0, rows);
    // pprof's default node fraction keeps the same functions and shows the same self.
    let pruned = q
        .call_graph(
            "t",
            &request(0, st),
            &CallGraphOptions {
                max_nodes: 0,
                ..CallGraphOptions::default()
            },
        )
        .unwrap();
    let (rows, shown) = go_top(&go, &corpus(file), &["-nodecount=0"]);
    assert_eq!(as_maps(&pruned).0, rows);
    assert_eq!(pruned.shown_self(), shown);
    assert!(
        pruned.dropped_nodes > 0,
        "the default fraction drops something"
    );
}
