//! pprof sample labels (`span_id`, `function`, `profile_id`…) are stored per sample and
//! select samples: `{service_name="api", span_id="239"}` returns exactly the samples of
//! that span, in the open head, in a block, after compaction and after a restart; totals
//! group by them; the answers equal the same filter applied to the source pprof, by our
//! own reading of the file and by `go tool pprof -tagfocus` (Go 1.19, when installed).
//! Blocks written before sample labels were kept (`EMBERBLK2`) still read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ember_store::{IngestBatch, IngestProfile, Query, Store, StoreOptions, parse_selector};

const TIME: i64 = 1_700_000_000_000_000_000;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora/pyroscope/pkg/pprof/testdata")
        .join(name)
}

/// The two Go CPU profiles with sample labels, by the service they are stored under.
const SOURCES: [(&str, &str); 2] = [
    ("spans", "single_group_with_optional_span_id.pb.gz"),
    ("labels", "go.cpu.labels.pprof"),
];

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-slabels-{name}-"))
        .tempdir()
        .expect("temp dir")
}

fn ingest(store: &Store, service: &str, file: &str) {
    store
        .ingest(
            "t",
            IngestBatch {
                profiles: vec![IngestProfile {
                    labels: vec![("service_name".into(), service.into())],
                    time_nanos: TIME,
                    pprof: std::fs::read(testdata(file)).unwrap(),
                    what: "profile".into(),
                }],
            },
        )
        .unwrap();
}

fn query(selector: &str) -> Query {
    Query {
        selector: parse_selector(selector).unwrap(),
        profile_type: Some("cpu".into()),
        start_nanos: 0,
        end_nanos: i64::MAX,
    }
}

/// `(label, value)` pairs of the source's samples, each once.
fn label_values(p: &ember_pprof::Profile) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = p
        .sample
        .iter()
        .flat_map(|s| &s.label)
        .filter(|l| l.str != 0)
        .map(|l| (ember_pprof::string(p, l.key), ember_pprof::string(p, l.str)))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The source's CPU stacks (folded, summed) of the samples `keep` accepts.
fn source_stacks(
    p: &ember_pprof::Profile,
    keep: impl Fn(&ember_pprof::Sample) -> bool,
) -> BTreeMap<String, i64> {
    let mut filtered = p.clone();
    filtered.sample.retain(|s| keep(s));
    let cpu = ember_pprof::sample_index(&filtered, Some("cpu")).unwrap();
    let mut out = BTreeMap::new();
    for (stack, v) in ember_pprof::folded_stacks(&filtered, cpu) {
        *out.entry(stack).or_insert(0) += v;
    }
    out.retain(|_, v| *v != 0);
    out
}

fn has(p: &ember_pprof::Profile, s: &ember_pprof::Sample, key: &str, value: &str) -> bool {
    s.label
        .iter()
        .any(|l| ember_pprof::string(p, l.key) == key && ember_pprof::string(p, l.str) == value)
}

fn stored_stacks(store: &Store, selector: &str) -> BTreeMap<String, i64> {
    let merged = store.merge_stacks("t", &query(selector));
    merged.folded().into_iter().collect()
}

