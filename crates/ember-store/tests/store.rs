//! Store-level tests on real corpus profiles: full symbols survive ingest, merge, flush to
//! blocks (through object_store) and reopen; identical stacks add up; retention deletes
//! only expired blocks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ember_pprof::Profile;
use ember_store::{IngestBatch, IngestProfile, Query, Store, StoreOptions, parse_selector};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-store-{name}-"))
        .tempdir()
        .expect("temp dir")
}

const LARGE: &str = "pprof/internal/proftest/testdata/large.cpu";
const LABELS: &str = "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof";

fn batch(bytes: &[u8], service: &str, pod: &str, time_nanos: i64) -> IngestBatch {
    IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![
                ("service_name".into(), service.into()),
                ("pod".into(), pod.into()),
            ],
            time_nanos,
            pprof: bytes.to_vec(),
            what: "profile".into(),
        }],
    }
}

fn ingest(store: &Store, file: &str, service: &str, pod: &str, time_nanos: i64) -> Profile {
    let bytes = std::fs::read(corpus(file)).unwrap();
    let profile = ember_pprof::decode(&bytes).unwrap();
    store
        .ingest("t", batch(&bytes, service, pod, time_nanos))
        .unwrap();
    profile
}

fn query(service: &str, sample_type: &str) -> Query {
    Query {
        selector: parse_selector(&format!("{{service_name=\"{service}\"}}")).unwrap(),
        profile_type: Some(sample_type.into()),
        start_nanos: 0,
        end_nanos: i64::MAX,
    }
}

fn folded(stacks: &[(Vec<String>, i64)]) -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = stacks.iter().map(|(f, n)| (f.join(";"), *n)).collect();
    v.sort();
    v
}

/// The folded view of the input's sample type `name`, as ember-pprof computes it.
fn expected(profile: &Profile, name: &str, times: i64) -> Vec<(String, i64)> {
    let i = ember_pprof::sample_index(profile, Some(name)).unwrap();
    let mut v: Vec<(String, i64)> = ember_pprof::folded_stacks(profile, i)
        .into_iter()
        .map(|(s, n)| (s, n * times))
        .collect();
    v.sort();
    v
}

#[test]
fn merge_matches_input_and_identical_stacks_add_up() {
    let dir = temp_dir("merge");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    let p = ingest(&store, LARGE, "api", "a", 1_000);
    ingest(&store, LARGE, "api", "b", 2_000);
    let merged = store.merge_stacks("t", &query("api", "cpu"));
    assert_eq!(merged.profiles, 2);
    assert_eq!(folded(&merged.stacks()), expected(&p, "cpu", 2));
    // Another tenant sees nothing.
    assert_eq!(
        store.merge_stacks("other", &query("api", "cpu")).profiles,
        0
    );
}

/// Checks that `out` carries every symbol of `input` the samples use: per sample, the
/// addresses, mapping files/build ids and function names/files/lines, leaf first.
fn symbolic_samples(p: &Profile, value_index: usize) -> Vec<(Vec<String>, i64)> {
    let s = |i: i64| ember_pprof::string(p, i).to_string();
    let mut out: std::collections::BTreeMap<Vec<String>, i64> = Default::default();
    for sample in &p.sample {
        let mut frames = Vec::new();
        for id in &sample.location_id {
            let loc = p.location.iter().find(|l| l.id == *id).unwrap();
            let mapping = p
                .mapping
                .iter()
                .find(|m| m.id == loc.mapping_id)
                .map(|m| format!("{}@{}+{:x}", s(m.filename), s(m.build_id), m.memory_start))
                .unwrap_or_default();
            let mut f = format!("{:x} {mapping}", loc.address);
            for line in &loc.line {
                let func = p
                    .function
                    .iter()
                    .find(|f| f.id == line.function_id)
                    .unwrap();
                f.push_str(&format!(
                    " {}|{}|{}:{}({})",
                    s(func.name),
                    s(func.system_name),
                    s(func.filename),
                    line.line,
                    func.start_line
                ));
            }
            frames.push(f);
        }
        *out.entry(frames).or_default() += sample.value[value_index];
    }
    out.into_iter().filter(|(_, v)| *v != 0).collect()
}

