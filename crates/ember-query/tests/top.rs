//! The top table the server answers for a selection or a diff, written from the merged call
//! tree (`merged_top`, `diff_top`), equals byte for byte `ember_formats::top` of the pprof the
//! server makes of the same selection (`pprof_profile`, `Diff::profile`): on every corpus
//! profile alone (each of its sample types), on merges of many profiles of one type, and on
//! diffs between two time ranges; with the default options and with the other orders, limits
//! and cuts of `top_of_tree`; and a sample without frames.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ember_formats::{FrameTree, SortBy, TopOptions, top, top_of_tree};
use ember_query::{
    Diff, Format, Merged, Output, Querier, QueryRequest, diff_top, merged_top, pprof_profile,
};
use ember_store::{
    IngestBatch, IngestProfile, Matcher, PROFILE_TYPE_LABEL, Query, Selector, Store, StoreOptions,
};

const SEC: i64 = 1_000_000_000;
const T0: i64 = 1_700_000_000 * SEC;

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

/// The profile.proto files of the corpus manifest (not the legacy formats, not the broken
/// .NET files).
fn proto_files() -> Vec<PathBuf> {
    let tsv = std::fs::read_to_string(corpora().join("pprof-cases.tsv")).expect("manifest");
    tsv.lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c.len() > 3 && !c[3].is_empty() && !c[2].contains("BROKEN"))
        .map(|c| corpora().join(c[0]))
        .collect()
}

fn ingest(store: &Store, service: &str, time: i64, path: &Path) -> bool {
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![("service_name".into(), service.into())],
            time_nanos: time,
            pprof: std::fs::read(path).expect("read corpus profile"),
            what: path.display().to_string(),
        }],
    };
    store.ingest("t", batch).is_ok()
}

fn query(matchers: Vec<Matcher>, start_nanos: i64, end_nanos: i64) -> Query {
    Query {
        selector: Selector {
            name: None,
            matchers,
        },
        profile_type: None,
        start_nanos,
        end_nanos,
    }
}

/// Option sets `top_of_tree` must agree with `top` on.
fn option_sets() -> Vec<TopOptions> {
    vec![
        TopOptions::default(),
        TopOptions {
            sort: SortBy::Cum,
            ..Default::default()
        },
        TopOptions {
            node_count: 5,
            ..Default::default()
        },
        TopOptions {
            node_fraction: 0.0,
            profile_labels: false,
            ..Default::default()
        },
        TopOptions {
            sort: SortBy::Cum,
            node_count: 3,
            node_fraction: 0.05,
            ..Default::default()
        },
    ]
}

/// Checks one selection: the server's table and every option set. Returns the rows.
fn check_merged(merged: &Merged, what: &str) -> usize {
    let pprof = pprof_profile(merged);
    let expected = top(&pprof, &TopOptions::default()).expect("top of the pprof");
    let table = merged_top(merged);
    assert_eq!(table.render(), expected.render(), "{what}");
    assert_eq!(table, expected, "{what}");
    let (t, u) = type_of(&pprof);
    let tree = FrameTree {
        frames: &merged.frames,
        self_values: &merged.self_values,
        names: &merged.names,
        sample_type: &t,
        sample_unit: &u,
    };
    for options in option_sets() {
        let expected = top(&pprof, &options).expect("top of the pprof");
        assert_eq!(
            top_of_tree(&tree, &options).render(),
            expected.render(),
            "{what} {options:?}"
        );
    }
    table.rows.len()
}

