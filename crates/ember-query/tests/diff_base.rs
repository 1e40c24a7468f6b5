//! A `pprof -diff_base` profile pushed to the store (the base's samples negated and labelled
//! `pprof::base=true`) answers every file format as `go tool pprof` reads the pushed file:
//! the top table against the base's total (checked against Go's own `-top` output, committed
//! in `ember-formats/tests/data/diff-base`), and a pprof that keeps the base's label, so its
//! top table is Go's again. A plain profile is not taken for a diff.
//!
//! Its flame graphs (`/api/v1/query`'s `flamebearer` and `flamebearer-bin`, what the web UI
//! draws) are the diff too: the `double` layout, base → new, its left total the base's, whole
//! even when a first paint asks for `minShare`. A plain profile's stay `single`, and so does
//! the Pyroscope flamebearer (`Querier::flamebearer`, `/pyroscope/render`) of the diff.

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

fn diff_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ember-formats/tests/data/diff-base")
        .join(name)
}

/// A store in a fresh directory holding `file` as service `svc`.
fn store_with(file: &Path, tag: &str) -> (tempfile::TempDir, Store) {
    // Removed with its content when the caller drops the guard returned.
    let dir = tempfile::Builder::new()
        .prefix(&format!("ember-query-diffbase-{tag}-"))
        .tempdir()
        .expect("temp dir");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open store");
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![("service_name".into(), "svc".into())],
            time_nanos: T0,
            pprof: std::fs::read(file).expect("read test profile"),
            what: file.display().to_string(),
        }],
    };
    store.ingest("t", batch).expect("ingest");
    (dir, store)
}

fn request(sample_type: &str) -> QueryRequest {
    let selector = Selector {
        name: None,
        matchers: vec![Matcher::eq("service_name", "svc")],
    };
    // A bounded range: the JSON flamebearer carries a timeline over it.
    QueryRequest::new(
        selector,
        Some(sample_type.into()),
        T0 - 1_000_000_000,
        T0 + 1_000_000_000,
    )
}

fn bytes(out: Output) -> Vec<u8> {
    match out {
        Output::Bytes { body, .. } => body,
        Output::Json(v) => panic!("expected a file, got JSON {v}"),
    }
}

/// The lines of a top table from its "Showing nodes" line on (the server's table has no
/// `File:`, `Time:` or `Duration:` lines: a selection is not one file).
fn table_lines(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("Showing nodes"))
        .map(str::to_owned)
        .collect()
}

fn go_top(stem: &str) -> Vec<String> {
    let text = std::fs::read_to_string(diff_data(&format!("{stem}.top.txt"))).expect("Go's -top");
    table_lines(&text)
}

#[test]
fn a_pushed_diff_profile_reports_as_go_reads_the_file() {
    // Made by Go from symbolized profiles (the other file of that directory is legacy and
    // unsymbolized: Go prints no function names for it, the store keeps addresses).
    let (stem, sample_type) = ("sample-vs-large", "cpu");
    let (_dir, store) = store_with(&diff_data(&format!("{stem}.diff.pb.gz")), stem);
    let querier = Querier::new(&store);
    let req = request(sample_type);
    let expected = go_top(stem);
    assert!(expected.len() > 2, "{stem}: Go's table is empty");

    let top = bytes(querier.render("t", &req, Format::Top, "").expect("top"));
    let top = String::from_utf8(top).expect("utf-8 table");
    assert_eq!(
        table_lines(&top),
        expected,
        "{stem}: server top table\n{top}"
    );

    // The pprof answer is a -diff_base profile again: Go's top table of it is the same.
    let pprof = bytes(querier.render("t", &req, Format::Pprof, "").expect("pprof"));
    let profile = ember_pprof::decode(&pprof).expect("decode the answer");
    assert!(
        ember_pprof::has_diff_base(&profile),
        "{stem}: the answer lost pprof::base"
    );
    let table = ember_formats::top(&profile, &ember_formats::TopOptions::default())
        .expect("top of the answer");
    assert_eq!(
        table_lines(&table.render()),
        expected,
        "{stem}: top of the pprof answer"
    );

    // Folded stacks of a diff are differential: `stack base new`.
    let folded = bytes(
        querier
            .render("t", &req, Format::Folded, "")
            .expect("folded"),
    );
    let folded = String::from_utf8(folded).expect("utf-8 folded");
    assert!(
        folded.lines().all(|l| l.rsplitn(3, ' ').count() == 3),
        "{stem}: folded lines are not `stack base new`"
    );
    drop(store);
}

#[test]
fn a_plain_profile_is_not_a_diff() {
    let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora");
    let file = corpora.join("pprof/internal/report/testdata/sample.cpu");
    let (_dir, store) = store_with(&file, "plain");
    let querier = Querier::new(&store);
    let pprof = bytes(
        querier
            .render("t", &request("cpu"), Format::Pprof, "")
            .expect("pprof"),
    );
    let profile = ember_pprof::decode(&pprof).expect("decode the answer");
    assert!(!ember_pprof::has_diff_base(&profile));
    let top = bytes(
        querier
            .render("t", &request("cpu"), Format::Top, "")
            .expect("top"),
    );
    let top = String::from_utf8(top).expect("utf-8 table");
    let expected = ember_formats::top(
        &ember_pprof::decode(&std::fs::read(&file).expect("read")).expect("decode"),
        &ember_formats::TopOptions::default(),
    )
    .expect("top of the file");
    // The totals line: against every sample (the server's rows carry no `(inline)` marks).
    assert_eq!(
        table_lines(&top).first(),
        table_lines(&expected.render()).first()
    );
    drop(store);
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
    let (_dir, store) = store_with(&file, "flame-diff");
    let querier = Querier::new(&store);
    let mut req = request("cpu");
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
}

#[test]
fn a_plain_profile_stays_a_single_flame_graph() {
    let file = repo_file("tests/data/corpora/pprof/internal/report/testdata/sample.cpu");
    let (_dir, store) = store_with(&file, "flame-plain");
    let querier = Querier::new(&store);
    let mut req = request("cpu");
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
}
