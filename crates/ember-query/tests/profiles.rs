//! Single profiles: the listing of a selection's profiles holds exactly the profiles pushed
//! (times, series, totals of the source files), newest first and bounded, from the head and
//! from blocks alike; and reading one back gives exactly that profile's stacks, even beside a
//! series with the same labels and more at the same instant.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ember_query::{Format, Output, Querier, QueryRequest, parse_series, selector_text};
use ember_store::{IngestBatch, IngestProfile, Labels, Store, StoreOptions, parse_selector};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

const FILES: [&str; 3] = [
    "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
    "pyroscope/pkg/pprof/testdata/profile_java",
    "pyroscope/pkg/pprof/testdata/profile_rust",
];
const T0: i64 = 1_700_000_000_000_000_000;
const SECOND: i64 = 1_000_000_000;

/// The cpu stacks of a corpus file as the store names frames.
fn cpu_stacks(file: &str) -> BTreeMap<String, i64> {
    let p = ember_pprof::read_file(&corpus(file)).unwrap();
    let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
    ember_pprof::folded_stacks(&p, i).into_iter().collect()
}

/// What was pushed: `(series labels given, time, file)`.
fn pushes() -> Vec<(Labels, i64, &'static str)> {
    let labels = |pairs: &[(&str, &str)]| -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let mut out = Vec::new();
    for k in 0..9 {
        let pod = ["a", "b"][k % 2];
        out.push((
            labels(&[("service_name", "shop"), ("pod", pod)]),
            T0 + k as i64 * 10 * SECOND,
            FILES[k % 3],
        ));
    }
    // A series with the labels of `pod="a"`'s minus one, at the same instant as one of its
    // profiles: reading either back must not mix them.
    out.push((labels(&[("service_name", "shop")]), T0, FILES[1]));
    out
}

fn open(name: &str) -> (tempfile::TempDir, Store) {
    // Removed with its content when the caller drops the guard returned.
    let dir = tempfile::Builder::new()
        .prefix(&format!("ember-profiles-{name}-"))
        .tempdir()
        .expect("temp dir");
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    (dir, store)
}

fn ingest(store: &Store, pushes: &[(Labels, i64, &str)]) {
    for (labels, time, file) in pushes {
        let batch = IngestBatch {
            profiles: vec![IngestProfile {
                labels: labels.clone(),
                time_nanos: *time,
                pprof: std::fs::read(corpus(file)).unwrap(),
                what: (*file).into(),
            }],
        };
        store.ingest("t", batch).unwrap();
    }
}

fn cpu(selector: &str, start: i64, end: i64) -> QueryRequest {
    let mut req = QueryRequest::new(parse_selector(selector).unwrap(), None, start, end);
    req.profile_type = Some("cpu".into());
    req
}

/// The listed profiles as `(labels without the `__…__` ones, time, total)`, newest first.
fn listed(q: &Querier<'_>, req: &QueryRequest, limit: usize) -> (Vec<(Labels, i64, i64)>, usize) {
    let list = q.profiles("t", req, limit).unwrap();
    let rows = list
        .profiles
        .iter()
        .map(|p| {
            let own: Labels = p
                .labels
                .iter()
                .filter(|(k, _)| !k.starts_with("__"))
                .cloned()
                .collect();
            assert_eq!(p.count, 1);
            (own, p.time_nanos, p.total)
        })
        .collect();
    (rows, list.matched)
}

/// The expected listing: every push, newest first (ties: by labels), totals from the files.
fn expected(pushes: &[(Labels, i64, &str)]) -> Vec<(Labels, i64, i64)> {
    let mut rows: Vec<(Labels, i64, i64)> = pushes
        .iter()
        .map(|(l, t, f)| {
            let mut l = l.clone();
            l.sort();
            (l, *t, cpu_stacks(f).values().sum())
        })
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    rows
}

/// Checks the listing and every single profile of `store` against the pushes.
fn check(store: &Store, pushes: &[(Labels, i64, &str)]) {
    let q = Querier::new(store);
    let all = cpu("{}", T0, T0 + 3600 * SECOND);
    let want = expected(pushes);
    assert_eq!(listed(&q, &all, 100), (want.clone(), want.len()));
    // Bounded: the 3 newest, and the count of all.
    assert_eq!(listed(&q, &all, 3), (want[..3].to_vec(), want.len()));
    // A narrower range and selector.
    let narrow = cpu("{pod=\"b\"}", T0 + 15 * SECOND, T0 + 55 * SECOND);
    let b: Vec<_> = want
        .iter()
        .filter(|r| r.0.iter().any(|(k, v)| k == "pod" && v == "b"))
        .filter(|r| r.1 >= T0 + 15 * SECOND && r.1 <= T0 + 55 * SECOND)
        .cloned()
        .collect();
    assert_eq!(listed(&q, &narrow, 100), (b.clone(), b.len()));
    // Every listed profile reads back as exactly its source file's stacks.
    let list = q.profiles("t", &all, 100).unwrap();
    for p in &list.profiles {
        let series = parse_series(&selector_text(&p.labels)).unwrap();
        let req = q.profile_request("t", &series, p.time_nanos).unwrap();
        let Output::Bytes { body, .. } = q.render("t", &req, Format::Folded, "").unwrap() else {
            panic!("folded is text")
        };
        let got: BTreeMap<String, i64> = String::from_utf8(body)
            .unwrap()
            .lines()
            .map(|l| {
                let (s, v) = l.rsplit_once(' ').unwrap();
                (s.to_string(), v.parse().unwrap())
            })
            .collect();
        let own: Labels = p
            .labels
            .iter()
            .filter(|(k, _)| !k.starts_with("__"))
            .cloned()
            .collect();
        let (_, _, file) = pushes
            .iter()
            .find(|(l, t, _)| {
                let mut l = l.clone();
                l.sort();
                *t == p.time_nanos && l == own
            })
            .unwrap();
        assert_eq!(got, cpu_stacks(file), "{:?} at {}", p.labels, p.time_nanos);
        assert_eq!(got.values().sum::<i64>(), p.total);
    }
    // A time without a profile is not found.
    let first = &list.profiles[0];
    assert!(
        q.profile_request("t", &first.labels, first.time_nanos + 1)
            .is_err()
    );
}

#[test]
fn listed_profiles_are_exactly_those_pushed_and_each_reads_back_whole() {
    let (_dir, store) = open("head");
    let pushes = pushes();
    ingest(&store, &pushes);
    check(&store, &pushes);
}

#[test]
fn profiles_in_blocks_list_and_read_back_the_same() {
    let (dir, store) = open("blocks");
    let pushes = pushes();
    // Half in a block, half in the head; then everything in blocks after a restart.
    ingest(&store, &pushes[..5]);
    store.flush().unwrap();
    ingest(&store, &pushes[5..]);
    check(&store, &pushes);
    store.flush().unwrap();
    store.close();
    drop(store);
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    check(&store, &pushes);
}
