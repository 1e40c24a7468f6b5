//! The speedscope result shape (of a selection and of a diff) and the diff's focus, on a store
//! filled here: the files are checked against speedscope's file-format schema (the fields
//! speedscope's importer reads) and their weights against the merged totals; the focused diff
//! against the node limit it must not be cut by.

use std::collections::BTreeMap;

use ember_query::{Format, Output, Querier, QueryError, QueryRequest};
use ember_store::{IngestBatch, IngestProfile, Store, StoreOptions};
use serde_json::Value;

const SEC: i64 = 1_000_000_000;
const T0: i64 = 1_700_000_000 * SEC;

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-query-ss-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// Stores one cpu profile of `stacks` (`"a;b"`, value) for service `svc` at `time`.
fn ingest(store: &Store, svc: &str, time: i64, stacks: &[(String, i64)]) {
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    b.set_period(("cpu", "nanoseconds"), 10_000_000);
    for (stack, v) in stacks {
        let frames: Vec<&str> = stack.split(';').collect();
        b.add_folded_stack(&frames, &[*v]);
    }
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![("service_name".into(), svc.into())],
            time_nanos: time,
            pprof: ember_pprof::encode(&b.build()),
            what: "profile".into(),
        }],
    };
    store.ingest("t", batch).expect("ingest");
}

fn stacks(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(s, v)| (s.to_string(), *v)).collect()
}

fn req(start: i64, end: i64) -> QueryRequest {
    QueryRequest::parse("{}", None, ember_query::NameRule::PyroscopeApp, start, end).unwrap()
}

fn json(output: Output) -> Value {
    match output {
        Output::Bytes { content_type, body } => {
            assert_eq!(content_type, "application/json");
            serde_json::from_slice(&body).expect("speedscope is JSON")
        }
        Output::Json(v) => panic!("speedscope is a file, not a JSON document: {v}"),
    }
}

