//! What the store keeps when things go wrong (issue 13): a full disk refuses writes with
//! [`StoreError::NoSpace`] and loses nothing acknowledged before or after; a replay of a
//! large log flushes into blocks as it goes; damaged log segments are set aside, never
//! deleted.
//!
//! The full-disk test mounts a real 20 MiB tmpfs, so it needs root; without it, it says so
//! and checks nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use ember_store::{
    IngestBatch, IngestError, IngestProfile, Query, Store, StoreError, StoreOptions, parse_selector,
};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-durability-{name}-"))
        .tempdir()
        .expect("temp dir")
}

const CPU: &str = "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof";

/// One profile labelled `seq=<seq>`.
fn one(pprof: &[u8], seq: u32) -> IngestBatch {
    IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![
                ("service_name".into(), "durable".into()),
                ("seq".into(), seq.to_string()),
            ],
            time_nanos: 1_700_000_000_000_000_000 + i64::from(seq),
            pprof: pprof.to_vec(),
            what: format!("profile {seq}"),
        }],
    }
}

/// The `seq` values the store holds.
fn stored(store: &Store) -> BTreeSet<u32> {
    let q = Query {
        selector: parse_selector("{service_name=\"durable\"}").unwrap(),
        profile_type: None,
        start_nanos: 0,
        end_nanos: i64::MAX,
    };
    store
        .label_values("t", "seq", Some(&q))
        .iter()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// A tmpfs of `size` on a fresh directory, unmounted (and the directory removed) when
/// dropped; `None` without root.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(name: &str, size: &str) -> Option<Tmpfs> {
        let uid = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            eprintln!("SKIPPED: mounting a small tmpfs needs root (run the test as root)");
            return None;
        }
        let dir = temp_dir(name);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!(
                "SKIPPED: could not mount a tmpfs on {}",
                dir.path().display()
            );
            return None;
        }
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Before the directory itself goes (TempDir's own drop, after this).
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// Writes `path` until the file system is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![1u8; 64 << 10];
    while f.write(&chunk).is_ok_and(|n| n > 0) {}
}

/// Issue 13, item 1, at the store: ingest on a full disk fails with `NoSpace` (nothing of
/// it kept, `has_space` false); once space is freed, ingest works again, and after the
/// store is dropped without a flush (what SIGKILL leaves) and reopened, every acknowledged
/// profile is there: the failed write was rolled back instead of leaving a torn record that
/// hid every later one from the replay.
#[test]
fn a_full_disk_refuses_ingest_and_loses_nothing_acknowledged() {
    let Some(fs) = Tmpfs::mount("full", "20m") else {
        return;
    };
    let pprof = std::fs::read(corpus(CPU)).unwrap();
    let dir = fs.0.path().join("data");
    let mut acked = BTreeSet::new();
    {
        let store = Store::open(&dir, StoreOptions::default()).unwrap();
        for seq in 0..10 {
            store.ingest("t", one(&pprof, seq)).unwrap();
            acked.insert(seq);
        }
        fill(&fs.0.path().join("filler"));
        let mut refused = 0;
        for seq in 10..60 {
            match store.ingest("t", one(&pprof, seq)) {
                Ok(_) => {
                    acked.insert(seq);
                }
                Err(IngestError::Store(StoreError::NoSpace { .. })) => refused += 1,
                Err(e) => panic!("push {seq} on a full disk: {e}"),
            }
        }
        assert!(refused > 40, "the full disk refused only {refused} of 50");
        assert!(!store.has_space());
        std::fs::remove_file(fs.0.path().join("filler")).unwrap();
        assert!(store.has_space());
        for seq in 1000..1200 {
            store.ingest("t", one(&pprof, seq)).unwrap();
            acked.insert(seq);
        }
        assert_eq!(stored(&store), acked);
    }
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    assert_eq!(store.replay_stats().0.skipped_records, 0);
    assert_eq!(
        stored(&store),
        acked,
        "acknowledged profiles lost on replay"
    );
    store.flush().unwrap();
    drop(store);
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    assert_eq!(
        stored(&store),
        acked,
        "acknowledged profiles lost by the flush"
    );
}

/// Issue 13, item 8: replaying a log larger than `replay_flush_bytes` writes blocks as it
/// goes (at segment ends) instead of holding the whole log in memory, and keeps every
/// profile, across a second reopen too.
#[test]
fn replay_flushes_into_blocks_as_it_goes() {
    let dir = temp_dir("replay-flush");
    let dir = dir.path();
    let pprof = std::fs::read(corpus(CPU)).unwrap();
    let options = StoreOptions {
        wal_segment_bytes: 64 << 10,
        replay_flush_bytes: 256 << 10,
        retention_nanos: 0,
        ..StoreOptions::default()
    };
    let n = (3 << 20) / pprof.len() as u32 + 1;
    {
        let store = Store::open(dir, options.clone()).unwrap();
        for seq in 0..n {
            store.ingest("t", one(&pprof, seq)).unwrap();
        }
    }
    let wal_bytes = |dir: &Path| -> u64 {
        std::fs::read_dir(dir.join("wal"))
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    assert!(wal_bytes(dir) > 3 << 20);
    let store = Store::open(dir, options.clone()).unwrap();
    assert!(
        store.replay_flushes() >= 8,
        "{} blocks written during the replay of {} profiles",
        store.replay_flushes(),
        n
    );
    let (blocks, _, wal) = store.disk_usage();
    assert!(
        blocks >= 8 && wal < 1 << 20,
        "{blocks} blocks, {wal} log bytes left"
    );
    let want: BTreeSet<u32> = (0..n).collect();
    assert_eq!(stored(&store), want);
    drop(store);
    let store = Store::open(dir, options).unwrap();
    assert_eq!(stored(&store), want, "after a second reopen");
}

/// A segment whose replay skipped a corrupt record with intact ones after it is renamed
/// `<n>.wal.corrupt` by the flush that covers it, not deleted; the records around the
/// damage are kept.
#[test]
fn a_flush_sets_damaged_segments_aside() {
    let dir = temp_dir("damaged");
    let dir = dir.path();
    let pprof = std::fs::read(corpus(CPU)).unwrap();
    {
        let store = Store::open(dir, StoreOptions::default()).unwrap();
        for seq in 0..3 {
            store.ingest("t", one(&pprof, seq)).unwrap();
        }
    }
    let segment = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .find(|p| std::fs::metadata(p).unwrap().len() > 100)
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    // A bit flipped in the middle record's profile.
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&segment, &bytes).unwrap();
    let store = Store::open(dir, StoreOptions::default()).unwrap();
    assert_eq!(store.replay_stats().0.skipped_records, 1);
    assert_eq!(stored(&store), BTreeSet::from([0, 2]));
    store.flush().unwrap();
    assert!(!segment.exists());
    assert!(segment.with_extension("wal.corrupt").exists());
}