fn type_of(p: &ember_pprof::Profile) -> (String, String) {
    let s = |i: i64| p.string_table[i as usize].clone();
    (s(p.sample_type[0].r#type), s(p.sample_type[0].unit))
}

#[test]
fn top_from_the_call_tree_equals_top_of_the_pprof() {
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).expect("open store");
    let files = proto_files();
    let mut ingested = 0;
    for (i, f) in files.iter().enumerate() {
        // Alone in its own service, and with all the others in one service over time.
        if ingest(&store, &format!("svc{i}"), T0, f) {
            ingested += 1;
            assert!(ingest(&store, "all", T0 + i as i64 * SEC, f));
        }
    }
    assert!(ingested >= 50, "only {ingested} corpus profiles ingested");

    let (mut selections, mut rows) = (0, 0);
    let mut types = BTreeSet::new();
    for labels in store.series("t", None) {
        let matchers = labels.iter().map(|(n, v)| Matcher::eq(n, v)).collect();
        let merged = store.merge_stacks("t", &query(matchers, 0, i64::MAX));
        if merged.is_empty() {
            continue;
        }
        types.extend(merged.profile_types.iter().cloned());
        rows += check_merged(&merged, &format!("{labels:?}"));
        selections += 1;
    }
    // Every profile of a type merged, and a diff of the first half of the `all` service's
    // profiles against the second.
    let half = T0 + files.len() as i64 / 2 * SEC;
    let mut diffs = 0;
    for t in &types {
        let by_type = vec![Matcher::eq(PROFILE_TYPE_LABEL, t)];
        let merged = store.merge_stacks("t", &query(by_type.clone(), 0, i64::MAX));
        rows += check_merged(&merged, t);
        selections += 1;
        let mut all = by_type;
        all.push(Matcher::eq("service_name", "all"));
        let diff = Diff {
            left: store.merge_stacks("t", &query(all.clone(), T0, half - 1)),
            right: store.merge_stacks("t", &query(all, half, i64::MAX)),
        };
        if diff.is_empty() {
            continue;
        }
        let expected = top(&diff.profile(), &TopOptions::default()).expect("top of the diff");
        assert_eq!(
            diff_top(&diff.left, &diff.right).render(),
            expected.render(),
            "diff {t}"
        );
        diffs += 1;
    }
    assert!(
        selections >= 80 && diffs >= 10 && rows >= 1000,
        "{selections} selections, {diffs} diffs, {rows} rows"
    );
}

/// What the table of a stored profile lists is what `ember top` lists of the file, row for
/// row (name, flat, cum), whenever every location of the file has lines: the tree's frames are
/// the file's functions with inlined calls expanded. (A location without lines is one row per
/// address, `0x...`, in the store's tree, where `ember top` has one `[binary]` row per mapping;
/// and the server's table marks no row `(inline)` nor prints the file's `File:` and `Time:`
/// lines: it is the table of a merge, not of one file.)
#[test]
fn stored_profile_lists_the_rows_of_the_file() {
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).expect("open store");
    let (mut compared, mut inlined_rows) = (0, 0);
    for (i, f) in proto_files().iter().enumerate() {
        let service = format!("svc{i}");
        let original = ember_pprof::read_file(f).expect("read corpus profile");
        if original.location.iter().any(|l| l.line.is_empty()) || !ingest(&store, &service, T0, f) {
            continue;
        }
        for (index, sample_type) in original.sample_type.iter().enumerate() {
            let name = original.string_table[sample_type.r#type as usize].clone();
            let matchers = vec![
                Matcher::eq("service_name", &service),
                Matcher::eq(ember_store::TYPE_LABEL, &name),
            ];
            let merged = store.merge_stacks("t", &query(matchers, 0, i64::MAX));
            if merged.is_empty() {
                continue;
            }
            let options = TopOptions {
                sample_index: Some(index.to_string()),
                ..Default::default()
            };
            let file = top(&original, &options).expect("top of the file");
            let stored = merged_top(&merged);
            let rows = |t: &ember_formats::TopTable| -> Vec<(String, i64, i64)> {
                t.rows
                    .iter()
                    .map(|r| (r.name.clone(), r.flat, r.cum))
                    .collect()
            };
            let what = format!("{} [{name}]", f.display());
            assert_eq!(rows(&stored), rows(&file), "{what}");
            // The summary, `Dropped N nodes` and `Showing top N` lines.
            let summary = |t: &ember_formats::TopTable| -> Vec<String> {
                let shown = |l: &&String| !l.starts_with("Showing nodes");
                t.labels.iter().skip_while(shown).cloned().collect()
            };
            assert_eq!(summary(&stored), summary(&file), "{what}");
            inlined_rows += file
                .rows
                .iter()
                .filter(|r| !r.inline_label.is_empty())
                .count();
            compared += 1;
        }
    }
    assert!(
        compared >= 90 && inlined_rows >= 100,
        "{compared} sample types, {inlined_rows} inlined rows"
    );
}

/// Samples without frames are the root's own value: the table counts them in its total like
/// `go tool pprof` (a sample without locations), the merged pprof keeps them as such a sample,
/// and both tables still agree.
#[test]
fn samples_without_frames_count_in_the_total() {
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).expect("open store");
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    b.set_period(("cpu", "nanoseconds"), 10_000_000);
    b.add_folded_stack(&["main", "work"], &[30_000_000]);
    b.add_folded_stack(&[], &[10_000_000]);
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![("service_name".into(), "api".into())],
            time_nanos: T0,
            pprof: ember_pprof::encode(&b.build()),
            what: "profile".into(),
        }],
    };
    store.ingest("t", batch).expect("ingest");
    let merged = store.merge_stacks("t", &query(Vec::new(), 0, i64::MAX));
    assert_eq!(merged.self_values[0], 10_000_000, "the root's own value");
    assert_eq!(merged.total, 40_000_000);
    let pprof = pprof_profile(&merged);
    let pprof_total: i64 = pprof.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(
        pprof_total, merged.total,
        "the merged pprof keeps every sample"
    );
    let table = merged_top(&merged);
    assert_eq!(table.total, 40_000_000);
    assert!(
        table
            .render()
            .contains("Showing nodes accounting for 30ms, 75.00% of 40ms total"),
        "{}",
        table.render()
    );
    check_merged(&merged, "a sample without frames");
}

