//! The write-ahead log under concurrent appends with overlapping fsyncs: every acknowledged
//! record is replayed exactly once after close and reopen, rotation in the middle of the
//! traffic loses nothing, and concurrent appends share fsyncs.

use std::collections::BTreeMap;

use std::sync::Arc;

use ember_store::{StoreError, Wal};

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-wal-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// Payload of record `i` of writer `w`: distinct, and of varying length so framing is tested.
fn payload(w: usize, i: usize) -> Vec<u8> {
    let mut p = format!("writer {w} record {i} ").into_bytes();
    p.resize(p.len() + (w * 31 + i * 17) % 700, b'x');
    p
}

#[test]
fn concurrent_appends_and_rotation_replay_every_acknowledged_record() {
    let dir = temp_dir("concurrent");
    let dir = dir.path();
    let (writers, per_writer) = (12, 150);
    let rotated;
    let stats;
    {
        let (wal, replay) = Wal::open(dir, 0, |_, _| panic!("empty log replays nothing")).unwrap();
        assert_eq!(replay.records, 0);
        let wal = Arc::new(wal);
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    for i in 0..per_writer {
                        wal.append_blocking(payload(w, i)).expect("durable append");
                    }
                })
            })
            .collect();
        // Rotate twice while the writers run.
        let mut closed = Vec::new();
        for _ in 0..2 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            closed.push(wal.rotate().expect("rotate"));
        }
        for h in handles {
            h.join().expect("writer thread");
        }
        stats = wal.stats();
        rotated = closed;
        wal.close();
        assert!(matches!(
            wal.append_blocking(b"late".to_vec()),
            Err(StoreError::Closed)
        ));
    }
    let total = (writers * per_writer) as u64;
    assert_eq!(stats.records, total);
    assert!(stats.fsyncs >= 1 && stats.fsyncs <= total, "{stats:?}");
    assert!(rotated.windows(2).all(|w| w[0] < w[1]), "{rotated:?}");

    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    let (wal, replay) =
        Wal::open(dir, 0, |_, p| *seen.entry(p.to_vec()).or_default() += 1).unwrap();
    wal.close();
    assert_eq!(replay.torn_segments, 0);
    assert!(replay.segments >= 3, "{replay:?}");
    assert_eq!(replay.records as u64, total);
    for w in 0..writers {
        for i in 0..per_writer {
            assert_eq!(seen.get(&payload(w, i)), Some(&1), "writer {w} record {i}");
        }
    }
}

/// Where `needle` starts in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("record payload in the segment")
}

/// Issue 13, items 1 and 2: a torn record (a write cut short, with later records written
/// after it, as a full disk left it) and a record with a flipped bit, both in the middle of
/// a segment, cost only themselves: every later record is replayed, and the damage is
/// counted. The old replay stopped the segment at the first damaged record.
#[test]
fn a_torn_and_a_corrupted_record_in_the_middle_cost_only_themselves() {
    let dir = temp_dir("damage");
    let dir = dir.path();
    let records: Vec<Vec<u8>> = (0..10).map(|i| payload(3, i)).collect();
    {
        let (wal, _) = Wal::open(dir, 0, |_, _| {}).unwrap();
        for r in &records {
            wal.append_blocking(r.clone()).unwrap();
        }
        wal.close();
    }
    let segment = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "wal"))
        .unwrap();
    let mut bytes = std::fs::read(&segment).unwrap();
    // Record 3: one bit flipped in its payload.
    let at = find(&bytes, &records[3]) + 9;
    bytes[at] ^= 0x04;
    // Record 6: its last 40 bytes never written, record 7 right after.
    let start = find(&bytes, &records[6]);
    let end = start + records[6].len();
    bytes.drain(end - 40..end);
    std::fs::write(&segment, &bytes).unwrap();

    let mut seen = Vec::new();
    let (wal, replay) = Wal::open(dir, 0, |_, p| seen.push(p.to_vec())).unwrap();
    wal.close();
    let want: Vec<Vec<u8>> = records
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 6)
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(seen.len(), want.len(), "records replayed: {replay:?}");
    assert_eq!(seen, want);
    assert_eq!(replay.skipped_records, 2, "{replay:?}");
    assert_eq!(replay.torn_segments, 1);
    assert!(replay.skipped_bytes > 0);
}

/// A segment of the first format (no segment header, `len · crc · payload` records) still
/// replays, and new records go to a segment of the current format after it.
#[test]
fn segments_of_the_first_format_still_replay() {
    let dir = temp_dir("v1");
    let dir = dir.path();
    let mut old = Vec::new();
    for i in 0..5 {
        let p = payload(1, i);
        old.extend_from_slice(&(p.len() as u32).to_le_bytes());
        old.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
        old.extend_from_slice(&p);
    }
    std::fs::write(dir.join("0000000001.wal"), &old).unwrap();
    let mut seen = Vec::new();
    let (wal, replay) = Wal::open(dir, 0, |s, p| seen.push((s, p.to_vec()))).unwrap();
    assert_eq!(replay.records, 5);
    assert!(seen.iter().all(|(s, _)| *s == 1));
    let segment = wal.append_blocking(b"new".to_vec()).unwrap();
    assert_eq!(segment, 2);
    wal.close();
    let mut seen = Vec::new();
    let (wal, replay) = Wal::open(dir, 0, |s, p| seen.push((s, p.to_vec()))).unwrap();
    wal.close();
    assert_eq!(replay.records, 6);
    assert_eq!(replay.skipped_records, 0);
    assert_eq!(seen.last().unwrap(), &(2, b"new".to_vec()));
}
