//! A `pprof -diff_base` profile pushed to the store (the base's samples negated and labelled
//! `pprof::base=true`) answers every file format as `go tool pprof` reads the pushed file:
//! the top table against the base's total (checked against Go's own `-top` output, committed
//! in `ember-formats/tests/data/diff-base`), and a pprof that keeps the base's label, so its
//! top table is Go's again. A plain profile is not taken for a diff.

use std::path::{Path, PathBuf};

use ember_query::{Format, Output, Querier, QueryRequest};
use ember_store::{IngestBatch, IngestProfile, Matcher, Selector, Store, StoreOptions};

const T0: i64 = 1_700_000_000_000_000_000;

fn diff_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ember-formats/tests/data/diff-base")
        .join(name)
}

/// A store in a fresh directory holding `file` as service `svc`.
fn store_with(file: &Path, tag: &str) -> (Store, PathBuf) {
    let dir =
        std::env::temp_dir().join(format!("ember-query-diffbase-{tag}-{}", std::process::id()));
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

fn request(sample_type: &str) -> QueryRequest {
    let selector = Selector {
        name: None,
        matchers: vec![Matcher::eq("service_name", "svc")],
    };
    QueryRequest::new(selector, Some(sample_type.into()), 0, i64::MAX)
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
    let (store, dir) = store_with(&diff_data(&format!("{stem}.diff.pb.gz")), stem);
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
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_plain_profile_is_not_a_diff() {
    let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora");
    let file = corpora.join("pprof/internal/report/testdata/sample.cpu");
    let (store, dir) = store_with(&file, "plain");
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
    let _ = std::fs::remove_dir_all(dir);
}