/// The server's table of a selection spread over many tiers (the open head, block sections,
/// their rollups) is summed tier by tier, without merging them: it equals, byte for byte, the
/// table of the full merge, for every profile type of the corpus and for ranges that cut
/// sections in part (read in full) or cover them whole (read from rollups).
#[test]
fn top_summed_tier_by_tier_equals_top_of_the_merge() {
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).expect("open store");
    // The same profiles in one open head: the web UI's JSON table must not depend on tiers.
    let one_head = Store::open(&dir.join("one-head"), StoreOptions::default()).expect("open");
    let files = proto_files();
    for (i, f) in files.iter().enumerate() {
        for round in 0..3 {
            let t = T0 + (round * files.len() + i) as i64 * SEC;
            ingest(&store, "all", t, f);
            ingest(&one_head, "all", t, f);
        }
        if i % 7 == 6 {
            store.flush().expect("flush");
        }
    }
    let end = T0 + 3 * files.len() as i64 * SEC;
    let querier = Querier::new(&store);
    let mut compared = 0;
    for t in store.profile_types("t") {
        for (start, stop) in [(0, i64::MAX), (T0 + 10 * SEC, end - 25 * SEC)] {
            let by_type = vec![Matcher::eq(PROFILE_TYPE_LABEL, &t)];
            let merged = store.merge_stacks("t", &query(by_type.clone(), start, stop));
            let selector = Selector {
                name: None,
                matchers: by_type,
            };
            let req = QueryRequest::new(selector, None, start, stop);
            let got = querier.render("t", &req, Format::Top, "t");
            if merged.profiles == 0 || merged.is_empty() {
                assert!(got.is_err(), "{t}: nothing to list");
                continue;
            }
            let Ok(Output::Bytes { body, .. }) = got else {
                panic!("{t}: not a file answer");
            };
            let got = String::from_utf8(body).expect("text");
            assert_eq!(got, merged_top(&merged).render(), "{t} {start}..{stop}");
            let json = |s: &Store| match Querier::new(s).render("t", &req, Format::TopJson, "t") {
                Ok(Output::Json(v)) => v,
                other => panic!("{t}: {other:?}"),
            };
            assert_eq!(json(&store), json(&one_head), "{t} {start}..{stop} JSON");
            compared += 1;
        }
    }
    assert!(compared >= 20, "{compared} selections compared");
}
