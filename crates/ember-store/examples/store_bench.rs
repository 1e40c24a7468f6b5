//! Store-level benchmark on realistic data (issue 4, line 6), one command:
//!
//! `cargo run -p ember-store --release --example store_bench`
//!
//! Input: the corpus's distinct Go CPU profiles (pprof.gz), each push a fresh variant (every
//! sample kept with probability 0.8, its values scaled by a random factor in [0.5, 1.5], then
//! re-encoded), so no two stored profiles are byte-identical, as with a real fleet.
//! Measures, printing wall and CPU (user+sys) time and the load average:
//! - WAL append: profiles/s acknowledged durable with 32 and 128 concurrent writers (group commit),
//!   and full ingest (append + decode + head insert) with 8 writers;
//! - one service's day: 8,640 profiles from 100 label sets at 10 s intervals; bytes of
//!   blocks after flush versus the input pprof.gz bytes; reopen (load from blocks) time;
//!   merging the day and one hour into flame-graph stacks and into a pprof profile.
//!
//! Environment: `EMBER_BENCH_DIR` (default: the system temp dir) for the data directory.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ember_pprof::Profile;
use ember_proto::types::LabelPair;
use ember_store::{
    IngestBatch, IngestProfile, IngestRecord, Query, Store, StoreOptions, Wal, parse_selector,
};

const GO_CPU: [&str; 6] = [
    "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
    "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
    "pyroscope/pkg/pprof/testdata/single_group_with_optional_span_id.pb.gz",
    "pyroscope/pkg/pprof/testdata/gotruncatefix/cpu_go_truncated_1.pb.gz",
    "pprof/internal/report/testdata/sample.cpu",
];

/// Day of profiles at 10 s resolution.
const DAY: usize = 8_640;
const STEP_NS: i64 = 10_000_000_000;
const T0: i64 = 1_700_000_000_000_000_000;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A variant of `p`: each sample kept with probability 0.8, values scaled in [0.5, 1.5].
fn variant(p: &Profile, rng: &mut Rng) -> Vec<u8> {
    let mut v = p.clone();
    v.sample.retain(|_| rng.unit() < 0.8);
    for s in &mut v.sample {
        let f = 0.5 + rng.unit();
        // Keep the period relation of Go CPU profiles: cpu = samples * period.
        let count = ((s.value.first().copied().unwrap_or(1) as f64) * f)
            .round()
            .max(1.0) as i64;
        let scale = s.value.first().copied().unwrap_or(1).max(1);
        for x in &mut s.value {
            *x = *x / scale * count;
        }
    }
    ember_pprof::encode_gzip(&v)
}

fn cpu_seconds() -> f64 {
    // utime and stime of /proc/self/stat, in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn batch(bytes: Vec<u8>, pod: usize, time_nanos: i64) -> IngestBatch {
    IngestBatch {
        profiles: vec![IngestProfile {
            labels: vec![
                ("service_name".into(), "checkout".into()),
                ("pod".into(), format!("pod-{pod:02}")),
            ],
            time_nanos,
            pprof: bytes,
            what: "profile".into(),
        }],
    }
}

/// The write-ahead log record of one profile, as `Store::ingest` writes it.
fn record(bytes: Vec<u8>, pod: usize, time_nanos: i64) -> IngestRecord {
    IngestRecord {
        tenant: "bench".into(),
        labels: vec![
            LabelPair {
                name: "service_name".into(),
                value: "checkout".into(),
            },
            LabelPair {
                name: "pod".into(),
                value: format!("pod-{pod:02}"),
            },
        ],
        time_nanos,
        profile: bytes,
        received_nanos: time_nanos,
    }
}

fn dir_bytes(dir: &Path, ext: &str) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == ext))
                .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