/// Every label value of both sources, selected alone, negated, and as a group-by: the
/// store's answers equal the source's samples.
fn check(store: &Store, state: &str) {
    for (service, file) in SOURCES {
        let source = ember_pprof::decode(&std::fs::read(testdata(file)).unwrap()).unwrap();
        let everything = source_stacks(&source, |_| true);
        assert_eq!(
            stored_stacks(store, &format!("{{service_name=\"{service}\"}}")),
            everything,
            "{state}: {service} unfiltered"
        );
        let mut by_key: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for (key, value) in label_values(&source) {
            let want = source_stacks(&source, |s| has(&source, s, &key, &value));
            let selector = format!("{{service_name=\"{service}\", {key}=\"{value}\"}}");
            assert_eq!(stored_stacks(store, &selector), want, "{state}: {selector}");
            let not = source_stacks(&source, |s| !has(&source, s, &key, &value));
            let selector = format!("{{service_name=\"{service}\", {key}!=\"{value}\"}}");
            assert_eq!(stored_stacks(store, &selector), not, "{state}: {selector}");
            by_key
                .entry(key)
                .or_default()
                .insert(value, want.values().sum());
        }
        for (key, mut want) in by_key {
            // Samples without the label form the "" group.
            let unlabelled: i64 = source_stacks(&source, |s| {
                !s.label
                    .iter()
                    .any(|l| ember_pprof::string(&source, l.key) == key)
            })
            .values()
            .sum();
            if unlabelled != 0 {
                want.insert(String::new(), unlabelled);
            }
            let got: BTreeMap<String, i64> = store
                .series_totals(
                    "t",
                    &query(&format!("{{service_name=\"{service}\"}}")),
                    i64::MAX / 4,
                    std::slice::from_ref(&key),
                )
                .into_iter()
                .map(|ts| {
                    assert_eq!(ts.labels.len(), 1);
                    (
                        ts.labels[0].1.clone(),
                        ts.points.iter().map(|p| p.1).sum::<i64>(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{state}: {service} grouped by {key}");
        }
    }
    // A label no sample carries selects nothing, as for series labels.
    assert!(stored_stacks(store, "{service_name=\"spans\", span_id=\"nope\"}").is_empty());
    assert!(stored_stacks(store, "{service_name=\"spans\", nolabel=\"x\"}").is_empty());
}

#[test]
fn sample_labels_select_samples_in_every_tier() {
    let dir = temp_dir("tiers");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    for (service, file) in SOURCES {
        ingest(&store, service, file);
    }
    check(&store, "head");
    store.flush().unwrap();
    check(&store, "block");
    // A second copy of each in a second block, compacted with the first: values double.
    for (service, file) in SOURCES {
        ingest(&store, service, file);
    }
    store.flush().unwrap();
    let doubled = stored_stacks(&store, "{service_name=\"labels\", function=\"fast\"}");
    store.close();
    drop(store);
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(
        stored_stacks(&store, "{service_name=\"labels\", function=\"fast\"}"),
        doubled,
        "after a restart"
    );
}

#[test]
fn compacted_blocks_keep_sample_labels() {
    let dir = temp_dir("compact");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    // Four blocks of one size class, compacted into one; the first holds both sources.
    for (service, file) in SOURCES {
        ingest(&store, service, file);
    }
    store.flush().unwrap();
    for i in 0..3 {
        store
            .ingest(
                "t",
                IngestBatch {
                    profiles: vec![IngestProfile {
                        labels: vec![("service_name".into(), format!("other{i}"))],
                        time_nanos: TIME,
                        pprof: std::fs::read(testdata(SOURCES[1].1)).unwrap(),
                        what: "profile".into(),
                    }],
                },
            )
            .unwrap();
        store.flush().unwrap();
    }
    store.compact().unwrap();
    assert_eq!(
        store.disk_usage().0,
        1,
        "four small blocks of a day compact into one"
    );
    check(&store, "compacted");
    store.close();
    drop(store);
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    check(&store, "compacted, reopened");
}

/// Go 1.19's `go` binary, when installed (Debian `golang-1.19-go`).
fn go() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/lib/go-1.19/bin/go");
    p.exists().then_some(p)
}

#[test]
fn span_totals_equal_go_tool_pprof_tagfocus() {
    let Some(go) = go() else {
        eprintln!(
            "\n!!!!!!!! SKIPPING span_totals_equal_go_tool_pprof_tagfocus: Go 1.19 not found (install golang-1.19-go) !!!!!!!!\n"
        );
        return;
    };
    let dir = temp_dir("go");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    for (service, file) in SOURCES {
        ingest(&store, service, file);
    }
    store.flush().unwrap();
    for (service, file) in SOURCES {
        let source = ember_pprof::decode(&std::fs::read(testdata(file)).unwrap()).unwrap();
        for (key, value) in label_values(&source).into_iter().take(12) {
            // `-raw` prints the samples left after the filter; the cpu value is the second
            // column of each sample line.
            let out = std::process::Command::new(&go)
                .args(["tool", "pprof", "-raw"])
                .arg(format!("-tagfocus={key}=^{value}$"))
                .arg(testdata(file))
                .env("HOME", dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let go_total: i64 = text
                .lines()
                .filter_map(|l| {
                    let (values, _) = l.split_once(':')?;
                    let v: Vec<i64> = values
                        .split_whitespace()
                        .map(|x| x.parse().ok())
                        .collect::<Option<_>>()?;
                    (v.len() == 2).then(|| v[1])
                })
                .sum();
            let merged = store.merge_stacks(
                "t",
                &query(&format!(
                    "{{service_name=\"{service}\", {key}=\"{value}\"}}"
                )),
            );
            assert_eq!(merged.total, go_total, "{service} {key}={value}");
            assert!(go_total > 0, "{service} {key}={value}");
        }
    }
}

#[test]
fn blocks_written_before_sample_labels_still_read() {
    let dir = temp_dir("v2");
    let dir = dir.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v2-store/blocks");
    std::fs::create_dir_all(dir.join("blocks")).unwrap();
    for e in std::fs::read_dir(&fixture).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join("blocks").join(e.file_name())).unwrap();
    }
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    let source = ember_pprof::decode(&std::fs::read(testdata(SOURCES[0].1)).unwrap()).unwrap();
    let merged = store.merge_stacks("anonymous", &query("{service_name=\"v2svc\"}"));
    let want = source_stacks(&source, |_| true);
    let got: BTreeMap<String, i64> = merged.folded().into_iter().collect();
    assert_eq!(got, want);
    // That build dropped sample labels: its profiles have none to select by.
    let span = store.merge_stacks(
        "anonymous",
        &query("{service_name=\"v2svc\", span_id=\"239\"}"),
    );
    assert_eq!(span.total, 0);
    // New data stored beside it keeps its sample labels.
    ingest(&store, "v2svc", SOURCES[0].1);
    store.flush().unwrap();
    let spans = store.merge_stacks("t", &query("{service_name=\"v2svc\", span_id=\"239\"}"));
    assert_eq!(spans.total, 710_000_000);
}

/// Blocks whose sections and rollups are gzip'd (written before zstd) read as they are,
/// through both the sections (`merge_stacks`) and the rollups (`merge_stacks_heavy`), and
/// a compaction rewrites them in the current codec with the same answers.
#[test]
fn gzip_blocks_still_read_and_compact_into_zstd() {
    let dir = temp_dir("v3gz");
    let dir = dir.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v3-gzip-store/blocks");
    std::fs::create_dir_all(dir.join("blocks")).unwrap();
    for e in std::fs::read_dir(&fixture).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join("blocks").join(e.file_name())).unwrap();
    }
    let source = ember_pprof::decode(&std::fs::read(testdata(SOURCES[1].1)).unwrap()).unwrap();
    let want = source_stacks(&source, |_| true);
    let read = |store: &Store| {
        let q = query("{service_name=\"v3svc\"}");
        let full: BTreeMap<String, i64> = store
            .merge_stacks("anonymous", &q)
            .folded()
            .into_iter()
            .collect();
        let heavy: BTreeMap<String, i64> = store
            .merge_stacks_heavy("anonymous", &q, 100_000)
            .folded()
            .into_iter()
            .collect();
        (full, heavy)
    };
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    let (full, heavy) = read(&store);
    assert_eq!(full, want, "sections");
    assert_eq!(heavy, want, "rollups");
    // Labels kept by that build still select.
    let span = store.merge_stacks("anonymous", &query("{service_name=\"v3svc\", pod=\"a\"}"));
    assert_eq!(span.total, want.values().sum::<i64>());
    // A second block in its day, then a profile two days later: the day is closed, and
    // its two blocks are compacted into one, written with zstd.
    ingest(&store, "other", SOURCES[0].1);
    store.flush().unwrap();
    let later = IngestProfile {
        labels: vec![("service_name".into(), "later".into())],
        time_nanos: TIME + 2 * 86_400 * 1_000_000_000,
        pprof: std::fs::read(testdata(SOURCES[0].1)).unwrap(),
        what: "profile".into(),
    };
    let batch = IngestBatch {
        profiles: vec![later],
    };
    store.ingest("t", batch).unwrap();
    store.flush().unwrap();
    assert!(
        store.compact().unwrap() >= 1,
        "the closed day's blocks merge"
    );
    let (full, heavy) = read(&store);
    assert_eq!(full, want, "sections after compaction");
    assert_eq!(heavy, want, "rollups after compaction");
    store.close();
    let blocks: Vec<_> = std::fs::read_dir(dir.join("blocks"))
        .unwrap()
        .flatten()
        .collect();
    let zstd = blocks.iter().any(|b| {
        let bytes = std::fs::read(b.path()).unwrap();
        bytes.windows(4).any(|w| w == [0x28, 0xb5, 0x2f, 0xfd])
    });
    assert!(zstd, "no zstd section written: {blocks:?}");
}

