//! The operations of `ember-query` on a store filled here: merge, diff, top, time series,
//! group-by, averaging, the node limit, span and sample-label filters, with exact totals.

use std::path::PathBuf;

use ember_query::{
    DEFAULT_MAX_NODES, Format, NameRule, Output, Querier, QueryError, QueryRequest, folded_text,
};
use ember_store::{IngestBatch, IngestProfile, Store, StoreOptions};

const SEC: i64 = 1_000_000_000;
/// A round start time (unix ns) for every profile of these tests.
const T0: i64 = 1_700_000_000 * SEC;
const CPU: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-query-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// Stores one cpu profile of `stacks` (`"a;b"`, value) for the series `labels` at `time`.
fn ingest(store: &Store, labels: &[(&str, &str)], time: i64, stacks: &[(&str, i64)]) {
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    b.set_period(("cpu", "nanoseconds"), 10_000_000);
    for (stack, v) in stacks {
        let frames: Vec<&str> = stack.split(';').collect();
        b.add_folded_stack(&frames, &[*v]);
    }
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: labels
                .iter()
                .map(|(n, v)| ((*n).to_string(), (*v).to_string()))
                .collect(),
            time_nanos: time,
            pprof: ember_pprof::encode(&b.build()),
            what: "profile".into(),
        }],
    };
    store.ingest("t", batch).expect("ingest");
}

/// A store with service `api` (pods a and b) and service `db`, over three 10 s buckets.
fn filled(name: &str) -> (tempfile::TempDir, Store) {
    let dir = temp_dir(name);
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open store");
    let api_a = [("service_name", "api"), ("pod", "a")];
    let api_b = [("service_name", "api"), ("pod", "b")];
    ingest(&store, &api_a, T0, &[("main;work", 10), ("main;idle", 5)]);
    ingest(&store, &api_a, T0 + 10 * SEC, &[("main;work", 20)]);
    ingest(
        &store,
        &api_b,
        T0 + 15 * SEC,
        &[("main;work", 1), ("main;gc", 4)],
    );
    ingest(&store, &api_b, T0 + 25 * SEC, &[("main;gc", 6)]);
    ingest(
        &store,
        &[("service_name", "db")],
        T0 + 5 * SEC,
        &[("query;scan", 100)],
    );
    (dir, store)
}

fn req(selector: &str, start: i64, end: i64) -> QueryRequest {
    QueryRequest::parse(selector, Some("cpu"), NameRule::PyroscopeApp, start, end)
        .expect("selector parses")
}

fn all(selector: &str) -> QueryRequest {
    req(selector, T0, T0 + 60 * SEC)
}

fn text(output: Output) -> String {
    match output {
        Output::Bytes { body, .. } => String::from_utf8(body).expect("utf-8"),
        Output::Json(v) => v.to_string(),
    }
}

#[test]
fn merge_sums_stacks_within_selector_type_and_range() {
    let (_dir, store) = filled("merge");
    let q = Querier::new(&store);
    let api = q.merge("t", &all("{service_name=\"api\"}")).unwrap();
    assert_eq!(api.total, 46);
    assert_eq!(api.profiles, 4);
    assert_eq!(api.series, 2);
    assert_eq!(folded_text(&api), "main;gc 10\nmain;idle 5\nmain;work 31\n");
    assert_eq!(
        api.profile_types.iter().next().map(String::as_str),
        Some(CPU)
    );
    // A regex over pods, a legacy name with the type suffix, and a time range that cuts.
    let b = q.merge("t", &all("{pod=~\"b|c\"}")).unwrap();
    assert_eq!(b.total, 11);
    let legacy =
        QueryRequest::parse("db.cpu{}", None, NameRule::PyroscopeApp, T0, T0 + 60 * SEC).unwrap();
    assert_eq!(q.merge("t", &legacy).unwrap().total, 100);
    let first = req("{service_name=\"api\"}", T0, T0 + 10 * SEC - 1);
    assert_eq!(q.merge("t", &first).unwrap().total, 15);
    // Another profile type or another tenant sees nothing.
    let mut other_type = all("{}");
    other_type.profile_type = Some("alloc_space".into());
    assert_eq!(q.merge("t", &other_type).unwrap().profiles, 0);
    assert_eq!(q.merge("other", &all("{}")).unwrap().total, 0);
}