/// Runs `f` `n` times; returns (best, median) in milliseconds.
fn time_ms(n: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    v.sort_by(f64::total_cmp);
    (v[0], v[n / 2])
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora");
    let mut seen = std::collections::HashSet::new();
    let profiles: Vec<Profile> = GO_CPU
        .iter()
        .filter_map(|f| {
            let bytes = std::fs::read(corpus.join(f)).expect("corpus file");
            // Two corpus paths hold byte-identical files; use each profile once.
            seen.insert(bytes.clone())
                .then(|| ember_pprof::decode(&bytes).expect("corpus profile"))
        })
        .collect();
    println!(
        "inputs: {} distinct Go CPU profiles; durations {:?} s",
        profiles.len(),
        profiles
            .iter()
            .map(|p| p.duration_nanos as f64 / 1e9)
            .collect::<Vec<_>>()
    );
    let base = std::env::var_os("EMBER_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("ember-store-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    println!("load average at start: {}", load());

    // Variants for the whole day, generated up front so timing covers only the store.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let day: Vec<Vec<u8>> = (0..DAY)
        .map(|i| variant(&profiles[i % profiles.len()], &mut rng))
        .collect();
    let input_bytes: u64 = day.iter().map(|b| b.len() as u64).sum();

    // 0. What decoding alone costs (the server decodes before the store sees a profile).
    {
        let (c0, t0) = (cpu_seconds(), Instant::now());
        for b in &day {
            std::hint::black_box(ember_pprof::decode(b).unwrap());
        }
        println!(
            "decode only (1 thread, owned Profile): {DAY} profiles in wall {:.2} s, cpu {:.2} s",
            t0.elapsed().as_secs_f64(),
            cpu_seconds() - c0
        );
        // The ingest path: gunzip, then the borrowed view the store interns from.
        let limits = ember_pprof::DecodeLimits::default();
        let (c0, t0) = (cpu_seconds(), Instant::now());
        for b in &day {
            let raw = ember_pprof::decompress(b, &limits).unwrap();
            std::hint::black_box(ember_pprof::ProfileView::parse(&raw).unwrap().sample.len());
        }
        println!(
            "decode only (1 thread, ingest ProfileView): {DAY} profiles in wall {:.2} s, cpu {:.2} s",
            t0.elapsed().as_secs_f64(),
            cpu_seconds() - c0
        );
    }

    // 1. WAL append with concurrent writers: durable acks per second.
    for writers in [32usize, 128] {
        let dir = base.join(format!("wal-{writers}"));
        std::fs::create_dir_all(&dir).unwrap();
        let wal = Arc::new(Wal::open(&dir.join("wal"), 0, |_, _| {}).unwrap().0);
        let total = 20_000usize;
        let next = Arc::new(AtomicUsize::new(0));
        let day = Arc::new(day.clone());
        let (c0, t0) = (cpu_seconds(), Instant::now());
        let handles: Vec<_> = (0..writers)
            .map(|_| {
                let (wal, next, day) = (wal.clone(), next.clone(), day.clone());
                std::thread::spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= total {
                            break;
                        }
                        let r = record(day[i % DAY].clone(), i % 100, T0 + i as i64);
                        let (tx, rx) = std::sync::mpsc::channel();
                        wal.append(
                            prost::Message::encode_to_vec(&r),
                            Box::new(move |res| {
                                let _ = tx.send(res);
                            }),
                        );
                        rx.recv().unwrap().unwrap();
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
        let w = wal.stats();
        println!(
            "wal append: {total} profiles, {writers} writers: {:.0} profiles/s, {:.1} MB/s; {} fsyncs ({:.1} records each); wall {secs:.2} s, cpu {cpu:.2} s",
            total as f64 / secs,
            w.bytes as f64 / secs / 1e6,
            w.fsyncs,
            w.records as f64 / w.fsyncs.max(1) as f64
        );
        println!(
            "  mean write+fsync per group: {:.2} ms",
            w.sync_micros as f64 / 1e3 / w.fsyncs.max(1) as f64
        );
        wal.close();
    }

    // 2. The day: full ingest (append + decode + insert), 8 writers.
    let dir = base.join("day");
    {
        let store = Arc::new(Store::open(&dir, StoreOptions::default()).unwrap());
        let writers = 8;
        let next = Arc::new(AtomicUsize::new(0));
        let day = Arc::new(day);
        let (c0, t0) = (cpu_seconds(), Instant::now());
        let handles: Vec<_> = (0..writers)
            .map(|_| {
                let (store, next, day) = (store.clone(), next.clone(), day.clone());
                std::thread::spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= DAY {
                            break;
                        }
                        let b = batch(day[i].clone(), i % 100, T0 + i as i64 * STEP_NS);
                        store.ingest("bench", b).unwrap();
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        let (secs, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
        println!(
            "ingest (append + decode + insert): {DAY} profiles, {writers} writers: {:.0} profiles/s; wall {secs:.2} s, cpu {cpu:.2} s",
            DAY as f64 / secs
        );
        let (c0, t0) = (cpu_seconds(), Instant::now());
        let f = store.flush().unwrap();
        println!(
            "flush: {} records, {} WAL bytes -> {} block bytes; wall {:.2} s, cpu {:.2} s",
            f.records,
            f.wal_bytes,
            f.block_bytes,
            t0.elapsed().as_secs_f64(),
            cpu_seconds() - c0
        );
        store.close();
    }
    let blocks = dir_bytes(&dir.join("blocks"), "blk");
    let wal_left = dir_bytes(&dir.join("wal"), "wal");
    println!(
        "storage: {blocks} bytes of blocks (+{wal_left} bytes of empty WAL) for {input_bytes} input pprof.gz bytes = {:.2}% ({:.0} bytes/profile)",
        blocks as f64 * 100.0 / input_bytes as f64,
        blocks as f64 / DAY as f64
    );

    // 3. Queries on the store reopened from its block.
    let t0 = Instant::now();
    let store = Store::open(&dir, StoreOptions::default()).unwrap();
    println!(
        "reopen (load block): {:.0} ms",
        t0.elapsed().as_secs_f64() * 1e3
    );
    let q = |hours: i64| Query {
        selector: parse_selector("{service_name=\"checkout\"}").unwrap(),
        profile_type: Some("process_cpu:cpu:nanoseconds:cpu:nanoseconds".into()),
        start_nanos: T0,
        end_nanos: T0 + hours * 3_600_000_000_000 - 1,
    };
    let (day_q, hour_q) = (q(24), q(1));
    let m = store.merge_stacks("bench", &day_q);
    assert_eq!(m.profiles, DAY, "the day holds every profile");
    let h = store.merge_stacks("bench", &hour_q);
    assert_eq!(h.profiles, 360);
    let c0 = cpu_seconds();
    let (best, median) = time_ms(9, || {
        std::hint::black_box(store.merge_stacks("bench", &day_q));
    });
    let cpu_day = (cpu_seconds() - c0) / 9.0 * 1e3;
    println!(
        "merge day ({} profiles, {} series) into flame-graph stacks ({} stacks): best {best:.1} ms, median {median:.1} ms, cpu {cpu_day:.1} ms/query",
        m.profiles,
        m.series,
        m.stacks().len()
    );
    let (best, median) = time_ms(21, || {
        std::hint::black_box(store.merge_stacks("bench", &hour_q));
    });
    println!(
        "merge hour ({} profiles) into flame-graph stacks: best {best:.2} ms, median {median:.2} ms",
        h.profiles
    );
    let (best, median) = time_ms(9, || {
        std::hint::black_box(store.merge_profile("bench", &day_q));
    });
    println!(
        "merge day into a pprof profile (full symbols): best {best:.1} ms, median {median:.1} ms"
    );
    let (best, median) = time_ms(21, || {
        std::hint::black_box(store.merge_profile("bench", &hour_q));
    });
    println!(
        "merge hour into a pprof profile (full symbols): best {best:.2} ms, median {median:.2} ms"
    );
    println!("load average at end: {}", load());
    store.close();
    drop(store);
    let _ = std::fs::remove_dir_all(&base);
}
