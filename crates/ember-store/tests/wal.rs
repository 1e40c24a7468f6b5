//! The write-ahead log under concurrent appends with overlapping fsyncs: every acknowledged
//! record is replayed exactly once after close and reopen, rotation in the middle of the
//! traffic loses nothing, and concurrent appends share fsyncs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use ember_store::{StoreError, Wal};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ember-wal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
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
    let (writers, per_writer) = (12, 150);
    let rotated;
    let stats;
    {
        let (wal, replay) = Wal::open(&dir, 0, |_, _| panic!("empty log replays nothing")).unwrap();
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
        Wal::open(&dir, 0, |_, p| *seen.entry(p.to_vec()).or_default() += 1).unwrap();
    wal.close();
    assert_eq!(replay.torn_segments, 0);
    assert!(replay.segments >= 3, "{replay:?}");
    assert_eq!(replay.records as u64, total);
    for w in 0..writers {
        for i in 0..per_writer {
            assert_eq!(seen.get(&payload(w, i)), Some(&1), "writer {w} record {i}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
