//! The tiers (open head, blocks, compacted blocks) answer every read exactly as one head
//! holding all the profiles would: a seeded property test over generated profiles with
//! flushes, compactions and restarts at random points; flushes racing ingest lose and
//! duplicate nothing; a store of weeks of blocks opens without reading them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ember_store::{IngestBatch, IngestProfile, Query, Store, StoreOptions, parse_selector};
use tempfile::TempDir;

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-tiers-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// Two fresh stores for one seed of a property test: the reference that only ever holds one
/// head, and the one flushed, compacted and reopened (`<prefix>one-<seed>`,
/// `<prefix>tiers-<seed>`).
fn paired_stores(prefix: &str, seed: u64) -> (TempDir, Store, TempDir, Store) {
    let one_dir = temp_dir(&format!("{prefix}one-{seed}"));
    let tiers_dir = temp_dir(&format!("{prefix}tiers-{seed}"));
    let one = Store::open(one_dir.path(), StoreOptions::default()).unwrap();
    let tiers = Store::open(tiers_dir.path(), StoreOptions::default()).unwrap();
    (one_dir, one, tiers_dir, tiers)
}

/// xorshift64*: a small seeded generator, so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const FRAMES: [&str; 12] = [
    "main",
    "serve",
    "handle",
    "parse",
    "json.Unmarshal",
    "gc",
    "alloc",
    "write",
    "read",
    "hash",
    "compress",
    "sort",
];

/// A CPU profile of a few random stacks (with shared prefixes and repeats).
fn profile(rng: &mut Rng) -> Vec<u8> {
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    for _ in 0..1 + rng.below(12) {
        let depth = 1 + rng.below(6) as usize;
        let frames: Vec<&str> = (0..depth)
            .map(|i| {
                if i == 0 {
                    "main"
                } else {
                    FRAMES[rng.below(FRAMES.len() as u64) as usize]
                }
            })
            .collect();
        b.add_folded_stack(&frames, &[(1 + rng.below(50) as i64) * 10_000_000]);
    }
    let mut p = b.build();
    // Sample labels as a traced service has them: most samples in a span, some with an
    // endpoint, a few carrying a label twice.
    let string = |p: &mut ember_pprof::Profile, s: &str| -> i64 {
        match p.string_table.iter().position(|x| x == s) {
            Some(i) => i as i64,
            None => {
                p.string_table.push(s.to_string());
                p.string_table.len() as i64 - 1
            }
        }
    };
    for i in 0..p.sample.len() {
        let mut labels = Vec::new();
        if rng.below(3) != 0 {
            labels.push(("span_id", format!("s{}", rng.below(5))));
        }
        if rng.below(2) == 0 {
            labels.push(("endpoint", ["/a", "/b"][rng.below(2) as usize].to_string()));
        }
        if rng.below(8) == 0 {
            labels.push(("endpoint", "/c".to_string()));
        }
        for (k, v) in labels {
            let label = ember_pprof::Label {
                key: string(&mut p, k),
                str: string(&mut p, &v),
                ..Default::default()
            };
            p.sample[i].label.push(label);
        }
    }
    ember_pprof::encode(&p)
}

fn batch(pprof: Vec<u8>, service: &str, pod: &str, time_nanos: i64) -> IngestBatch {
    IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![
                ("service_name".into(), service.into()),
                ("pod".into(), pod.into()),
            ],
            time_nanos,
            pprof,
            what: "profile".into(),
        }],
    }
}

fn query(selector: &str, start: i64, end: i64) -> Query {
    Query {
        selector: parse_selector(selector).unwrap(),
        profile_type: Some("cpu".into()),
        start_nanos: start,
        end_nanos: end,
    }
}

