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

/// Replays `image` as the only segment of a fresh log; returns the payloads and the stats.
fn replay_image(name: &str, image: &[u8]) -> (Vec<Vec<u8>>, ember_store::ReplayStats) {
    let dir = temp_dir(name);
    std::fs::write(dir.path().join("0000000001.wal"), image).unwrap();
    let mut seen = Vec::new();
    let (wal, replay) = Wal::open(dir.path(), 0, |_, p| seen.push(p.to_vec())).unwrap();
    wal.close();
    (seen, replay)
}

/// Segments are filled with zeros ahead of their records, so an fsync does not grow the file.
/// A crash in the middle of such a segment, as the disk may hold it: every acknowledged
/// record is replayed, the record being written when it struck (its second half never
/// reached the disk: zeros) is skipped as a torn tail, and the zeros after the last record
/// are a clean end, neither records nor damage.
#[test]
fn a_crash_in_the_middle_of_a_zero_filled_segment_replays_exactly_the_acknowledged_records() {
    let dir = temp_dir("zeroed");
    let dir = dir.path();
    let acked: Vec<Vec<u8>> = (0..20).map(|i| payload(5, i)).collect();
    let (wal, _) = Wal::open(dir, 0, |_, _| {}).unwrap();
    for r in &acked {
        wal.append_blocking(r.clone()).unwrap();
    }
    let segment = dir.join("0000000001.wal");
    let at_last_ack = std::fs::read(&segment).unwrap();
    let data_end = find(&at_last_ack, &acked[19]) + acked[19].len();
    assert!(
        at_last_ack.len() >= data_end + 4096,
        "no zeros written ahead: {} bytes, records end at {data_end}",
        at_last_ack.len()
    );
    assert!(at_last_ack[data_end..].iter().all(|&b| b == 0));
    // The record in flight at the crash: written, not acknowledged, half of it on disk.
    let torn = payload(5, 99);
    let (tx, rx) = std::sync::mpsc::channel();
    wal.append(torn.clone(), Box::new(move |r| drop(tx.send(r))));
    let mut crashed = std::fs::read(&segment).unwrap();
    let torn_at = find(&crashed, &torn);
    let cut = torn_at + torn.len() / 2;
    crashed[cut..torn_at + torn.len()].fill(0);
    rx.recv().unwrap().unwrap();
    wal.close();

    let (seen, replay) = replay_image("zeroed-clean", &at_last_ack);
    assert_eq!(seen, acked);
    assert_eq!(replay.torn_segments, 0, "{replay:?}");
    assert_eq!(replay.skipped_bytes, 0, "{replay:?}");

    let (seen, replay) = replay_image("zeroed-torn", &crashed);
    assert_eq!(seen, acked);
    assert_eq!(replay.torn_segments, 1, "{replay:?}");
    assert_eq!(replay.skipped_records, 1, "{replay:?}");
    // The torn record's header and first half, not the zeros after it.
    assert_eq!(replay.skipped_bytes, (cut - data_end) as u64, "{replay:?}");
}