#[test]
fn files_of_an_empty_selection_are_not_found_but_its_flame_graph_is_empty() {
    let (_dir, store) = filled("empty");
    let q = Querier::new(&store);
    let none = all("{service_name=\"nope\"}");
    for format in [Format::Folded, Format::Pprof, Format::Svg, Format::Top] {
        assert!(matches!(
            q.render("t", &none, format, ""),
            Err(QueryError::NotFound(_))
        ));
    }
    let Output::Json(fb) = q.render("t", &none, Format::Flamebearer, "").unwrap() else {
        panic!("a flamebearer is JSON");
    };
    assert_eq!(fb["flamebearer"]["numTicks"], 0);
}

#[test]
fn flamebearer_timeline_and_pprof_keep_the_totals() {
    let (_dir, store) = filled("flamebearer");
    let q = Querier::new(&store);
    let mut r = req("{service_name=\"api\"}", T0, T0 + 30 * SEC - 1);
    assert_eq!(r.max_nodes, DEFAULT_MAX_NODES);
    assert_eq!(r.step_nanos(), 10 * SEC);
    let fb = q.flamebearer("t", &r, "api").unwrap();
    assert_eq!(fb["flamebearer"]["numTicks"], 46);
    assert_eq!(fb["metadata"]["name"], "api");
    assert_eq!(fb["metadata"]["units"], "samples");
    assert_eq!(fb["timeline"]["durationDelta"], 10);
    assert_eq!(fb["timeline"]["samples"], serde_json::json!([15, 25, 6]));
    let Output::Bytes { body, .. } = q.render("t", &r, Format::Pprof, "").unwrap() else {
        panic!("pprof is bytes");
    };
    let p = ember_pprof::decode(&ember_pprof::decompress(&body, &Default::default()).unwrap())
        .expect("valid pprof");
    assert_eq!(p.sample.iter().map(|s| s.value[0]).sum::<i64>(), 46);
    // The node limit: 2 nodes keep `main` and its heaviest child; the rest is `other`.
    r.max_nodes = 2;
    let tree = q.call_tree("t", &r).unwrap();
    let names: Vec<&str> = tree
        .nodes
        .iter()
        .map(|n| tree.names[n.name as usize].as_str())
        .collect();
    assert_eq!(names, ["total", "main", "work", "other"]);
    assert_eq!(tree.nodes[0].total, 46);
}

#[test]
fn top_table_ranks_the_heaviest_function() {
    let (_dir, store) = filled("top");
    let table = text(
        Querier::new(&store)
            .render("t", &all("{}"), Format::Top, "")
            .unwrap(),
    );
    let first_row = table
        .lines()
        .find(|l| l.contains("scan") || l.contains("work"))
        .expect("a row");
    assert!(first_row.contains("scan"), "{table}");
}

