//! Frame filters on stored selections (hide a regex, collapse recursion, drop below a
//! function) against the corpus profiles' own folded stacks, filtered here stack by stack
//! with plain string operations: the folded file, the flame graph (before its node limit)
//! and the top table must all show the filtered stacks, and the total must not move.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ember_query::{Format, FrameFilters, Output, Querier, QueryRequest};
use ember_store::{IngestBatch, IngestProfile, Matcher, Selector, Store, StoreOptions};

const JAVA: &str = "pyroscope/pkg/pprof/testdata/profile_java";
const GO: &str = "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof";

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

fn store(name: &str) -> (tempfile::TempDir, Store) {
    // Removed with its content when the caller drops the guard returned.
    let dir = tempfile::Builder::new()
        .prefix(&format!("ember-filters-{name}-"))
        .tempdir()
        .expect("temp dir");
    let store = Store::open(dir.path(), StoreOptions::default()).expect("open store");
    for (i, f) in [JAVA, GO].iter().enumerate() {
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

fn request(service: usize, filters: &FrameFilters) -> QueryRequest {
    let selector = Selector {
        name: None,
        matchers: vec![Matcher::eq("service_name", &format!("svc{service}"))],
    };
    let mut req = QueryRequest::new(selector, Some("cpu".into()), 0, i64::MAX);
    req.filters = filters.clone();
    req.max_nodes = 0;
    req
}

/// The source file's cpu stacks with `filters` applied by hand, summed by stack.
fn expected(file: &str, filters: &FrameFilters) -> BTreeMap<String, i64> {
    let p = ember_pprof::read_file(&corpus(file)).unwrap();
    let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
    let mut out = BTreeMap::new();
    for (stack, v) in ember_pprof::folded_stacks(&p, i) {
        let mut kept: Vec<&str> = Vec::new();
        let mut frames: Vec<&str> = stack.split(';').collect();
        if let Some(f) = &filters.focus_function {
            // Only the stacks through it, from its outermost call down.
            let Some(at) = frames.iter().position(|n| n == f) else {
                continue;
            };
            frames.drain(..at);
        }
        for name in frames {
            if filters.hide.as_ref().is_some_and(|r| r.is_match(name)) {
                continue;
            }
            if filters.collapse_recursion && kept.last() == Some(&name) {
                continue;
            }
            kept.push(name);
            if filters.drop_below.as_deref() == Some(name) {
                break;
            }
        }
        if v != 0 && !kept.is_empty() {
            *out.entry(kept.join(";")).or_insert(0) += v;
        }
        // A stack entirely hidden gives its value to the root, which folded output omits.
    }
    out.retain(|_, v| *v != 0);
    out
}

fn folded(q: &Querier<'_>, req: &QueryRequest) -> BTreeMap<String, i64> {
    // A filter that leaves nothing (a focus function the profile never calls) is a 404.
    let answer = match q.render("t", req, Format::Folded, "") {
        Err(ember_query::QueryError::NotFound(_)) => return BTreeMap::new(),
        other => other.unwrap(),
    };
    let Output::Bytes { body, .. } = answer else {
        panic!("folded output is a file");
    };
    let text = String::from_utf8(body).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (stack, v) = line.rsplit_once(' ').unwrap();
        *out.entry(stack.to_string()).or_insert(0) += v.parse::<i64>().unwrap();
    }
    out
}

/// The filter sets checked on both profiles, each changing something in at least one.
fn cases() -> Vec<FrameFilters> {
    let hide = |p: &str| Some(FrameFilters::parse_hide(p).unwrap());
    vec![
        FrameFilters {
            hide: hide("^java/lang/|^runtime\\."),
            ..Default::default()
        },
        FrameFilters {
            collapse_recursion: true,
            ..Default::default()
        },
        FrameFilters {
            drop_below: Some("java/io/File.createTempFile".into()),
            ..Default::default()
        },
        FrameFilters {
            drop_below: Some("runtime.main".into()),
            ..Default::default()
        },
        FrameFilters {
            hide: hide("(?i)unixfilesystem|net/http"),
            collapse_recursion: true,
            drop_below: Some("java/util/concurrent/ThreadPoolExecutor.runWorker".into()),
            focus_function: None,
        },
        FrameFilters {
            focus_function: Some("java/io/File.createTempFile".into()),
            ..Default::default()
        },
        FrameFilters {
            focus_function: Some("main.work".into()),
            collapse_recursion: true,
            ..Default::default()
        },
    ]
}

#[test]
fn filtered_selections_equal_the_filtered_source_stacks() {
    let (_dir, store) = store("stacks");
    let q = Querier::new(&store);
    let mut changed = 0;
    for (service, file) in [JAVA, GO].iter().enumerate() {
        let whole = folded(&q, &request(service, &FrameFilters::default()));
        for filters in cases() {
            let want = expected(file, &filters);
            let got = folded(&q, &request(service, &filters));
            assert_eq!(got, want, "{file} with {filters:?}");
            let sum = |m: &BTreeMap<String, i64>| m.values().sum::<i64>();
            if got != whole {
                changed += 1;
                // Moved, never lost: only a stack hidden whole leaves the folded output.
                assert!(sum(&got) <= sum(&whole));
            }
            // The flame graph's total stays the selection's, whatever the filters (a focus
            // function's is the sum of the stacks through it).
            let fb = q.flamebearer("t", &request(service, &filters), "").unwrap();
            let total = if filters.focus_function.is_some() {
                sum(&want)
            } else {
                sum(&whole)
            };
            assert_eq!(fb["flamebearer"]["numTicks"].as_i64(), Some(total));
        }
    }
    assert!(
        changed >= 7,
        "the cases must change the selections: {changed}"
    );
}

/// A hidden function is gone from the top table (its self goes to its callers), and the
/// flame graph cut at a small node limit spends no node on it.
#[test]
fn hidden_functions_leave_the_top_table_and_the_node_limit() {
    let (_dir, store) = store("top");
    let q = Querier::new(&store);
    let filters = FrameFilters {
        hide: Some(FrameFilters::parse_hide("^java/lang/").unwrap()),
        ..Default::default()
    };
    let top = |filters: &FrameFilters| {
        let Output::Json(v) = q
            .render("t", &request(0, filters), Format::TopJson, "")
            .unwrap()
        else {
            panic!("top-json is JSON");
        };
        v.to_string()
    };
    assert!(top(&FrameFilters::default()).contains("java/lang/"));
    assert!(!top(&filters).contains("java/lang/"));
    let mut req = request(0, &filters);
    req.max_nodes = 50;
    let fb = q.flamebearer("t", &req, "").unwrap();
    let names = fb["flamebearer"]["names"].to_string();
    assert!(!names.contains("java/lang/"), "{names}");
}
