//! A node-limited merge (`Store::merge_stacks_heavy`, which leaves light frames out) cut to
//! `max_nodes` gives the very tree the full merge gives cut the same way: same kept frames,
//! totals, self values and `other` children, same profile and series counts. Seeded stores
//! with many distinct stacks (a deploy renames functions now and then, as in a real fleet),
//! several services and pods, spread over blocks, compacted blocks and the open head; cut
//! at limits from 1 node to more than the tree holds, on ties (values are multiples of
//! 10 ms) and on narrow and wide ranges.

use ember_query::Tree;
use ember_store::{IngestBatch, IngestProfile, Query, Store, StoreOptions, parse_selector};

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const FUNCS: [&str; 14] = [
    "http.serve",
    "handler",
    "db.query",
    "parse",
    "json.Unmarshal",
    "gc",
    "alloc",
    "write",
    "read",
    "hash",
    "compress",
    "sort",
    "tls.read",
    "render",
];

/// A CPU profile of random stacks; `deploy` renames a share of the functions.
fn profile(rng: &mut Rng, deploy: u64) -> Vec<u8> {
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    for _ in 0..1 + rng.below(25) {
        let depth = 1 + rng.below(9) as usize;
        let frames: Vec<String> = (0..depth)
            .map(|i| {
                if i == 0 {
                    return "main".to_string();
                }
                let f = rng.below(FUNCS.len() as u64);
                if f.is_multiple_of(3) {
                    format!("{}.v{deploy}", FUNCS[f as usize])
                } else {
                    FUNCS[f as usize].to_string()
                }
            })
            .collect();
        let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
        b.add_folded_stack(&frames, &[(1 + rng.below(30) as i64) * 10_000_000]);
    }
    ember_pprof::encode(&b.build())
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-heavy-{name}-"))
        .tempdir()
        .expect("temp dir")
}

fn query(selector: &str, start: i64, end: i64) -> Query {
    Query {
        selector: parse_selector(selector).unwrap(),
        profile_type: Some("cpu".into()),
        start_nanos: start,
        end_nanos: end,
    }
}

/// The tree as text: each node's path, total and self value, children in their order.
fn shape(tree: &Tree) -> String {
    fn walk(tree: &Tree, node: u32, path: &str, out: &mut String) {
        let n = &tree.nodes[node as usize];
        let path = format!("{path};{}", tree.names[n.name as usize]);
        out.push_str(&format!("{path} {} {}\n", n.total, n.self_value));
        for c in &n.children {
            walk(tree, *c, &path, out);
        }
    }
    let mut out = String::new();
    walk(tree, 0, "", &mut out);
    out
}

#[test]
fn heavy_merges_cut_like_full_merges() {
    let mut compared = 0;
    for seed in 1..=6u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let dir = temp_dir(&format!("s{seed}"));
        let dir = dir.path();
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        let n = 150;
        for i in 0..n {
            let service = ["api", "db", "web"][rng.below(3) as usize];
            let pod = format!("p{}", rng.below(4));
            let batch = IngestBatch {
                profiles: vec![IngestProfile {
                    labels: vec![("service_name".into(), service.into()), ("pod".into(), pod)],
                    time_nanos: 1_000 + i as i64 * 1_000,
                    pprof: profile(&mut rng, i / 40),
                    what: "profile".into(),
                }],
            };
            store.ingest("t", batch).unwrap();
            match rng.below(25) {
                0 => {
                    store.flush().unwrap();
                }
                1 => {
                    store.flush().unwrap();
                    store.compact().unwrap();
                }
                _ => {}
            }
        }
        let end = 1_000 + n as i64 * 1_000;
        let queries = [
            query("{}", 0, i64::MAX),
            query("{service_name=\"api\"}", 0, end),
            query("{service_name=\"db\", pod=~\"p[01]\"}", 20_000, 120_000),
            query("{pod=\"p2\"}", 55_000, 56_000),
            query("{service_name=\"none\"}", 0, end),
        ];
        // Again with no cache: rollups are let go between the passes and read again.
        store.close();
        drop(store);
        let no_cache = StoreOptions {
            cache_bytes: 0,
            ..StoreOptions::default()
        };
        // A small cache: some rollups are kept packed between the passes, the rest read again.
        let small_cache = StoreOptions {
            cache_bytes: 24 << 10,
            ..StoreOptions::default()
        };
        // One at a time: a data directory is opened by one store at once.
        for options in [StoreOptions::default(), no_cache, small_cache] {
            let store = Store::open(dir, options).unwrap();
            for q in &queries {
                let full = store.merge_stacks("t", q);
                for max_nodes in [1, 2, 3, 7, 20, 64, 300, 5_000] {
                    let heavy = store.merge_stacks_heavy("t", q, max_nodes);
                    let want = Tree::from_merged(&full).truncate(max_nodes);
                    let got = Tree::from_merged_cut(&heavy, max_nodes);
                    assert_eq!(
                        shape(&got),
                        shape(&want),
                        "seed {seed}, {q:?}, {max_nodes} nodes"
                    );
                    assert_eq!(
                        (
                            heavy.total,
                            heavy.profiles,
                            heavy.series,
                            &heavy.profile_types
                        ),
                        (full.total, full.profiles, full.series, &full.profile_types),
                        "seed {seed}, {q:?}, {max_nodes} nodes"
                    );
                    assert!(heavy.frames.len() <= full.frames.len());
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(compared, 6 * 3 * 5 * 8);
}

/// Negative values (a diff written as a profile) break the bound the candidates rest on:
/// the merge then takes every frame, and still cuts like the full merge.
#[test]
fn negative_values_fall_back_to_the_full_merge() {
    let dir = temp_dir("negative");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    let stacks: [(&[&str], i64); 4] = [
        (&["main", "a", "b"], 50),
        (&["main", "a", "c"], -30),
        (&["main", "d"], 20),
        (&["main", "d", "e"], -45),
    ];
    for (i, (frames, value)) in stacks.iter().enumerate() {
        let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        b.add_folded_stack(frames, &[*value]);
        b.add_folded_stack(&["main", "f"], &[5]);
        let batch = IngestBatch {
            profiles: vec![IngestProfile {
                labels: vec![("service_name".into(), "api".into())],
                time_nanos: 1_000 * (i as i64 + 1),
                pprof: ember_pprof::encode(&b.build()),
                what: "profile".into(),
            }],
        };
        store.ingest("t", batch).unwrap();
        store.flush().unwrap();
    }
    let q = query("{}", 0, i64::MAX);
    let full = store.merge_stacks("t", &q);
    assert!(
        full.self_values.iter().any(|v| *v < 0),
        "negative values kept"
    );
    for max_nodes in [1, 2, 3, 5] {
        let heavy = store.merge_stacks_heavy("t", &q, max_nodes);
        assert!(heavy.rest.is_empty(), "{max_nodes} nodes: a full merge");
        let want = Tree::from_merged(&full).truncate(max_nodes);
        let got = Tree::from_merged_cut(&heavy, max_nodes);
        assert_eq!(shape(&got), shape(&want), "{max_nodes} nodes");
    }
    drop(store);
}