#[test]
fn pprof_merge_keeps_full_symbols_across_flush_and_reopen() {
    let dir = temp_dir("symbols");
    let dir = dir.path();
    let (input, before) = {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        let input = ingest(&store, LABELS, "svc", "a", 5_000);
        ingest(&store, LABELS, "svc", "b", 6_000);
        let (out, merged) = store.merge_profile("t", &query("svc", "cpu")).unwrap();
        assert_eq!(merged.profiles, 2);
        ember_pprof::validate(&out).unwrap();
        let flushed = store.flush().unwrap();
        assert!(flushed.block_bytes > 0);
        store.close();
        (input, out)
    };
    let cpu = ember_pprof::sample_index(&input, Some("cpu")).unwrap();
    let want: Vec<(Vec<String>, i64)> = symbolic_samples(&input, cpu)
        .into_iter()
        .map(|(k, v)| (k, v * 2))
        .collect();
    assert_eq!(symbolic_samples(&before, 0), want);
    // Not just names: files, line numbers, addresses and mappings came back.
    assert!(
        before
            .function
            .iter()
            .any(|f| ember_pprof::string(&before, f.filename).ends_with(".go"))
    );
    assert!(
        before
            .location
            .iter()
            .all(|l| l.address != 0 && l.mapping_id != 0 && l.line.iter().any(|n| n.line > 0))
    );

    // The WAL is gone after the flush: everything now comes from the block.
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(store.replay_stats().0.records, 0);
    let (after, _) = store.merge_profile("t", &query("svc", "cpu")).unwrap();
    assert_eq!(symbolic_samples(&after, 0), want);
    assert_eq!(
        ember_pprof::string(&after, after.sample_type[0].r#type),
        "cpu"
    );
    assert_eq!(after.period, input.period);
    let merged = store.merge_stacks("t", &query("svc", "cpu"));
    assert_eq!(folded(&merged.stacks()), expected(&input, "cpu", 2));
}

#[test]
fn retention_deletes_only_expired_blocks() {
    let dir = temp_dir("retention");
    let dir = dir.path();
    let day = 86_400_000_000_000i64;
    let options = StoreOptions {
        retention_nanos: 30 * day,
        ..Default::default()
    };
    let store = Store::open(dir, options.clone()).unwrap();
    ingest(&store, LABELS, "old", "a", 10 * day);
    store.flush().unwrap();
    let p = ingest(&store, LABELS, "new", "a", 50 * day);
    store.flush().unwrap();
    assert_eq!(store.disk_usage().0, 2);
    // At day 60 the first block (day 10) is past 30 days of retention, the second is not.
    assert_eq!(store.enforce_retention(60 * day).unwrap(), 1);
    assert_eq!(store.disk_usage().0, 1);
    store.close();
    drop(store);
    let store = Store::open(dir, options).unwrap();
    assert_eq!(store.merge_stacks("t", &query("old", "cpu")).profiles, 0);
    let kept = store.merge_stacks("t", &query("new", "cpu"));
    assert_eq!(folded(&kept.stacks()), expected(&p, "cpu", 1));
}

#[test]
fn any_object_store_backend_holds_the_blocks() {
    let dir = temp_dir("memory");
    let dir = dir.path();
    let objects: Arc<dyn ember_store::object_store::ObjectStore> =
        Arc::new(ember_store::object_store::memory::InMemory::new());
    let p = {
        let store = Store::open_with_objects(
            dir,
            StoreOptions::default(),
            objects.clone(),
            "tenant-blocks",
        )
        .unwrap();
        let p = ingest(&store, LARGE, "api", "a", 1_000);
        let stats = store.flush().unwrap();
        assert!(
            stats
                .block
                .unwrap()
                .to_string_lossy()
                .starts_with("tenant-blocks/")
        );
        store.close();
        p
    };
    // Nothing block-like was written to the local directory.
    assert!(!dir.join("tenant-blocks").exists());
    let store =
        Store::open_with_objects(dir, StoreOptions::default(), objects, "tenant-blocks").unwrap();
    let merged = store.merge_stacks("t", &query("api", "cpu"));
    assert_eq!(folded(&merged.stacks()), expected(&p, "cpu", 1));
}

/// A damaged block costs its own profiles, not the store: it is set aside as
/// `<name>.corrupt` (kept for inspection), reported, and the other blocks are served; the
/// next open finds nothing more to set aside. (It used to stop the whole server from
/// starting: "incomplete deflate stream".)
#[test]
fn a_corrupt_block_is_quarantined_and_the_rest_served() {
    let dir = temp_dir("corrupt");
    let dir = dir.path();
    {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        ingest(&store, LABELS, "svc", "a", 1_000);
        store.flush().unwrap();
        ingest(&store, LABELS, "other", "b", 2_000);
        store.flush().unwrap();
        store.close();
    }
    let mut blocks: Vec<_> = std::fs::read_dir(dir.join("blocks"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "blk"))
        .collect();
    blocks.sort();
    assert_eq!(blocks.len(), 2);
    // The first flush's block (service "svc"), truncated halfway: its index is gone.
    let bytes = std::fs::read(&blocks[0]).unwrap();
    std::fs::write(&blocks[0], &bytes[..bytes.len() / 2]).unwrap();
    let store = Store::open(dir, StoreOptions::default()).expect("a corrupt block is not fatal");
    let name = blocks[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(store.quarantined_blocks(), std::slice::from_ref(&name));
    assert!(!blocks[0].exists());
    assert!(dir.join("blocks").join(format!("{name}.corrupt")).exists());
    assert_eq!(store.merge_stacks("t", &query("svc", "cpu")).total, 0);
    let other = store.merge_stacks("t", &query("other", "cpu")).total;
    assert!(other > 0, "the intact block is served");
    store.close();
    drop(store);
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert!(store.quarantined_blocks().is_empty());
    assert_eq!(store.merge_stacks("t", &query("other", "cpu")).total, other);
}

/// A block written by a newer Ember (a later format number in its trailer) is not damaged:
/// opening the store fails with an error that says so, and the block is neither renamed
/// nor changed, so the newer build still serves it. (Before, it was quarantined as corrupt.)
#[test]
fn a_block_of_a_newer_format_stops_the_open_and_is_left_alone() {
    let dir = temp_dir("newer");
    let dir = dir.path();
    {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        ingest(&store, LABELS, "svc", "a", 1_000);
        store.flush().unwrap();
        store.close();
    }
    let block = std::fs::read_dir(dir.join("blocks"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "blk"))
        .unwrap();
    let mut bytes = std::fs::read(&block).unwrap();
    let at = bytes.len() - b"EMBERBLK5\n".len();
    assert_eq!(&bytes[at..], b"EMBERBLK5\n");
    bytes[at + 8] = b'9';
    std::fs::write(&block, &bytes).unwrap();
    let Err(err) = Store::open(dir, StoreOptions::default()) else {
        panic!("a newer format must not open");
    };
    assert!(
        matches!(err, ember_store::StoreError::NewerFormat { version: 9, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("newer Ember"), "{err}");
    assert_eq!(
        std::fs::read(&block).unwrap(),
        bytes,
        "the block is left as it was"
    );
    assert!(!block.with_extension("blk.corrupt").exists());
}

#[test]
fn known_locations_are_found_from_borrowed_lines() {
    use ember_store::head::{FunctionSym, LocationSym, MappingSym, TenantHead};
    let mut h = TenantHead::new();
    let name = h.intern("main");
    let f = h.function(FunctionSym {
        name,
        system_name: name,
        filename: 0,
        start_line: 1,
    });
    let m = h.mapping(MappingSym {
        start: 0x1000,
        limit: 0x2000,
        offset: 0,
        filename: 0,
        build_id: 0,
        flags: 0,
    }) + 1;
    let owned = h.location(LocationSym {
        mapping: m,
        address: 0x1010,
        lines: vec![(f, 3)].into(),
        is_folded: false,
    });
    // The same fields, borrowed, find it; any field that differs makes a new location.
    assert_eq!(h.location_of(m, 0x1010, &[(f, 3)], false), owned);
    assert_ne!(h.location_of(m, 0x1010, &[(f, 4)], false), owned);
    assert_ne!(h.location_of(m, 0x1011, &[(f, 3)], false), owned);
    assert_ne!(h.location_of(m, 0x1010, &[(f, 3)], true), owned);
    assert_ne!(h.location_of(0, 0x1010, &[(f, 3)], false), owned);
    // Unknown functions and mappings are dropped before the lookup, as when owned.
    assert_eq!(
        h.location_of(m, 0x1010, &[(f, 3), (f + 7, 9)], false),
        owned
    );
    let unmapped = h.location_of(0, 0x1010, &[(f, 3)], false);
    assert_eq!(h.location_of(m + 5, 0x1010, &[(f, 3)], false), unmapped);
    assert_eq!(h.symbol_table_sizes().3, 5);
}

#[test]
fn the_same_profile_twice_adds_no_symbols_or_stacks() {
    let dir = temp_dir("twice");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    ingest(&store, LARGE, "api", "a", 1_000);
    let (_, _, strings, nodes) = store.head_stats();
    ingest(&store, LARGE, "api", "b", 2_000);
    assert_eq!(store.head_stats().2, strings);
    assert_eq!(store.head_stats().3, nodes);
}

#[test]
fn a_batch_of_stacks_interns_like_one_at_a_time() {
    use ember_store::head::{LocationSym, TenantHead};
    let mut h = TenantHead::new();
    let locs: Vec<u32> = (0..4u64)
        .map(|a| {
            h.location(LocationSym {
                mapping: 0,
                address: 0x100 + a,
                lines: Box::new([]),
                is_folded: false,
            })
        })
        .collect();
    let known = h.stack(&[locs[0], locs[1]]);
    // A known stack, a new one twice, a prefix of it, and the known one again.
    let batch: [&[u32]; 5] = [
        &[locs[0], locs[1]],
        &[locs[2], locs[1], locs[3]],
        &[locs[2], locs[1], locs[3]],
        &[locs[1], locs[3]],
        &[locs[0], locs[1]],
    ];
    let leaves = h.stacks(batch);
    assert_eq!(leaves[0], known);
    assert_eq!(leaves[1], leaves[2]);
    assert_eq!(leaves[4], known);
    for (stack, leaf) in batch.iter().zip(&leaves) {
        assert_eq!(h.stack(stack), *leaf);
        assert_eq!(&h.stack_locations(*leaf), stack);
    }
    // root, [1], [0 1], [3], [1 3], [2 1 3]
    assert_eq!(h.node_count(), 6);
}

/// Compaction reads at most `compact_max_bytes` of blocks per merge (a merge decodes its
/// inputs into memory at once): four blocks of one size class with room for two merge two
/// at a time, not all four.
#[test]
fn compaction_merges_at_most_compact_max_bytes() {
    let dir = temp_dir("compact-max");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    for i in 0..4 {
        ingest(&store, LABELS, &format!("svc{i}"), "p", 1_000_000_000 + i);
        store.flush().unwrap();
    }
    store.close();
    drop(store);
    let mut sizes: Vec<u64> = std::fs::read_dir(dir.join("blocks"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes.len(), 4);
    // Room for the two largest together, not for three.
    let max = sizes[2] + sizes[3];
    assert!(sizes[0] + sizes[1] + sizes[2] > max);
    let options = StoreOptions {
        compact_max_bytes: max,
        ..StoreOptions::default()
    };
    let store = Store::open(dir, options).unwrap();
    let before = store.merge_stacks("t", &query("svc0", "cpu"));
    store.compact().unwrap();
    let (blocks, _, _) = store.disk_usage();
    assert!(
        (2..4).contains(&blocks),
        "merges of two blocks at most: {blocks} blocks left of 4"
    );
    for i in 0..4 {
        let q = query(&format!("svc{i}"), "cpu");
        assert!(
            store.merge_stacks("t", &q).total > 0,
            "svc{i} after compaction"
        );
    }
    assert_eq!(
        store.merge_stacks("t", &query("svc0", "cpu")).total,
        before.total
    );
}

/// Compaction drops its inputs' decoded parts from the cache before it merges them, not
/// after: the head a flush just left decoded would otherwise add to the merge's memory (the
/// server's peak during a back-fill). Seen through a merge that fails (an input's file
/// gone): the flushed heads are out of the cache even so.
#[test]
fn compaction_drops_its_inputs_from_the_cache_before_merging() {
    let dir = temp_dir("compact-cache");
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    for i in 0..4 {
        ingest(&store, LABELS, "svc", "p", 1_000_000_000 + i);
        store.flush().unwrap();
    }
    let (held, ..) = store.cache_stats();
    assert_eq!(held, 4, "each flush leaves its head decoded");
    let mut blocks: Vec<PathBuf> = std::fs::read_dir(dir.path().join("blocks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    blocks.sort();
    std::fs::remove_file(&blocks[0]).unwrap();
    assert!(store.compact().is_err(), "an input is missing");
    let (held, ..) = store.cache_stats();
    assert_eq!(held, 0, "the inputs' parts were dropped before the merge");
}

/// A shutdown stops compaction (`Store::stop_compaction`): four blocks that would merge are
/// left as they are, and everything in them still answers.
#[test]
fn stopped_compaction_merges_nothing_and_loses_nothing() {
    let dir = temp_dir("compact-stop");
    let store = Store::open(dir.path(), StoreOptions::default()).unwrap();
    for i in 0..4 {
        ingest(&store, LABELS, &format!("svc{i}"), "p", 1_000_000_000 + i);
        store.flush().unwrap();
    }
    store.stop_compaction();
    assert_eq!(store.compact().unwrap(), 0, "nothing merged once stopped");
    assert_eq!(
        store.disk_usage().0,
        4,
        "the four blocks are left as they were"
    );
    for i in 0..4 {
        let q = query(&format!("svc{i}"), "cpu");
        assert!(
            store.merge_stacks("t", &q).total > 0,
            "svc{i} still answers"
        );
    }
}

/// One data directory, one store: a second open (here in the same process, as from another
/// server) is refused with a message naming the directory's lock, and succeeds once the
/// first store is gone. Without the lock, the second server's flush deleted the first one's
/// log segments (issue 13: 500 of 1,000 acknowledged profiles lost).
#[test]
fn a_data_directory_is_opened_by_one_store_at_a_time() {
    let dir = temp_dir("locked");
    let dir = dir.path();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    ingest(&store, LABELS, "svc", "p", 1_000_000_000);
    let second = Store::open(dir, StoreOptions::default());
    let Err(err) = second else {
        panic!("a second store opened the same directory");
    };
    assert!(
        matches!(err, ember_store::StoreError::Locked { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("LOCK") && text.contains("another Ember server"),
        "{text}"
    );
    store.close();
    drop(store);
    let again = Store::open(dir, StoreOptions::default()).unwrap();
    assert!(again.merge_stacks("t", &query("svc", "cpu")).total > 0);
}