/// Everything a read can say about `q`, in comparable form.
fn answers(store: &Store, q: &Query) -> String {
    let merged = store.merge_stacks("t", q);
    let stacks: Vec<(String, i64)> = merged.folded().into_iter().collect();
    let pprof = store.merge_profile("t", q).map(|(p, m)| {
        let folded: BTreeMap<String, i64> = ember_pprof::folded_stacks(&p, 0).into_iter().collect();
        (folded, m.total, m.profiles, m.series)
    });
    let totals = store.series_totals("t", q, 7_000, &["pod".to_string()]);
    let by_span = store.series_totals("t", q, 7_000, &["span_id".to_string()]);
    let series = store.series("t", Some(q));
    let pods = store.label_values("t", "pod", Some(q));
    let listed = store.list_profiles("t", q, 7);
    format!(
        "stacks {stacks:?}\ntotal {} profiles {} series {}\npprof {pprof:?}\ntotals {totals:?}\nby span {by_span:?}\nseries {series:?}\npods {pods:?}\nlisted {listed:?}",
        merged.total, merged.profiles, merged.series
    )
}

fn queries() -> Vec<Query> {
    vec![
        query("{}", 0, i64::MAX),
        query("{service_name=\"api\"}", 0, i64::MAX),
        query("{service_name=\"db\", pod=\"p1\"}", 10_000, 40_000),
        query("{pod=~\"p[02]\"}", 25_000, 25_000),
        query("{service_name=\"none\"}", 0, i64::MAX),
        query("{span_id=\"s1\"}", 0, i64::MAX),
        query("{service_name=\"api\", endpoint=\"/a\"}", 5_000, 50_000),
        query("{span_id!=\"s2\", endpoint!~\"/[ab]\"}", 0, i64::MAX),
        query("{pod=\"p1\", span_id=~\"s[13]\"}", 0, i64::MAX),
    ]
}

#[test]
fn tiers_and_compaction_answer_like_one_head() {
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let (_one_dir, one, tiers_dir, mut tiers) = paired_stores("", seed);
        let mut events = Vec::new();
        for i in 0..40 {
            let service = ["api", "db"][rng.below(2) as usize];
            let pod = format!("p{}", rng.below(3));
            // Times wander back and forth: blocks overlap in time, as late data makes them.
            let time = 1_000 * (1 + i as i64 + rng.below(20) as i64);
            let pprof = profile(&mut rng);
            one.ingest("t", batch(pprof.clone(), service, &pod, time))
                .unwrap();
            tiers
                .ingest("t", batch(pprof, service, &pod, time))
                .unwrap();
            match rng.below(10) {
                0..=1 => {
                    tiers.flush().unwrap();
                    events.push(format!("flush@{i}"));
                }
                2 => {
                    tiers.compact().unwrap();
                    events.push(format!("compact@{i}"));
                }
                3 => {
                    tiers.close();
                    drop(tiers);
                    tiers = Store::open(tiers_dir.path(), StoreOptions::default()).unwrap();
                    events.push(format!("reopen@{i}"));
                }
                _ => {}
            }
        }
        for q in queries() {
            assert_eq!(
                answers(&tiers, &q),
                answers(&one, &q),
                "seed {seed}, events {events:?}, query {q:?}"
            );
        }
        // Compacted until no size class holds four blocks, then reopened: the same answers.
        tiers.flush().unwrap();
        tiers.compact().unwrap();
        assert!(
            tiers.disk_usage().0 < 4,
            "seed {seed}: compaction left {:?}",
            tiers.disk_usage()
        );
        tiers.close();
        drop(tiers);
        let tiers = Store::open(tiers_dir.path(), StoreOptions::default()).unwrap();
        for q in queries() {
            assert_eq!(
                answers(&tiers, &q),
                answers(&one, &q),
                "seed {seed} compacted"
            );
        }
    }
}