#[test]
fn focus_keeps_only_the_stacks_through_the_path_in_every_format() {
    let (_dir, store) = filled("focus");
    let q = Querier::new(&store);
    let mut req = all("{}");
    req.focus = vec!["main".into(), "work".into()];
    // main;work: 10 + 20 + 1.
    assert_eq!(q.merge("t", &req).unwrap().total, 31);
    let fb = q.flamebearer("t", &req, "").unwrap();
    assert_eq!(fb["flamebearer"]["numTicks"], 31, "{fb}");
    let names: Vec<&str> = fb["flamebearer"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        !names.contains(&"gc") && !names.contains(&"scan"),
        "{names:?}"
    );
    let Output::Bytes { body, .. } = q.render("t", &req, Format::Folded, "").unwrap() else {
        panic!("folded is text");
    };
    assert_eq!(String::from_utf8(body).unwrap(), "main;work 31\n");
    assert_eq!(
        ember_query::parse::parse_path("focus", r#"["main","work"]"#).unwrap(),
        req.focus
    );
    assert!(ember_query::parse::parse_path("focus", "main;work").is_err());
}

#[test]
fn top_json_lists_every_function_with_raw_values() {
    let (_dir, store) = filled("top-json");
    let q = Querier::new(&store);
    let Output::Json(top) = q.render("t", &all("{}"), Format::TopJson, "").unwrap() else {
        panic!("top-json is JSON");
    };
    let merged = q.merge("t", &all("{}")).unwrap();
    assert_eq!(top["total"].as_i64(), Some(merged.total), "{top}");
    let rows = top["rows"].as_array().expect("rows");
    assert_eq!(rows[0]["name"], "scan", "{top}");
    // Self values add up to the total: no function is cut off by its share.
    let selfs: i64 = rows.iter().map(|r| r["self"].as_i64().unwrap()).sum();
    assert_eq!(selfs, merged.total, "{top}");
    for r in rows {
        assert!(r["total"].as_i64() >= r["self"].as_i64(), "{r}");
    }
    assert!(matches!(
        q.render("t", &all("{service_name=\"nope\"}"), Format::TopJson, ""),
        Err(QueryError::NotFound(_))
    ));
    assert_eq!(Format::parse(Some("top-json")).unwrap(), Format::TopJson);
}

#[test]
fn diff_compares_two_time_ranges_per_stack() {
    let (_dir, store) = filled("diff");
    let q = Querier::new(&store);
    let left = req("{service_name=\"api\"}", T0, T0 + 10 * SEC - 1);
    let right = req("{service_name=\"api\"}", T0 + 10 * SEC, T0 + 30 * SEC);
    let diff = q.diff("t", &left, &right).unwrap();
    assert_eq!(
        text(diff.render(Format::Folded, "").unwrap()),
        "main;gc 0 10\nmain;idle 5 0\nmain;work 10 21\n"
    );
    let deltas: i64 = diff.profile().sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(deltas, 31 - 15);
    let fb = diff.flamebearer("api");
    assert_eq!(fb["metadata"]["format"], "double");
    assert_eq!(
        (fb["leftTicks"].as_i64(), fb["rightTicks"].as_i64()),
        (Some(15), Some(31))
    );
    // The movers: every function of either side with both sides' values, the largest
    // self change first (work: 10 -> 21, gc: 0 -> 10, idle: 5 -> 0).
    let Output::Json(top) = diff.render(Format::TopJson, "").unwrap() else {
        panic!("top-json is JSON");
    };
    assert_eq!(
        (top["leftTotal"].as_i64(), top["rightTotal"].as_i64()),
        (Some(15), Some(31))
    );
    let rows: Vec<(String, [i64; 6])> = top["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let v = |k: &str| r[k].as_i64().unwrap_or(i64::MIN);
            let name = r["name"].as_str().unwrap_or_default().to_string();
            (
                name,
                [
                    "self",
                    "total",
                    "leftSelf",
                    "leftTotal",
                    "rightSelf",
                    "rightTotal",
                ]
                .map(v),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("work".into(), [11, 11, 10, 10, 21, 21]),
            ("gc".into(), [10, 10, 0, 0, 10, 10]),
            ("idle".into(), [-5, -5, 5, 5, 0, 0]),
            ("main".into(), [0, 16, 0, 15, 0, 31]),
        ],
        "{top}"
    );
    let svg = text(diff.render(Format::Svg, "").unwrap());
    assert!(svg.contains("Differential Flame Graph"));
    let none = all("{service_name=\"nope\"}");
    let empty = q.diff("t", &none, &none).unwrap();
    assert!(matches!(
        empty.render(Format::Flamebearer, ""),
        Err(QueryError::NotFound(_))
    ));
    assert_eq!(empty.flamebearer("")["leftTicks"], 0);
}

#[test]
fn time_series_buckets_by_step_and_groups_by_labels() {
    let (_dir, store) = filled("series");
    let q = Querier::new(&store);
    let mut r = all("{}");
    r.step_nanos = Some(10 * SEC);
    let one = q.time_series("t", &r).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        one[0].points,
        vec![(T0, 115), (T0 + 10 * SEC, 25), (T0 + 20 * SEC, 6)]
    );
    r.group_by = vec!["service_name".into(), "pod".into()];
    let grouped = q.time_series("t", &r).unwrap();
    let by: Vec<(Vec<&str>, i64)> = grouped
        .iter()
        .map(|ts| {
            (
                ts.labels.iter().map(|(_, v)| v.as_str()).collect(),
                ts.points.iter().map(|(_, v)| v).sum(),
            )
        })
        .collect();
    assert_eq!(
        by,
        vec![
            (vec!["api", "a"], 35),
            (vec!["api", "b"], 11),
            (vec!["db", ""], 100)
        ]
    );
}