/// A block file with flipped bytes (index, trailer, gzip'd sections and rollups) never stops
/// the store from opening (a block whose index does not read is quarantined) and every read
/// over it answers: never a panic.
#[test]
fn corrupt_blocks_are_errors_never_panics() {
    let dir = temp_dir("corrupt-src");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    for (service, file) in SOURCES {
        ingest(&store, service, file);
    }
    store.flush().unwrap();
    store.close();
    drop(store);
    let blocks = dir.join("blocks");
    let entry = std::fs::read_dir(&blocks)
        .unwrap()
        .flatten()
        .next()
        .unwrap();
    let (name, original) = (entry.file_name(), std::fs::read(entry.path()).unwrap());
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut quarantined = 0;
    for round in 0..150 {
        let mut bytes = original.clone();
        // Most rounds hit the last quarter (index and trailer, not behind a gzip CRC).
        for _ in 0..1 + x % 3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = bytes.len();
            let at = if round % 4 == 0 {
                (x as usize) % len
            } else {
                len - 1 - (x as usize) % (len / 4)
            };
            bytes[at] = (x >> 40) as u8;
        }
        let copy = temp_dir("corrupt");
        let copy = copy.path();
        std::fs::create_dir_all(copy.join("blocks")).unwrap();
        std::fs::write(copy.join("blocks").join(&name), &bytes).unwrap();
        {
            let store = Store::open(copy, StoreOptions::default()).unwrap_or_else(|e| {
                panic!("round {round}: a corrupt block stopped the store: {e}")
            });
            quarantined += store.quarantined_blocks().len();
            for selector in ["{}", "{span_id=\"239\"}", "{service_name=\"labels\"}"] {
                let q = query(selector);
                let _ = store.merge_stacks("t", &q);
                let _ = store.merge_profile("t", &q);
                let _ = store.series_totals("t", &q, 60_000_000_000, &["span_id".into()]);
                let _ = store.series("t", Some(&q));
            }
            store.close();
        }
    }
    // Most flips land in the index or trailer; some land where nothing checks them (values,
    // times), and those blocks are served.
    assert!((1..150).contains(&quarantined), "{quarantined}");
}