#[test]
fn flushes_racing_ingest_lose_and_duplicate_nothing() {
    let dir = temp_dir("race");
    let dir = dir.path();
    let store = Arc::new(Store::open(dir, StoreOptions::default()).unwrap());
    let mut rng = Rng(7);
    let pprof = profile(&mut rng);
    let per_profile = {
        let p = ember_pprof::decode(&pprof).unwrap();
        p.sample.iter().map(|s| s.value[0]).sum::<i64>()
    };
    let done = Arc::new(AtomicBool::new(false));
    let flusher = {
        let (store, done) = (store.clone(), done.clone());
        std::thread::spawn(move || {
            let mut flushes = 0;
            while !done.load(Ordering::Relaxed) {
                store.flush().unwrap();
                flushes += 1;
                if flushes % 5 == 0 {
                    store.compact().unwrap();
                }
            }
            flushes
        })
    };
    let (writers, each) = (4, 150);
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (store, pprof) = (store.clone(), pprof.clone());
            std::thread::spawn(move || {
                for i in 0..each {
                    // A new tenant now and then, so tenants appear while a flush cuts.
                    let tenant = if i % 50 == 0 {
                        format!("t{w}-{i}")
                    } else {
                        "t".into()
                    };
                    store
                        .ingest(&tenant, batch(pprof.clone(), "api", "p", 1 + i as i64))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let flushes = flusher.join().unwrap();
    assert!(flushes > 1, "the flusher ran {flushes} times");
    let count = |store: &Store| -> (usize, i64) {
        let mut profiles = 0;
        let mut total = 0;
        for t in store.tenants() {
            let m = store.merge_stacks(&t, &query("{}", 0, i64::MAX));
            profiles += m.profiles;
            total += m.total;
        }
        (profiles, total)
    };
    let want = (writers * each, (writers * each) as i64 * per_profile);
    assert_eq!(count(&store), want, "live, after {flushes} flushes");
    store.close();
    drop(store);
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(count(&store), want, "after reopening");
}

#[test]
fn weeks_of_blocks_open_from_their_index_alone() {
    let dir = temp_dir("weeks");
    let dir = dir.path();
    let hour = 3_600_000_000_000i64;
    let start = 1_700_000_000_000_000_000i64;
    let hours = 24 * 21;
    {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        let mut rng = Rng(11);
        for h in 0..hours {
            store
                .ingest("t", batch(profile(&mut rng), "api", "p", start + h * hour))
                .unwrap();
            // Four hours a block: 126 blocks over three weeks.
            if h % 4 == 3 {
                store.flush().unwrap();
            }
        }
        store.close();
    }
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(store.disk_usage().0, (hours / 4) as usize);
    // Nothing decoded at open.
    assert_eq!(store.cache_stats().0, 0);
    // Listings come from the indexes, still without decoding.
    assert_eq!(store.label_values("t", "pod", None), vec!["p".to_string()]);
    assert_eq!(store.cache_stats().0, 0);
    // One hour's flame graph reads the one block holding it.
    let q = query("{}", start + 50 * hour, start + 50 * hour);
    assert_eq!(store.merge_stacks("t", &q).profiles, 1);
    assert_eq!(store.cache_stats().0, 1);
    // A week covers its 42 blocks whole: it reads their rollups, not their sections, and
    // the answer is the sum of its hours.
    let week = query("{}", start, start + 7 * 24 * hour - 1);
    let merged = store.merge_stacks("t", &week);
    assert_eq!(merged.profiles, 7 * 24);
    let (held, _, _, misses) = store.cache_stats();
    assert_eq!(
        misses,
        1 + 42,
        "the hour's section, then one rollup per block of the week"
    );
    assert_eq!(held, 43);
    let mut by_hours: BTreeMap<String, i64> = BTreeMap::new();
    for h in 0..7 * 24 {
        let hour_q = query("{}", start + h * hour, start + h * hour);
        for (f, v) in store.merge_stacks("t", &hour_q).stacks() {
            *by_hours.entry(f.join(";")).or_insert(0) += v;
        }
    }
    let week_stacks: BTreeMap<String, i64> = merged.folded().into_iter().collect();
    assert_eq!(week_stacks, by_hours);
}

#[test]
fn a_crash_between_compaction_and_deleting_its_inputs_counts_nothing_twice() {
    let dir = temp_dir("crash");
    let dir = dir.path();
    let mut rng = Rng(5);
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    for i in 0..8 {
        store
            .ingest("t", batch(profile(&mut rng), "api", "p", 1_000 * (i + 1)))
            .unwrap();
        store.flush().unwrap();
    }
    let all = query("{}", 0, i64::MAX);
    let before = answers(&store, &all);
    let blocks = dir.join("blocks");
    let saved: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&blocks)
        .unwrap()
        .flatten()
        .map(|e| (e.path(), std::fs::read(e.path()).unwrap()))
        .collect();
    assert_eq!(saved.len(), 8);
    assert!(store.compact().unwrap() >= 4);
    assert_eq!(answers(&store, &all), before);
    store.close();
    drop(store);
    // As if the process died before deleting the inputs: they are all back.
    for (path, bytes) in &saved {
        std::fs::write(path, bytes).unwrap();
    }
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(answers(&store, &all), before);
    assert!(store.disk_usage().0 < 8, "replaced inputs deleted at open");
}

#[test]
fn first_format_blocks_are_rewritten_and_answer_the_same() {
    let dir = temp_dir("v1");
    let dir = dir.path();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/v1-store/blocks");
    std::fs::create_dir_all(dir.join("blocks")).unwrap();
    let name = "0000000002-1700000000000000000-1700000100000000000.blk";
    std::fs::copy(fixture.join(name), dir.join("blocks").join(name)).unwrap();
    let input = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/corpora/pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof"),
    )
    .unwrap();
    let input = ember_pprof::decode(&input).unwrap();
    let cpu = ember_pprof::sample_index(&input, Some("cpu")).unwrap();
    let mut want: Vec<(String, i64)> = ember_pprof::folded_stacks(&input, cpu);
    want.sort();
    for _ in 0..2 {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        let mut tenants = store.tenants();
        tenants.sort();
        assert_eq!(tenants.len(), 2, "{tenants:?}");
        for (tenant, pod) in tenants.iter().zip(["a", "b"]).rev() {
            let q = query(
                &format!("{{service_name=\"v1svc\", pod=\"{pod}\"}}"),
                0,
                i64::MAX,
            );
            let merged = store.merge_stacks(tenant, &q);
            let mut got: Vec<(String, i64)> = merged.folded().into_iter().collect();
            got.sort();
            if merged.profiles == 0 {
                continue;
            }
            assert_eq!(got, want, "tenant {tenant}");
        }
        let total: usize = tenants
            .iter()
            .map(|t| store.merge_stacks(t, &query("{}", 0, i64::MAX)).profiles)
            .sum();
        assert_eq!(total, 2);
        store.close();
    }
    let bytes = std::fs::read(dir.join("blocks").join(name)).unwrap();
    assert!(
        bytes.starts_with(b"EMBERBLK5\n"),
        "rewritten in the current format"
    );
}

#[test]
fn a_closed_day_compacts_into_one_block_with_the_same_answers() {
    let dir = temp_dir("closed-day");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    let hour = 3_600_000_000_000i64;
    // A UTC midnight.
    let day0 = 1_700_006_400_000_000_000i64;
    let mut rng = Rng(21);
    for i in 0..3 {
        for h in 0..4 {
            let t = day0 + (i * 8 + h) * hour;
            store
                .ingest("t", batch(profile(&mut rng), "api", "p", t))
                .unwrap();
        }
        store.flush().unwrap();
    }
    let queries = [
        query("{}", day0, day0 + 24 * hour - 1),
        query("{}", day0 + 9 * hour, day0 + 9 * hour),
        query("{span_id=\"s1\"}", day0, day0 + 24 * hour - 1),
    ];
    let before: Vec<String> = queries.iter().map(|q| answers(&store, q)).collect();
    // Still the newest day: three small blocks stay as they are.
    store.compact().unwrap();
    assert_eq!(store.disk_usage().0, 3);
    // Data of the next day, less than an hour past midnight: not closed yet.
    store
        .ingest(
            "t",
            batch(profile(&mut rng), "api", "p", day0 + 24 * hour + 1),
        )
        .unwrap();
    store.flush().unwrap();
    store.compact().unwrap();
    assert_eq!(store.disk_usage().0, 4);
    // Two hours into the next day: the first day's three blocks become one.
    store
        .ingest("t", batch(profile(&mut rng), "api", "p", day0 + 26 * hour))
        .unwrap();
    store.flush().unwrap();
    assert_eq!(
        store.compact().unwrap(),
        3,
        "its three blocks replaced by one"
    );
    assert_eq!(
        store.disk_usage().0,
        3,
        "one block for the closed day, two for the next"
    );
    let after: Vec<String> = queries.iter().map(|q| answers(&store, q)).collect();
    assert_eq!(after, before);
    store.close();
    drop(store);
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    let reopened: Vec<String> = queries.iter().map(|q| answers(&store, q)).collect();
    assert_eq!(reopened, before);
}

/// A store in a fresh directory (`tag`) holding `blocks` blocks of random profiles (seed
/// `seed`): four hours each, three pods of one service an hour, one flush a block. Returns
/// the directory, closed, and the query over all of it.
fn flushed_blocks(tag: &str, seed: u64, blocks: i64) -> (TempDir, Query) {
    let dir = temp_dir(tag);
    let hour = 3_600_000_000_000i64;
    let start = 1_700_000_000_000_000_000i64;
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let mut rng = Rng(seed);
    for b in 0..blocks {
        for h in 0..4 {
            let t = start + (b * 4 + h) * hour;
            for pod in ["p0", "p1", "p2"] {
                let p = profile(&mut rng);
                store.ingest("t", batch(p, "api", pod, t)).unwrap();
            }
        }
        store.flush().unwrap();
    }
    store.close();
    (dir, query("{}", start, start + blocks * 4 * hour))
}

/// A week read again and again whose rollups exceed the cache's budget still finds part of
/// them cached: the scan does not flush out what the next scan needs first (plain LRU
/// would miss every time).
#[test]
fn repeated_wide_reads_beyond_the_cache_budget_hit() {
    let blocks = 12;
    let (dir, all) = flushed_blocks("scan", 5, blocks);
    // The rollups' size, from a store that holds them all.
    let bytes = {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        store.merge_stacks("t", &all);
        let (held, bytes, _, _) = store.cache_stats();
        assert_eq!(held, blocks as usize);
        bytes
    };
    let options = StoreOptions {
        cache_bytes: bytes / 2,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options).unwrap();
    let want = store.merge_stacks("t", &all).folded();
    let mut misses_before = store.cache_stats().3;
    for round in 1..=3 {
        assert_eq!(store.merge_stacks("t", &all).folded(), want);
        let (_, held_bytes, hits, misses) = store.cache_stats();
        assert!(held_bytes <= bytes / 2, "round {round}: over the budget");
        let missed = misses - misses_before;
        misses_before = misses;
        assert!(
            missed < blocks as u64 - 2,
            "round {round}: {missed} of {blocks} rollups missed ({hits} hits so far)"
        );
    }
}

/// A node-limited merge over more rollups than the cache holds reads each rollup once: pass 2
/// reads the frames pass 1 packed (a few bytes a frame) instead of decoding the rollups
/// again, which made up a third of a cold week's flame graph. Its answer is the full merge's
/// (ember-query's `tests/heavy.rs` compares the cut trees).
#[test]
fn a_node_limited_wide_read_decodes_each_rollup_once() {
    let blocks = 12;
    let (dir, all) = flushed_blocks("once", 11, blocks);
    let bytes = {
        let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        store.merge_stacks("t", &all);
        store.cache_stats().1
    };
    // The cache holds half of the rollups: the others leave it during pass 1.
    let options = StoreOptions {
        cache_bytes: bytes / 2,
        ..StoreOptions::default()
    };
    let store = Store::open(dir.path(), options).unwrap();
    let heavy = store.merge_stacks_heavy("t", &all, 4);
    let missed = store.cache_stats().3;
    assert_eq!(
        missed, blocks as u64,
        "each of {blocks} rollups decoded once, not {missed} times"
    );
    let full = store.merge_stacks("t", &all);
    assert_eq!(heavy.total, full.total);
    assert_eq!(heavy.profiles, full.profiles);
}

/// `(stacks, total, profiles, series)` of a flame graph merge.
type FlameAnswer = (BTreeMap<String, i64>, i64, usize, usize);

fn flame(store: &Store, q: &Query) -> FlameAnswer {
    let m = store.merge_stacks("t", q);
    (
        m.folded().into_iter().collect(),
        m.total,
        m.profiles,
        m.series,
    )
}

/// Flame graphs of any part of the stored time, read from blocks' time chunks (ten-minute
/// windows of a series) with their edges cut profile by profile, equal one head's: seeded
/// over profiles spread across three hours, with flushes, compactions and a reopen (the
/// chunks then come from disk). A node-limited merge keeps the full merge's values.
#[test]
fn narrow_reads_from_time_chunks_answer_like_one_head() {
    let minute = 60_000_000_000i64;
    // A UTC midnight: compaction keeps the store's one day together.
    let t0 = 1_700_006_400_000_000_000i64;
    for seed in 1..=6u64 {
        let mut rng = Rng(seed.wrapping_mul(0x51_7cc1_b727_220a) | 1);
        let (_one_dir, one, tiers_dir, mut tiers) = paired_stores("chunks-", seed);
        for i in 0..90i64 {
            let service = ["api", "db"][rng.below(2) as usize];
            let pod = format!("p{}", rng.below(3));
            let time = t0 + i * 2 * minute + rng.below(3 * minute as u64) as i64;
            let pprof = profile(&mut rng);
            one.ingest("t", batch(pprof.clone(), service, &pod, time))
                .unwrap();
            tiers
                .ingest("t", batch(pprof, service, &pod, time))
                .unwrap();
            match rng.below(15) {
                0 => drop(tiers.flush().unwrap()),
                1 => drop(tiers.compact().unwrap()),
                _ => {}
            }
        }
        tiers.flush().unwrap();
        let mut queries = Vec::new();
        for _ in 0..20 {
            let a = t0 - 10 * minute + rng.below(200 * minute as u64) as i64;
            let b = a + rng.below(100 * minute as u64) as i64;
            for sel in ["{}", "{service_name=\"api\"}", "{pod=\"p1\"}"] {
                queries.push(query(sel, a, b));
            }
        }
        for reopened in [false, true] {
            for q in &queries {
                let want = flame(&one, q);
                assert_eq!(flame(&tiers, q), want, "seed {seed}, {q:?}");
                let heavy = tiers.merge_stacks_heavy("t", q, 5);
                assert_eq!(heavy.total, want.1, "seed {seed}, {q:?}");
                for (stack, v) in heavy.folded() {
                    assert_eq!(want.0.get(&stack), Some(&v), "seed {seed}, {q:?}");
                }
            }
            tiers.close();
            drop(tiers);
            tiers = Store::open(tiers_dir.path(), StoreOptions::default()).unwrap();
            let _ = reopened;
        }
    }
}

/// An hour's flame graph inside a day's section decodes the hour's time chunks, not the
/// section: what it leaves in the cache is a small part of the decoded section.
#[test]
fn an_hour_inside_a_day_section_decodes_only_its_chunks() {
    let dir = temp_dir("hour-of-day");
    let dir = dir.path();
    let minute = 60_000_000_000i64;
    let t0 = 1_700_006_400_000_000_000i64;
    {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        let mut rng = Rng(5);
        for i in 0..24 * 12 {
            store
                .ingest(
                    "t",
                    batch(profile(&mut rng), "api", "p", t0 + i * 5 * minute),
                )
                .unwrap();
        }
        store.flush().unwrap();
        store.close();
    }
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(store.disk_usage().0, 1, "one block for the day");
    let hour = query("{}", t0 + 12 * 60 * minute, t0 + 13 * 60 * minute - 1);
    let merged = store.merge_stacks("t", &hour);
    assert_eq!(merged.profiles, 12);
    let (held, chunk_bytes, _, _) = store.cache_stats();
    assert_eq!(held, 6, "the hour's six ten-minute chunks");
    // The pprof of the hour needs locations: it decodes the section.
    let (pprof, _) = store.merge_profile("t", &hour).unwrap();
    let from_head: BTreeMap<String, i64> =
        ember_pprof::folded_stacks(&pprof, 0).into_iter().collect();
    let from_chunks: BTreeMap<String, i64> = merged.folded().into_iter().collect();
    assert_eq!(from_head, from_chunks);
    let (_, with_head, _, _) = store.cache_stats();
    assert!(
        chunk_bytes * 5 < with_head - chunk_bytes,
        "chunks {chunk_bytes} bytes, the section {} bytes",
        with_head - chunk_bytes
    );
}

/// A store written by the previous build (`EMBERBLK3`, no time chunks; see
/// `tests/data/README.md`) answers narrow and whole reads as the same pushes stored now,
/// and compaction rewrites it with chunks and the same answers.
#[test]
fn blocks_without_time_chunks_answer_the_same_and_compact_into_chunks() {
    let dir = temp_dir("v3-zstd");
    let dir = dir.path();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/v3-zstd-store");
    std::fs::create_dir_all(dir.join("blocks")).unwrap();
    for e in std::fs::read_dir(fixture.join("blocks")).unwrap().flatten() {
        std::fs::copy(e.path(), dir.join("blocks").join(e.file_name())).unwrap();
    }
    let pprof = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/corpora/pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof"),
    )
    .unwrap();
    let now_dir = temp_dir("v3-zstd-now");
    let now_dir = now_dir.path();
    let now = Store::open(now_dir, StoreOptions::default()).unwrap();
    let s = 1_000_000_000i64;
    let t0 = 1_700_000_000 * s;
    for (pod, at) in [("a", 0), ("b", 300), ("a", 900), ("b", 1500)] {
        let b = batch(pprof.clone(), "v3zsvc", pod, t0 + at * s);
        now.ingest("anonymous", b).unwrap();
    }
    now.flush().unwrap();
    let answers = |store: &Store| -> Vec<(BTreeMap<String, i64>, i64, usize)> {
        [(0, 2000), (200, 1000), (300, 300), (899, 1600)]
            .iter()
            .flat_map(|(a, b)| {
                let q = Query {
                    selector: parse_selector("{service_name=\"v3zsvc\"}").unwrap(),
                    profile_type: Some("cpu".into()),
                    start_nanos: t0 + a * s,
                    end_nanos: t0 + b * s,
                };
                let m = store.merge_stacks("anonymous", &q);
                let h = store.merge_stacks_heavy("anonymous", &q, 50);
                [
                    (m.folded().into_iter().collect(), m.total, m.profiles),
                    (h.folded().into_iter().collect(), h.total, h.profiles),
                ]
            })
            .collect()
    };
    let want = answers(&now);
    assert!(want[2].1 > 0 && want[2].2 == 2, "{:?}", want[2]);
    let old = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(answers(&old), want, "read as written by the previous build");
    // A second block in its day, then the day closes (data two days on): its two blocks
    // are compacted into one, with chunks.
    let other = batch(pprof.clone(), "other", "p", t0 + 3000 * s);
    old.ingest("anonymous", other).unwrap();
    old.flush().unwrap();
    let later = batch(pprof.clone(), "later", "p", t0 + 2 * 86_400 * s);
    old.ingest("anonymous", later).unwrap();
    old.flush().unwrap();
    assert_eq!(
        old.compact().unwrap(),
        2,
        "the closed day's two blocks merge"
    );
    assert_eq!(answers(&old), want, "compacted");
    old.close();
    drop(old);
    let old = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(answers(&old), want, "compacted, reopened");
}

