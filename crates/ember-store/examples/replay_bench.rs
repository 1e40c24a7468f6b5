//! Replay of a large write-ahead log after a crash (issue 13, item 8): time and peak memory.
//!
//! Two steps, each its own process so the peak resident memory measured is the replay's:
//!
//! ```text
//! cargo run -p ember-store --release --example replay_bench -- write DIR 300
//! cargo run -p ember-store --release --example replay_bench -- open DIR 128
//! ```
//!
//! `write DIR MB` ingests variants of the corpus's Go CPU profiles (40 series) through
//! `Store::ingest` until the log holds `MB` MB, then exits without a flush, as `kill -9`
//! leaves a server. `open DIR MIB` copies nothing: it opens the store with
//! `replay_flush_bytes` = `MIB` MiB (0: the whole log into memory, as before the fix), then
//! flushes what is left as `ember server` does at start, and prints the times, the blocks
//! written and the peak resident memory (`VmHWM`). The open consumes the log: copy the
//! directory written once (`cp -a`) for each `open` to compare settings on the same log.

use std::path::Path;
use std::time::Instant;

use ember_pprof::Profile;
use ember_store::{IngestBatch, IngestProfile, Store, StoreOptions};

const GO_CPU: [&str; 4] = [
    "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
    "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
    "pprof/internal/report/testdata/sample.cpu",
];

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `p` with about a fifth of its samples dropped and the rest rescaled, gzip'd: distinct
/// bytes per profile, as from a fleet.
fn variant(p: &Profile, rng: &mut Rng) -> Vec<u8> {
    let mut v = p.clone();
    v.sample.retain(|_| rng.unit() < 0.8);
    for s in &mut v.sample {
        let f = 0.5 + rng.unit();
        for x in &mut s.value {
            *x = ((*x as f64) * f).round() as i64;
        }
    }
    ember_pprof::encode_gzip(&v)
}

fn options(replay_flush_mib: u64) -> StoreOptions {
    StoreOptions {
        retention_nanos: 0,
        replay_flush_bytes: replay_flush_mib << 20,
        ..StoreOptions::default()
    }
}

fn wal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("wal"))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Peak resident memory of this process, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn write(dir: &Path, mb: u64) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora");
    let profiles: Vec<Profile> = GO_CPU
        .iter()
        .map(|f| ember_pprof::decode(&std::fs::read(corpus.join(f)).expect("corpus")).unwrap())
        .collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // A pool of variants, reused: encoding one costs more than ingesting it.
    let pool: Vec<Vec<u8>> = (0..400)
        .map(|i| variant(&profiles[i % profiles.len()], &mut rng))
        .collect();
    let store = Store::open(dir, options(0)).expect("open");
    let t0 = 1_700_000_000_000_000_000i64;
    let started = Instant::now();
    let mut n = 0usize;
    while wal_bytes(dir) < mb * 1_000_000 {
        for _ in 0..500 {
            let batch = IngestBatch {
                profiles: vec![IngestProfile {
                    labels: vec![
                        ("service_name".into(), format!("svc-{}", n % 8)),
                        ("pod".into(), format!("pod-{}", n % 40)),
                    ],
                    time_nanos: t0 + (n as i64) * 250_000_000,
                    pprof: pool[n % pool.len()].clone(),
                    what: "profile".into(),
                }],
            };
            store.ingest("t", batch).expect("ingest");
            n += 1;
        }
    }
    println!(
        "wrote {n} profiles, {:.0} MB of log in {:.1} s",
        wal_bytes(dir) as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    // No flush, no close: what `kill -9` leaves.
    std::process::exit(0);
}

fn open(dir: &Path, replay_flush_mib: u64) {
    let log = wal_bytes(dir);
    let started = Instant::now();
    let store = Store::open(dir, options(replay_flush_mib)).expect("open");
    let opened = started.elapsed();
    let (replay, errors) = store.replay_stats();
    let flush_started = Instant::now();
    store.flush().expect("flush");
    let flushed = flush_started.elapsed();
    println!(
        "replay_flush_bytes {replay_flush_mib} MiB: {:.0} MB of log, {} records ({errors} unreadable), \
         {} blocks written during replay; open {:.1} s + start flush {:.1} s = {:.1} s; peak RSS {:.0} MiB",
        log as f64 / 1e6,
        replay.records,
        store.replay_flushes(),
        opened.as_secs_f64(),
        flushed.as_secs_f64(),
        (opened + flushed).as_secs_f64(),
        peak_rss_mib()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: replay_bench write DIR MB | open DIR REPLAY_FLUSH_MIB";
    let (Some(mode), Some(dir), Some(n)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let n: u64 = n.parse().expect("a number");
    match mode.as_str() {
        "write" => write(Path::new(dir), n),
        "open" => open(Path::new(dir), n),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
