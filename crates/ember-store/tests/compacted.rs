//! Profiles stored once (blocks whose time chunks hold the profile columns, not the
//! section): flushed often, compacted and reopened, every read answers as one head holding
//! all the profiles does — flame graphs (whole and node-limited, so top tables), pprof
//! output, totals over time grouped by a series label and by a sample label, sample-label
//! filters, averaged series, listed profiles — over seeded generated profiles.

use std::collections::BTreeMap;

use ember_store::{
    AGGREGATION_LABEL, AVERAGE, IngestBatch, IngestProfile, Query, Store, StoreOptions,
    parse_selector,
};

/// xorshift64*: seeded, so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

const NAMES: [&str; 9] = [
    "main", "run", "serve", "decode", "encode", "hash", "gc", "lock", "io",
];

/// A profile of a few random stacks whose samples carry a span id, a thread name, both or
/// neither.
fn profile(rng: &mut Rng) -> Vec<u8> {
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    for _ in 0..1 + rng.below(10) {
        let depth = 1 + rng.below(5) as usize;
        let stack: Vec<&str> = (0..depth)
            .map(|i| match i {
                0 => "main",
                _ => NAMES[rng.below(NAMES.len() as u64) as usize],
            })
            .collect();
        b.add_folded_stack(&stack, &[(1 + rng.below(40) as i64) * 10_000_000]);
    }
    let mut p = b.build();
    for i in 0..p.sample.len() {
        let mut labels: Vec<(&str, String)> = Vec::new();
        if rng.below(3) != 0 {
            labels.push(("span_id", format!("s{}", rng.below(4))));
        }
        if rng.below(2) == 0 {
            labels.push(("thread_name", ["w1", "w2"][rng.below(2) as usize].into()));
        }
        for (k, v) in labels {
            let key = intern(&mut p, k);
            let str = intern(&mut p, &v);
            p.sample[i].label.push(ember_pprof::Label {
                key,
                str,
                ..Default::default()
            });
        }
    }
    ember_pprof::encode(&p)
}

fn intern(p: &mut ember_pprof::Profile, s: &str) -> i64 {
    match p.string_table.iter().position(|x| x == s) {
        Some(i) => i as i64,
        None => {
            p.string_table.push(s.to_string());
            p.string_table.len() as i64 - 1
        }
    }
}

fn batch(pprof: Vec<u8>, service: &str, pod: &str, averaged: bool, time: i64) -> IngestBatch {
    let mut labels = vec![
        ("service_name".to_string(), service.to_string()),
        ("pod".to_string(), pod.to_string()),
    ];
    if averaged {
        labels.push((AGGREGATION_LABEL.into(), AVERAGE.into()));
    }
    IngestBatch {
        profiles: vec![IngestProfile {
            labels,
            time_nanos: time,
            pprof,
            what: "profile".into(),
        }],
    }
}

const MINUTE: i64 = 60_000_000_000;

/// How many of [`queries`] (the first) read averaged series. Their means are rounded per
/// section read (so by one unit apart between one head and blocks, as before this format:
/// averaged series keep their columns in the section); they are compared before and after
/// a restart, not with the one head.
const AVERAGED: usize = 5;

/// The queries; the first [`AVERAGED`] read the averaged series (alone or with others).
fn queries() -> Vec<Query> {
    let q = |selector: &str, start: i64, end: i64| Query {
        selector: parse_selector(selector).unwrap(),
        profile_type: Some("cpu".into()),
        start_nanos: start,
        end_nanos: end,
    };
    vec![
        q("{}", 0, i64::MAX),
        q("{service_name=\"mem\"}", 0, i64::MAX),
        q("{service_name=\"mem\"}", 30 * MINUTE, 70 * MINUTE),
        q("{span_id=\"s1\"}", 0, i64::MAX),
        q("{span_id!=\"s2\", thread_name!~\"w1\"}", 0, i64::MAX),
        q("{service_name=\"api\"}", 0, i64::MAX),
        q("{service_name=\"api\"}", 25 * MINUTE, 95 * MINUTE),
        q(
            "{service_name=\"db\", pod=\"p1\"}",
            10 * MINUTE,
            40 * MINUTE,
        ),
        q(
            "{service_name=\"api\", thread_name=\"w2\"}",
            5 * MINUTE,
            80 * MINUTE,
        ),
    ]
}