/// Checks `file` against speedscope's file-format schema (the required fields of the file, its
/// frames and its `sampled` profiles, every frame index in range, weights summing to
/// `endValue`), and returns each profile's name with its stacks (frame names joined by `;`,
/// root first) and weights.
fn validate(file: &Value) -> Vec<(String, BTreeMap<String, f64>)> {
    assert_eq!(
        file["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = file["shared"]["frames"].as_array().expect("shared.frames");
    let names: Vec<&str> = frames
        .iter()
        .map(|f| f["name"].as_str().expect("every frame has a name"))
        .collect();
    let profiles = file["profiles"].as_array().expect("profiles");
    assert!(!profiles.is_empty());
    let active = file["activeProfileIndex"].as_u64().unwrap_or(0) as usize;
    assert!(active < profiles.len());
    let mut out = Vec::new();
    for p in profiles {
        assert_eq!(p["type"], "sampled", "{p}");
        let unit = p["unit"].as_str().expect("unit");
        assert!(
            [
                "none",
                "nanoseconds",
                "microseconds",
                "milliseconds",
                "seconds",
                "bytes"
            ]
            .contains(&unit)
        );
        let samples = p["samples"].as_array().expect("samples");
        let weights = p["weights"].as_array().expect("weights");
        assert_eq!(samples.len(), weights.len());
        assert_eq!(p["startValue"].as_f64(), Some(0.0));
        let mut sum = 0.0;
        let mut by_stack = BTreeMap::new();
        for (s, w) in samples.iter().zip(weights) {
            let w = w.as_f64().expect("a numeric weight");
            assert!(w > 0.0);
            sum += w;
            let stack: Vec<&str> = s
                .as_array()
                .expect("a sample is an array of frame indices")
                .iter()
                .map(|i| names[i.as_u64().expect("an index") as usize])
                .collect();
            *by_stack.entry(stack.join(";")).or_insert(0.0) += w;
        }
        assert_eq!(p["endValue"].as_f64(), Some(sum));
        out.push((p["name"].as_str().expect("name").to_string(), by_stack));
    }
    out
}

#[test]
fn speedscope_of_a_selection_holds_every_stack_with_its_weight() {
    let dir = temp_dir("one");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    ingest(
        &store,
        "api",
        T0,
        &stacks(&[("main;work", 10), ("main;idle", 5), ("main;work;deep", 3)]),
    );
    ingest(&store, "api", T0 + SEC, &stacks(&[("main;work", 20)]));
    let q = Querier::new(&store);
    let all = req(T0, T0 + 10 * SEC);
    let file = json(q.render("t", &all, Format::Speedscope, "api").unwrap());
    let profiles = validate(&file);
    assert_eq!(profiles.len(), 1);
    assert_eq!(file["profiles"][0]["unit"], "nanoseconds");
    assert_eq!(file["name"], "api");
    let merged = q.merge("t", &all).unwrap();
    let want: BTreeMap<String, f64> = merged
        .stacks()
        .into_iter()
        .map(|(f, v)| (f.join(";"), v as f64))
        .collect();
    assert_eq!(profiles[0].1, want);
    let total: f64 = profiles[0].1.values().sum();
    assert_eq!(total, merged.total as f64);
    assert_eq!(total, 38.0);
    // A focus narrows the file like every other format.
    let mut focused = all.clone();
    focused.focus = vec!["main".into(), "work".into()];
    let file = json(q.render("t", &focused, Format::Speedscope, "").unwrap());
    let p = validate(&file);
    assert_eq!(p[0].1.values().sum::<f64>(), 33.0);
    assert!(p[0].1.keys().all(|k| k.starts_with("main;work")));
    assert_eq!(
        Format::parse(Some("speedscope")).unwrap(),
        Format::Speedscope
    );
    assert!(matches!(
        q.render("t", &req(0, 1), Format::Speedscope, ""),
        Err(QueryError::NotFound(_))
    ));
}

#[test]
fn speedscope_of_a_diff_has_the_baseline_and_the_comparison() {
    let dir = temp_dir("diff");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    ingest(
        &store,
        "api",
        T0,
        &stacks(&[("main;work", 10), ("main;idle", 5)]),
    );
    ingest(
        &store,
        "api",
        T0 + 20 * SEC,
        &stacks(&[("main;work", 21), ("main;gc", 10)]),
    );
    let q = Querier::new(&store);
    let diff = q
        .diff(
            "t",
            &req(T0, T0 + 10 * SEC),
            &req(T0 + 20 * SEC, T0 + 30 * SEC),
        )
        .unwrap();
    let file = json(diff.render(Format::Speedscope, "").unwrap());
    let profiles = validate(&file);
    let sides: Vec<(&str, f64)> = profiles
        .iter()
        .map(|(n, s)| (n.as_str(), s.values().sum()))
        .collect();
    assert_eq!(
        sides,
        [
            ("baseline (nanoseconds)", 15.0),
            ("comparison (nanoseconds)", 31.0)
        ]
    );
    assert_eq!(profiles[0].1.get("main;gc"), None);
    assert_eq!(profiles[1].1.get("main;gc"), Some(&10.0));
}

/// A `double` flamebearer's frame names under the frame called `parent` (level 1).
fn children_of(fb: &Value, parent: &str) -> Vec<String> {
    let names: Vec<&str> = fb["flamebearer"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    let levels = fb["flamebearer"]["levels"].as_array().unwrap();
    let level = |d: usize| -> Vec<i64> {
        levels[d]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect()
    };
    // A double row is 7 numbers per node: x, total, self of each side, then the name; x is
    // relative to the end of the previous node of its side.
    let spans = |row: &[i64]| {
        let mut end = 0;
        row.chunks(7)
            .map(|n| {
                let x = end + n[0];
                end = x + n[1];
                (x, end, n[6] as usize)
            })
            .collect::<Vec<_>>()
    };
    let (one, two) = (level(1), level(2));
    let (p0, p1, _) = spans(&one)
        .into_iter()
        .find(|&(_, _, n)| names[n] == parent)
        .expect("the parent is drawn");
    spans(&two)
        .into_iter()
        .filter(|&(x, _, _)| x >= p0 && x < p1)
        .map(|(_, _, n)| names[n].to_string())
        .collect()
}

#[test]
fn a_focused_diff_is_cut_after_the_focus() {
    let dir = temp_dir("focus");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    // Under `a` 40 children, each heavier on the right; `b` alone is heavier than any of them,
    // so a limit of 8 nodes keeps `b` and cuts most of `a`'s children into `other`.
    let side = |k: i64| {
        let mut s: Vec<(String, i64)> = (0..40).map(|i| (format!("a;x{i}"), 10 + k)).collect();
        s.push(("b".into(), 1000));
        s
    };
    ingest(&store, "api", T0, &side(0));
    ingest(&store, "api", T0 + 20 * SEC, &side(5));
    let q = Querier::new(&store);
    let (mut left, mut right) = (req(T0, T0 + 10 * SEC), req(T0 + 20 * SEC, T0 + 30 * SEC));
    let diff = q.diff("t", &left, &right).unwrap();
    let Output::Json(cut) = diff.render_limited(Format::Flamebearer, "", 8).unwrap() else {
        panic!("flamebearer is JSON");
    };
    let under = children_of(&cut, "a");
    assert!(
        under.contains(&"other".to_string()) && under.len() < 40,
        "{under:?}"
    );
    left.focus = vec!["a".into()];
    right.focus = vec!["a".into()];
    let diff = q.diff("t", &left, &right).unwrap();
    assert_eq!((diff.left.total, diff.right.total), (400, 600));
    // The same limit, spent on the focused subtree: 1 root + a + 40 children fit in 42.
    let Output::Json(focused) = diff.render_limited(Format::Flamebearer, "", 42).unwrap() else {
        panic!("flamebearer is JSON");
    };
    let under = children_of(&focused, "a");
    assert_eq!(under.len(), 40, "{under:?}");
    assert!(!under.contains(&"other".to_string()));
    assert_eq!(
        (
            focused["leftTicks"].as_i64(),
            focused["rightTicks"].as_i64()
        ),
        (Some(400), Some(600))
    );
    // A path neither side has is an empty diff.
    left.focus = vec!["zzz".into()];
    right.focus = vec!["zzz".into()];
    let empty = q.diff("t", &left, &right).unwrap();
    assert!(matches!(
        empty.render(Format::Flamebearer, ""),
        Err(QueryError::NotFound(_))
    ));
}
