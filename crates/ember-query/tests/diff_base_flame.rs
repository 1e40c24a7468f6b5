//! The flame graphs of a pushed `pprof -diff_base` profile (`/api/v1/query`'s `flamebearer`
//! and `flamebearer-bin`, what the web UI draws) are the diff it is: the `double` layout,
//! base → new, its left total the base's (Go's `-top` divides by it), whole even when a first
//! paint asks for `minShare`. A plain profile's stay `single`, and so does the Pyroscope
//! flamebearer (`Querier::flamebearer`, `/pyroscope/render`) of the diff.

use std::path::{Path, PathBuf};

use ember_query::{Format, Output, Querier, QueryRequest};
use ember_store::{IngestBatch, IngestProfile, Matcher, Selector, Store, StoreOptions};
use serde_json::Value;

const T0: i64 = 1_700_000_000_000_000_000;

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A store in a fresh directory holding `file` as service `svc`.
fn store_with(file: &Path, tag: &str) -> (Store, PathBuf) {
    let dir = std::env::temp_dir().join(format!(
        "ember-query-diffflame-{tag}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir, StoreOptions::default()).expect("open store");
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![("service_name".into(), "svc".into())],
            time_nanos: T0,
            pprof: std::fs::read(file).expect("read test profile"),
            what: file.display().to_string(),
        }],
    };
    store.ingest("t", batch).expect("ingest");
    (store, dir)
}

fn request() -> QueryRequest {
    let selector = Selector {
        name: None,
        matchers: vec![Matcher::eq("service_name", "svc")],
    };
    QueryRequest::new(
        selector,
        Some("cpu".into()),
        T0 - 1_000_000_000,
        T0 + 1_000_000_000,
    )
}

/// The JSON header of a binary flame graph (after `EMFG` and its length).
fn bin_header(out: Output) -> Value {
    let Output::Bytes { body, .. } = out else {
        panic!("expected the binary flame graph");
    };
    assert_eq!(&body[..4], b"EMFG");
    let h = u32::from_le_bytes(body[4..8].try_into().unwrap()) as usize;
    serde_json::from_slice(&body[8..8 + h]).expect("header JSON")
}

fn json(out: Output) -> Value {
    match out {
        Output::Json(v) => v,
        Output::Bytes { .. } => panic!("expected JSON"),
    }
}

/// The base's total of Go's `-top` of the pushed file: "Total samples = 1760ms" (the
/// committed output next to it), in nanoseconds.
fn go_base_total_nanos() -> i64 {
    let text = std::fs::read_to_string(repo_file(
        "crates/ember-formats/tests/data/diff-base/sample-vs-large.top.txt",
    ))
    .expect("Go's -top");
    let ms = text
        .split("Total samples = ")
        .nth(1)
        .and_then(|rest| rest.split("ms").next())
        .expect("Go's total line");
    ms.trim().parse::<i64>().expect("milliseconds") * 1_000_000
}

#[test]
fn a_pushed_diff_profile_is_a_double_flame_graph() {
    let file = repo_file("crates/ember-formats/tests/data/diff-base/sample-vs-large.diff.pb.gz");
    let (store, dir) = store_with(&file, "diff");
    let querier = Querier::new(&store);
    let mut req = request();
    let base = go_base_total_nanos();
    assert_eq!(base, 1_760_000_000);

    let header = bin_header(
        querier
            .render("t", &req, Format::FlamebearerBin, "d")
            .expect("flamebearer-bin"),
    );
    assert_eq!(header["format"], "double", "{header}");
    assert_eq!(header["leftTicks"].as_i64(), Some(base), "{header}");
    let right = header["rightTicks"].as_i64().expect("rightTicks");
    assert!(right > base, "the new side is the larger profile: {header}");
    assert_eq!(header["numTicks"].as_i64(), Some(base + right));

    // The first paint's `minShare` gets the whole diff (no pruned `x` column).
    req.min_share = 0.001;
    let first = bin_header(
        querier
            .render("t", &req, Format::FlamebearerBin, "d")
            .expect("flamebearer-bin with minShare"),
    );
    assert_eq!(first["format"], "double");
    assert!(first.get("x").is_none(), "a diff is not pruned: {first}");
    assert_eq!(first["levels"], header["levels"]);
    req.min_share = 0.0;

    // The JSON flamebearer of Ember's API: double, with its timeline.
    let fb = json(
        querier
            .render("t", &req, Format::Flamebearer, "d")
            .expect("flamebearer"),
    );
    assert_eq!(fb["metadata"]["format"], "double");
    assert_eq!(fb["leftTicks"].as_i64(), Some(base));
    assert_eq!(fb["rightTicks"].as_i64(), Some(right));
    let timeline: i64 = fb["timeline"]["samples"]
        .as_array()
        .expect("timeline")
        .iter()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(timeline, right - base, "the timeline holds the net total");

    // Pyroscope's flamebearer (/pyroscope/render) stays single: Grafana expects it.
    let pyro = querier
        .flamebearer("t", &req, "d")
        .expect("pyroscope flamebearer");
    assert_eq!(pyro["metadata"]["format"], "single");
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_plain_profile_stays_a_single_flame_graph() {
    let file = repo_file("tests/data/corpora/pprof/internal/report/testdata/sample.cpu");
    let (store, dir) = store_with(&file, "plain");
    let querier = Querier::new(&store);
    let mut req = request();
    let header = bin_header(
        querier
            .render("t", &req, Format::FlamebearerBin, "p")
            .expect("flamebearer-bin"),
    );
    assert_eq!(header["format"], "single", "{header}");
    assert!(header.get("leftTicks").is_none());
    req.min_share = 0.01;
    let first = bin_header(
        querier
            .render("t", &req, Format::FlamebearerBin, "p")
            .expect("pruned"),
    );
    assert_eq!(first["format"], "single");
    assert_eq!(first["x"], true, "a plain first paint is still pruned");
    req.min_share = 0.0;
    let fb = json(
        querier
            .render("t", &req, Format::Flamebearer, "p")
            .expect("flamebearer"),
    );
    assert_eq!(fb["metadata"]["format"], "single");
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}
