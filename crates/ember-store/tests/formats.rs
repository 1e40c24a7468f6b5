//! Blocks written by earlier builds stay readable: a block of the fourth format
//! (`EMBERBLK4`, time chunks beside the section's own profile columns; `tests/data/v4-store`)
//! answers every read as the same pushes stored by this build, before and after compaction
//! rewrites it and after a restart. Earlier formats are covered by `tiers.rs` and
//! `sample_labels.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ember_store::{IngestBatch, IngestProfile, Query, Store, StoreOptions, parse_selector};

const SECOND: i64 = 1_000_000_000;
const T0: i64 = 1_700_000_000 * SECOND;

/// The pushes the fixture's block holds: pod and seconds after [`T0`] (see
/// `tests/data/README.md`).
const PUSHES: [(&str, i64); 4] = [("a", 0), ("b", 300), ("a", 900), ("b", 1500)];

fn pprof() -> Vec<u8> {
    std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/corpora/pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof"),
    )
    .expect("corpus profile")
}

fn push(store: &Store, service: &str, pod: &str, time_nanos: i64) {
    let batch = IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![
                ("service_name".into(), service.into()),
                ("pod".into(), pod.into()),
            ],
            time_nanos,
            pprof: pprof(),
            what: "profile".into(),
        }],
    };
    store.ingest("anonymous", batch).expect("ingest");
}

/// A copy of the fixture store `name` under `dir` (a test never writes to the fixture).
fn copy_fixture(name: &str, dir: &Path) {
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::create_dir_all(dir.join("blocks")).unwrap();
    for e in std::fs::read_dir(fixture.join("blocks")).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join("blocks").join(e.file_name())).unwrap();
    }
}

/// Flame graph (whole and node-limited), pprof, totals per pod and listed profiles of the
/// fixture's service over ranges that cover whole sections, single time chunks and edges.
fn answers(store: &Store) -> Vec<String> {
    [(0, 2000), (200, 1000), (300, 300), (899, 1600), (0, 599)]
        .iter()
        .map(|&(a, b)| {
            let q = Query {
                selector: parse_selector("{service_name=\"v4svc\"}").unwrap(),
                profile_type: Some("cpu".into()),
                start_nanos: T0 + a * SECOND,
                end_nanos: T0 + b * SECOND,
            };
            let m = store.merge_stacks("anonymous", &q);
            let h = store.merge_stacks_heavy("anonymous", &q, 50);
            let pprof = store.merge_profile("anonymous", &q).map(|(p, m)| {
                let folded: BTreeMap<String, i64> =
                    ember_pprof::folded_stacks(&p, 0).into_iter().collect();
                (folded, m.total, m.profiles)
            });
            let totals = store.series_totals("anonymous", &q, 60 * SECOND, &["pod".into()]);
            let listed = store.list_profiles("anonymous", &q, 10);
            format!(
                "{:?} {} {}\n{:?} {}\n{pprof:?}\n{totals:?}\n{listed:?}",
                m.folded(),
                m.total,
                m.profiles,
                h.folded(),
                h.total
            )
        })
        .collect()
}

#[test]
fn fourth_format_blocks_answer_the_same_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture("v4-store", dir.path());
    let now_dir = tempfile::tempdir().unwrap();
    let now = Store::open(now_dir.path(), StoreOptions::default()).unwrap();
    for (pod, at) in PUSHES {
        push(&now, "v4svc", pod, T0 + at * SECOND);
    }
    now.flush().unwrap();
    let want = answers(&now);
    assert!(
        want[0].contains("Some"),
        "the pprof answer is there: {}",
        want[0]
    );
    let old = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(answers(&old), want, "read as the previous build wrote it");
    // A second block in the fixture's day, then data two days on closes that day: its two
    // blocks (one of the fourth format, one of this build's) merge into one.
    push(&old, "other", "p", T0 + 3000 * SECOND);
    old.flush().unwrap();
    push(&old, "later", "p", T0 + 2 * 86_400 * SECOND);
    old.flush().unwrap();
    assert_eq!(
        old.compact().unwrap(),
        2,
        "the closed day's two blocks merge"
    );
    assert_eq!(answers(&old), want, "compacted");
    old.close();
    drop(old);
    let old = Store::open(dir.path(), StoreOptions::default()).unwrap();
    assert_eq!(answers(&old), want, "compacted, reopened");
}