#[test]
fn averaged_series_contribute_their_mean() {
    let dir = temp_dir("average");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).expect("open store");
    let gauge = [("service_name", "g"), ("__aggregation_type__", "average")];
    ingest(&store, &gauge, T0, &[("a", 10), ("b", 3)]);
    ingest(&store, &gauge, T0 + SEC, &[("a", 20)]);
    ingest(&store, &[("service_name", "s")], T0, &[("a", 7)]);
    let q = Querier::new(&store);
    let merged = q.merge("t", &all("{}")).unwrap();
    // a: mean(10, 20) = 15 plus the summed 7; b: mean(3, 0) = 1.5, rounded to 2.
    assert_eq!(folded_text(&merged), "a 22\nb 2\n");
    let mut r = all("{service_name=\"g\"}");
    r.step_nanos = Some(10 * SEC);
    assert_eq!(q.time_series("t", &r).unwrap()[0].points, vec![(T0, 17)]);
}

#[test]
fn listings_and_filters_on_unlabelled_profiles() {
    let (_dir, store) = filled("listings");
    let q = Querier::new(&store);
    assert_eq!(q.profile_types("t"), vec![CPU.to_string()]);
    assert_eq!(
        q.label_values("t", "pod", &[]).unwrap(),
        vec!["a".to_string(), "b".to_string()]
    );
    // Two selections are OR'd; a range with no profile of a series leaves it out.
    let two = [
        all("{pod=\"a\"}"),
        req("{service_name=\"db\"}", T0 + 50 * SEC, T0 + 60 * SEC),
    ];
    assert_eq!(q.series("t", &two).unwrap().len(), 1);
    assert!(
        q.label_names("t", &[])
            .unwrap()
            .contains(&"pod".to_string())
    );
    // These profiles carry no sample labels: span and sample-label filters keep nothing.
    let mut spans = all("{}");
    spans.span_ids = vec!["00f067aa0ba902b7".into()];
    assert_eq!(q.merge("t", &spans).unwrap().total, 0);
    let mut labels = all("{}");
    labels.sample_labels = vec![ember_store::Matcher::eq("span_name", "GET")];
    assert!(q.time_series("t", &labels).unwrap().is_empty());
}

/// Span ids and sample-label matchers select samples of a real Go profile (otel-profiling-go
/// writes `span_id` on the samples of a traced request): totals equal the source's samples.
#[test]
fn span_and_sample_label_filters_select_samples() {
    let dir = temp_dir("spans");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).expect("open store");
    let pprof = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/data/corpora/pyroscope/pkg/pprof/testdata/single_group_with_optional_span_id.pb.gz",
        ),
    )
    .unwrap();
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![("service_name".into(), "traced".into())],
            time_nanos: T0,
            pprof,
            what: "profile".into(),
        }],
    };
    store.ingest("t", batch).unwrap();
    let q = Querier::new(&store);
    let base = all("{service_name=\"traced\"}");
    assert_eq!(q.merge("t", &base).unwrap().total, 1_320_000_000);
    // `go tool pprof -tags`: span_id 239 on 710 ms of the 1.32 s.
    let mut span = base.clone();
    span.span_ids = vec!["nope".into(), "239".into()];
    assert_eq!(q.merge("t", &span).unwrap().total, 710_000_000);
    span.span_ids = vec!["23".into()];
    assert_eq!(q.merge("t", &span).unwrap().total, 0, "ids match whole");
    let mut labels = base.clone();
    labels.sample_labels = vec![ember_store::Matcher::eq("span_id", "239")];
    let series = q.time_series("t", &labels).unwrap();
    let total: i64 = series.iter().flat_map(|s| &s.points).map(|p| p.1).sum();
    assert_eq!(total, 710_000_000);
    // Grouped by the sample label: the span and the samples outside any span.
    let mut grouped = base.clone();
    grouped.group_by = vec!["span_id".into()];
    let series = q.time_series("t", &grouped).unwrap();
    let by: Vec<(String, i64)> = series
        .iter()
        .map(|s| (s.labels[0].1.clone(), s.points.iter().map(|p| p.1).sum()))
        .collect();
    assert_eq!(
        by,
        vec![(String::new(), 610_000_000), ("239".into(), 710_000_000)]
    );
}
