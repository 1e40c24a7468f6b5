//! Ingest CPU per profile at the store level (no HTTP): reads a directory written by
//! `ember-loadgen --workload realistic --write-dir DIR` (its `index.tsv` gives each file's
//! labels), then times, single-threaded, (1) decompression alone, (2) decompression and
//! parsing, (3) `Store::ingest` of every profile (one per batch) into a store under
//! `EMBER_BENCH_DIR` (default: the system temp dir). Prints CPU ms per profile for each,
//! then flushes and prints the block bytes per profile.
//!
//! `cargo run -p ember-store --release --example ingest_cpu -- DIR [ROUNDS] [LIMIT]`
//!
//! `LIMIT` reads only the first LIMIT profiles of the directory. With `EMBER_INGEST_ONLY=1`
//! steps (1) and (2) are skipped, so a profiler (`perf record`) sees the ingest alone.

use std::time::Instant;

use ember_pprof::{DecodeLimits, ProfileView};
use ember_store::{IngestBatch, IngestProfile, Store, StoreOptions};

#[path = "support/mod.rs"]
mod support;
use support::{cpu, main_thread_cpu};

/// One profile of the directory: its series labels and its gzip'd bytes.
type Profile = (Vec<(String, String)>, Vec<u8>);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("usage: ingest_cpu DIR [ROUNDS]"));
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1);
    let limit: usize = args
        .get(3)
        .and_then(|r| r.parse().ok())
        .unwrap_or(usize::MAX);
    let ingest_only = std::env::var_os("EMBER_INGEST_ONLY").is_some_and(|v| v == "1");
    let profiles: Vec<Profile> = support::read_written(&dir, limit)
        .into_iter()
        .map(|w| (w.labels, w.bytes))
        .collect();
    {
        let raw = ember_pprof::decompress(&profiles[0].1, &DecodeLimits::default()).expect("gzip");
        let v = ProfileView::parse(&raw).expect("pprof");
        println!(
            "first profile: {} strings, {} mappings, {} functions, {} locations, {} lines, {} samples, {} location ids, {} labels, {} types",
            v.string_count(),
            v.mapping.len(),
            v.function.len(),
            v.location.len(),
            v.lines.len(),
            v.sample.len(),
            v.sample_location_ids.len(),
            v.sample_labels.len(),
            v.sample_type.len()
        );
    }
    let limits = DecodeLimits::default();
    if !ingest_only {
        decode_steps(&profiles, &limits);
    }
    ingest_rounds(&profiles, rounds);
}

/// Steps (1) and (2): decompression alone, then with parsing, and parsing alone.
fn decode_steps(profiles: &[Profile], limits: &DecodeLimits) {
    let n = profiles.len() as f64;
    let limits = *limits;
    let (c0, t0) = (cpu(), Instant::now());
    let mut raw_bytes = 0usize;
    for (_, b) in profiles {
        raw_bytes += ember_pprof::decompress(b, &limits).expect("gzip").len();
    }
    let (c1, t1) = (cpu(), Instant::now());
    for (_, b) in profiles {
        let raw = ember_pprof::decompress(b, &limits).expect("gzip");
        std::hint::black_box(ProfileView::parse(&raw).expect("pprof").sample.len());
    }
    let (c2, t2) = (cpu(), Instant::now());
    println!(
        "{} profiles, {:.0} KB raw on average: decompress {:.3} ms CPU/profile ({:.3} wall), decompress+parse {:.3} ({:.3} wall)",
        profiles.len(),
        raw_bytes as f64 / n / 1000.0,
        (c1 - c0) * 1000.0 / n,
        (t1 - t0).as_secs_f64() * 1000.0 / n,
        (c2 - c1) * 1000.0 / n,
        (t2 - t1).as_secs_f64() * 1000.0 / n,
    );
    let raws: Vec<Vec<u8>> = profiles
        .iter()
        .map(|(_, b)| {
            ember_pprof::decompress(b, &limits)
                .expect("gzip")
                .into_owned()
        })
        .collect();
    for _ in 0..3 {
        let c0 = cpu();
        for raw in &raws {
            std::hint::black_box(ProfileView::parse(raw).expect("pprof").sample.len());
        }
        println!(
            "parse alone {:.3} ms CPU/profile",
            (cpu() - c0) * 1000.0 / n
        );
    }
    let c0 = cpu();
    for _ in 0..2000 {
        std::hint::black_box(ProfileView::parse(&raws[0]).expect("pprof").sample.len());
    }
    println!(
        "parse of the first profile, hot: {:.3} ms CPU",
        (cpu() - c0) * 1000.0 / 2000.0
    );
    drop(raws);
}

/// Step (3): `rounds` passes of `Store::ingest` over every profile, then the flush.
fn ingest_rounds(profiles: &[Profile], rounds: usize) {
    let n = profiles.len() as f64;
    let base = std::env::var_os("EMBER_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let data = base.join(format!("ember-ingest-cpu-{}", std::process::id()));
    let store = Store::open(&data, StoreOptions::default()).expect("store");
    for round in 0..rounds {
        let (c0, t0, m0) = (cpu(), Instant::now(), main_thread_cpu());
        for (i, (labels, bytes)) in profiles.iter().enumerate() {
            let batch = IngestBatch {
                profiles: vec![IngestProfile {
                    labels: labels.clone(),
                    time_nanos: 1_700_000_000_000_000_000 + (round * profiles.len() + i) as i64,
                    pprof: bytes.clone(),
                    what: "profile".into(),
                }],
            };
            store.ingest("t", batch).expect("ingest");
        }
        let (c1, t1, m1) = (cpu(), Instant::now(), main_thread_cpu());
        println!(
            "round {round}: Store::ingest {:.3} ms CPU/profile ({:.3} wall, {:.3} in the ingesting thread)",
            (c1 - c0) * 1000.0 / n,
            (t1 - t0).as_secs_f64() * 1000.0 / n,
            (m1 - m0) * 1000.0 / n,
        );
    }
    let stats = store.head_stats();
    let (c0, t0) = (cpu(), Instant::now());
    store.flush().expect("flush");
    let (blocks, bytes, _) = store.disk_usage();
    println!(
        "head before the flush: {stats:?}; flush {:.2} s CPU ({:.2} wall): {blocks} block(s), {:.0} bytes per profile",
        cpu() - c0,
        t0.elapsed().as_secs_f64(),
        bytes as f64 / (n * rounds as f64),
    );
    store.close();
    let _ = std::fs::remove_dir_all(&data);
}