/// A day of many small blocks, compacted (streamed merge): every read answers as before.
#[test]
fn a_day_of_small_blocks_compacted_answers_as_before() {
    let dir = temp_dir("small-day");
    let mut store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    let mut rng = Rng(0x5eed_1234_5678_9abd);
    for i in 0..120 {
        let (service, pod) = (["api", "db"][rng.below(2) as usize], rng.below(3));
        let time = 1_000 * (1 + i as i64 + rng.below(5) as i64);
        let b = batch(profile(&mut rng), service, &format!("p{pod}"), time);
        store.ingest("t", b).unwrap();
        // A flush every three profiles, as a live server's every few minutes.
        let _ = (i % 3 == 2).then(|| store.flush().unwrap());
    }
    let before: Vec<String> = queries().iter().map(|q| answers(&store, q)).collect();
    let (blocks, _) = (store.disk_usage().0, store.compact().unwrap());
    assert!(blocks >= 40 && store.disk_usage().0 < 4);
    for reopen in [false, true] {
        if reopen {
            store.close();
            drop(store);
            store = Store::open(dir.path(), StoreOptions::default()).unwrap();
        }
        for (q, b) in queries().iter().zip(&before) {
            assert_eq!(&answers(&store, q), b, "reopened {reopen}, query {q:?}");
        }
    }
}
