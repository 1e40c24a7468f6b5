//! The write-ahead log written by its appenders' own threads (session 18: no writer thread
//! between an ingest and the sync threads): a record is in its segment when `append`
//! returns; the segment an ack names is the one the record replays from, also across
//! segments closed by size while many threads append; and a rotation reports a segment
//! closed only after every ack of a record in it (or an earlier one) has run, which is what
//! a flush relies on to wait for those records' applies.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, mpsc};

use ember_store::{Replayed, Wal, WalOptions};

fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-wal-appenders-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// Names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect()
}

/// Payload `i` of appender `w`: distinct, of varying length.
fn payload(w: usize, i: usize) -> Vec<u8> {
    let mut p = format!("appender {w} record {i} ").into_bytes();
    p.resize(p.len() + (w * 131 + i * 37) % 900, b'y');
    p
}

#[test]
fn an_append_writes_its_record_on_the_callers_thread() {
    let dir = temp_dir("caller");
    let dir = dir.path();
    let (wal, _) = Wal::open(dir, 0, |_, _| {}).unwrap();
    // A thread names itself once it runs: wait for a sync thread's name (the old
    // writer thread named itself before it started them).
    let syncers = || {
        thread_names()
            .iter()
            .filter(|n| *n == "ember-wal-sync")
            .count()
    };
    let waited = std::time::Instant::now();
    while syncers() == 0 && waited.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // The old log handed every record to a writer thread named `ember-wal`: one more
    // wake-up and context switch per ingested profile.
    assert!(
        !thread_names().iter().any(|n| n == "ember-wal"),
        "a writer thread: {:?}",
        thread_names()
    );
    let (tx, rx) = mpsc::channel();
    wal.append(
        b"written before the ack".to_vec(),
        Box::new(move |r| {
            let _ = tx.send(r);
        }),
    );
    // Already in the segment (the page cache) when `append` returns, fsync'd or not.
    let segment = std::fs::read(dir.join("0000000001.wal")).unwrap();
    assert!(
        segment.windows(22).any(|w| w == b"written before the ack"),
        "the record is not in the segment yet"
    );
    assert_eq!(rx.recv().unwrap().unwrap(), 1);
    wal.close();
}

#[test]
fn acks_name_the_replayed_segment_and_rotation_waits_for_every_ack() {
    let dir = temp_dir("segments");
    let dir = dir.path();
    let (writers, per_writer) = (8usize, 150usize);
    // Small segments: most appends close one by size, on the appending thread.
    let options = WalOptions {
        segment_bytes: 8 << 10,
    };
    // Segment each payload's ack named, and acks run per segment.
    let acked_in: Arc<Mutex<BTreeMap<Vec<u8>, u64>>> = Arc::default();
    let acks_per_segment: Arc<Mutex<BTreeMap<u64, usize>>> = Arc::default();
    // (closed segment, acks counted for segments up to it when `rotate` returned)
    let mut rotations: Vec<(u64, usize)> = Vec::new();
    {
        let (wal, _) = Wal::open_with(dir, 0, options, |_| {}).unwrap();
        let wal = Arc::new(wal);
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let (wal, acked_in, per) =
                    (wal.clone(), acked_in.clone(), acks_per_segment.clone());
                std::thread::spawn(move || {
                    for i in 0..per_writer {
                        let (tx, rx) = mpsc::channel();
                        let per = per.clone();
                        wal.append(
                            payload(w, i),
                            Box::new(move |r| {
                                if let Ok(s) = &r {
                                    *per.lock().unwrap().entry(*s).or_default() += 1;
                                }
                                let _ = tx.send(r);
                            }),
                        );
                        let segment = rx.recv().unwrap().expect("durable append");
                        acked_in.lock().unwrap().insert(payload(w, i), segment);
                    }
                })
            })
            .collect();
        for _ in 0..6 {
            std::thread::sleep(std::time::Duration::from_millis(15));
            let closed = wal.rotate().expect("rotate");
            let counted: usize = acks_per_segment
                .lock()
                .unwrap()
                .range(..=closed)
                .map(|(_, n)| n)
                .sum();
            rotations.push((closed, counted));
        }
        for h in handles {
            h.join().expect("appender");
        }
        wal.close();
    }
    let mut replayed: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut per_segment: BTreeMap<u64, usize> = BTreeMap::new();
    let (wal, stats) = Wal::open_with(dir, 0, options, |step| {
        if let Replayed::Record { segment, payload } = step {
            assert!(replayed.insert(payload.to_vec(), segment).is_none());
            *per_segment.entry(segment).or_default() += 1;
        }
    })
    .unwrap();
    wal.close();
    assert_eq!(stats.torn_segments, 0);
    assert!(stats.segments > 20, "{stats:?}");
    let acked_in = acked_in.lock().unwrap();
    assert_eq!(acked_in.len(), writers * per_writer);
    assert_eq!(
        *acked_in, replayed,
        "an ack named another segment than replay"
    );
    for (closed, counted) in rotations {
        let records: usize = per_segment.range(..=closed).map(|(_, n)| n).sum();
        assert_eq!(
            counted, records,
            "rotate reported segment {closed} closed before every ack of it ran"
        );
    }
}