/// Everything a read says about `q`, comparable: the exact reads, then the node-limited
/// flame graph (top tables), whose choice of small frames depends on how the profiles are
/// split between blocks (so it is compared once they are in one block).
fn answers(store: &Store, q: &Query) -> (String, String) {
    let m = store.merge_stacks("t", q);
    let top = store.merge_stacks_heavy("t", q, 6);
    let pprof = store.merge_profile("t", q).map(|(p, m)| {
        let folded: BTreeMap<String, i64> = ember_pprof::folded_stacks(&p, 0).into_iter().collect();
        (folded, m.total, m.profiles, m.series)
    });
    // Zero points dropped: a block's read of a sample-label filter lists a profile none of
    // whose samples match as a zero, the head's leaves it out (not a question of format).
    let totals = |by: &str| -> Vec<(ember_store::Labels, Vec<(i64, i64)>)> {
        store
            .series_totals("t", q, 7 * MINUTE, &[by.to_string()])
            .into_iter()
            .map(|s| {
                (
                    s.labels,
                    s.points.into_iter().filter(|p| p.1 != 0).collect(),
                )
            })
            .collect()
    };
    let (by_pod, by_span) = (totals("pod"), totals("span_id"));
    let listed = store.list_profiles("t", q, 9);
    (
        format!(
            "{:?} {} {} {}\n{pprof:?}\n{by_pod:?}\n{by_span:?}\n{listed:?}",
            m.folded(),
            m.total,
            m.profiles,
            m.series,
        ),
        format!("top {:?} {}", top.folded(), top.total),
    )
}

#[test]
fn profiles_stored_once_answer_as_one_head_through_flushes_compaction_and_restart() {
    for seed in [1u64, 2, 3] {
        let one_dir = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let one = Store::open(one_dir.path(), StoreOptions::default()).unwrap();
        let mut store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        // Two hours of three services (one averaged), several pods; a flush every few
        // profiles as a live server's timer does, so blocks hold parts of ten-minute chunks.
        for i in 0..150i64 {
            let service = ["api", "db", "mem"][rng.below(3) as usize];
            let pod = format!("p{}", rng.below(3));
            let time = i * MINUTE * 4 / 5 + rng.below(30) as i64 * 1_000_000_000;
            let pprof = profile(&mut rng);
            for s in [&one, &store] {
                let b = batch(pprof.clone(), service, &pod, service == "mem", time);
                s.ingest("t", b).unwrap();
            }
            if rng.below(4) == 0 {
                store.flush().unwrap();
            }
        }
        // A profile two days on closes the day, so compaction merges all of it.
        for s in [&one, &store] {
            let b = batch(
                profile(&mut Rng(seed)),
                "later",
                "p0",
                false,
                2 * 1440 * MINUTE,
            );
            s.ingest("t", b).unwrap();
        }
        store.flush().unwrap();
        let want: Vec<(String, String)> = queries().iter().map(|q| answers(&one, q)).collect();
        // The summed series' exact reads against the one head. (A node-limited read picks
        // its small frames by the parts it merges, which differ between one head and blocks:
        // it is compared across the restart below.)
        let check = |store: &Store, when: &str| {
            for (q, w) in queries().iter().zip(&want).skip(AVERAGED) {
                assert_eq!(answers(store, q).0, w.0, "seed {seed}, {when}, {q:?}");
            }
        };
        check(&store, "flushed");
        assert!(store.disk_usage().0 > 5, "seed {seed}: many small blocks");
        store.compact().unwrap();
        let blocks = store.disk_usage().0;
        assert_eq!(
            blocks, 2,
            "seed {seed}: the day in one block, and the later one"
        );
        check(&store, "compacted");
        // Every query, averaged series too, answers the same after a restart.
        let compacted: Vec<(String, String)> =
            queries().iter().map(|q| answers(&store, q)).collect();
        store.close();
        drop(store);
        store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        check(&store, "reopened");
        for (q, w) in queries().iter().zip(&compacted) {
            assert_eq!(&answers(&store, q), w, "seed {seed}, reopened, {q:?}");
        }
    }
}

/// A flushed block stores each profile once: its section holds no per-profile columns (the
/// fourth format's section held them all, and its chunks again), its time chunks hold them
/// with their node maps.
#[test]
fn a_flushed_block_stores_each_profile_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let mut rng = Rng(0x5eed);
    for i in 0..40i64 {
        let b = batch(profile(&mut rng), "api", "p0", false, i * MINUTE / 6);
        store.ingest("t", b).unwrap();
    }
    store.flush().unwrap();
    let block = std::fs::read_dir(dir.path().join("blocks"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "blk"))
        .unwrap();
    let parts: BTreeMap<String, u64> = ember_store::block_breakdown(&std::fs::read(block).unwrap())
        .expect("a block of the current format")
        .into_iter()
        .collect();
    assert!(
        !parts.contains_key("head: series and profile columns"),
        "{parts:?}"
    );
    let columns = parts["time chunks: profile columns (nodes, values, set ids)"];
    let maps = parts["time chunks: stack node to frame maps"];
    let section = parts["head: series, times and the sample label set table"];
    assert!(columns > 0 && maps > 0 && section < columns, "{parts:?}");
}
