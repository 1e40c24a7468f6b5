//! CPU of the flush into a block and of the compaction after it, per profile, at the store
//! level (no HTTP), as the server runs them (with its allocator, jemalloc): profiles of a directory written by
//! `ember-loadgen --workload realistic --write-dir DIR` are ingested in order, and after
//! every `PER_FLUSH` of them the store is flushed and then compacted
//! (`Store::flush`, `Store::compact`, what the server's timer calls).
//!
//! `cargo run -p ember-store --release --example flush_cpu -- DIR [PER_FLUSH] [ROUNDS]`
//!
//! Profile times: the live directory stamps every profile with one second, which a server
//! never sees; here each series' profiles are 10 s apart (its `k`-th profile at
//! `base + 10 s × k`), as an agent sends them, so a flush of `PER_FLUSH` (default 600: 20
//! services' five minutes at one profile per 10 s per pod… about, at the default flush
//! interval) spans the ten-minute time chunks it would. `ROUNDS` (default 2) passes over the
//! directory, each later in time than the one before.
//!
//! `EMBER_STEP_SECONDS=S` spaces each series' profiles `S` seconds apart instead of 10: the
//! live directory's 2,000 profiles come from ~60 pods, so at 10 s a flush of 600 spans ~100 s
//! of profile time; at 30 s, the five minutes the server's default interval would hold
//! (which decides how many flushes share a ten-minute time chunk).
//!
//! `EMBER_COMPACT_MAX_BYTES=N` sets [`StoreOptions::compact_max_bytes`] (8388608: the
//! default before session 18).
//!
//! With `EMBER_KEEP_STORE=DIR` the store is written to `DIR` and kept (for `compact_rss`);
//! with `EMBER_NO_COMPACT=1` it is only flushed, never compacted (the blocks a live server
//! writes before compaction).
//!
//! With `EMBER_PERF_CTL=FIFO` it writes `enable` to FIFO before each flush and `disable`
//! after each compaction, for `perf record --control fifo:FIFO -D -1`: the profile then
//! holds the flushes and compactions alone.

use std::io::Write;
use std::time::Instant;

use ember_store::{IngestBatch, IngestProfile, Store, StoreOptions};

// `cpu` counts every thread: the block write runs on the object store's runtime thread.
#[path = "support/mod.rs"]
mod support;
use support::cpu;

/// The server's allocator: freeing a flushed head's maps costs several times more under
/// glibc's malloc, which would misstate what the server pays.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// One profile: series labels, offset of its time from the round's start, gzip'd bytes.
type Profile = (Vec<(String, String)>, i64, Vec<u8>);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("usage: flush_cpu DIR [PER_FLUSH]"));
    let per_flush: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(600);
    let rounds: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(2);
    let mut profiles: Vec<Profile> = Vec::new();
    let mut per_series: std::collections::HashMap<String, i64> = Default::default();
    let step: i64 = std::env::var("EMBER_STEP_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
        * 1_000_000_000;
    for w in support::read_written(&dir, usize::MAX) {
        let k = per_series.entry(w.key).or_insert(0);
        let offset = *k * step;
        *k += 1;
        profiles.push((w.labels, offset, w.bytes));
    }
    // A round spans its longest series, plus one step.
    let span = (per_series.values().max().copied().unwrap_or(0) + 1) * step;
    let mut ctl = std::env::var_os("EMBER_PERF_CTL").map(|p| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .expect("perf control fifo")
    });
    let mut perf = |cmd: &str| {
        if let Some(f) = ctl.as_mut() {
            let _ = writeln!(f, "{cmd}");
            let _ = f.flush();
        }
    };
    let base = std::env::var_os("EMBER_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let keep = std::env::var_os("EMBER_KEEP_STORE").map(std::path::PathBuf::from);
    let data = keep
        .clone()
        .unwrap_or_else(|| base.join(format!("ember-flush-cpu-{}", std::process::id())));
    let no_compact = std::env::var_os("EMBER_NO_COMPACT").is_some_and(|v| v == "1");
    let mut options = StoreOptions::default();
    if let Some(max) = std::env::var("EMBER_COMPACT_MAX_BYTES")
        .ok()
        .and_then(|m| m.parse().ok())
    {
        options.compact_max_bytes = max;
    }
    let store = Store::open(&data, options).expect("store");
    // 2026-11-27 00:00 UTC: a round of ~17 minutes stays inside the day.
    let day = 1_795_737_600_000_000_000i64;
    let (mut flush_cpu, mut flush_wall, mut compact_cpu, mut compact_wall) = (0.0, 0.0, 0.0, 0.0);
    let (mut flushes, mut compacted, mut ingested) = (0usize, 0usize, 0usize);
    let mut since_flush = 0usize;
    let total = profiles.len() * rounds;
    for round in 0..rounds {
        for (labels, offset, bytes) in &profiles {
            let batch = IngestBatch {
                profiles: vec![IngestProfile {
                    labels: labels.clone(),
                    time_nanos: day + round as i64 * span + offset,
                    pprof: bytes.clone(),
                    what: "profile".into(),
                }],
            };
            store.ingest("t", batch).expect("ingest");
            ingested += 1;
            since_flush += 1;
            if since_flush < per_flush && ingested < total {
                continue;
            }
            since_flush = 0;
            perf("enable");
            let (c0, t0) = (cpu(), Instant::now());
            let stats = store.flush().expect("flush");
            let (c1, t1) = (cpu(), Instant::now());
            let removed = if no_compact {
                0
            } else {
                store.compact().expect("compact")
            };
            let (c2, t2) = (cpu(), Instant::now());
            perf("disable");
            flushes += 1;
            compacted += removed;
            flush_cpu += c1 - c0;
            flush_wall += (t1 - t0).as_secs_f64();
            compact_cpu += c2 - c1;
            compact_wall += (t2 - t1).as_secs_f64();
            println!(
                "flush {flushes}: {} profiles, {:.0} ms CPU ({:.0} wall), block {} bytes; compaction {:.0} ms CPU ({:.0} wall), {removed} blocks merged",
                stats.records,
                (c1 - c0) * 1000.0,
                (t1 - t0).as_secs_f64() * 1000.0,
                stats.block_bytes,
                (c2 - c1) * 1000.0,
                (t2 - t1).as_secs_f64() * 1000.0,
            );
        }
    }
    let (blocks, bytes, _) = store.disk_usage();
    let n = ingested as f64;
    println!(
        "{ingested} profiles, {flushes} flushes of {per_flush}: flush {:.3} ms CPU/profile ({:.3} wall), compaction {:.3} ms CPU/profile ({:.3} wall, {compacted} blocks merged away), both {:.3}; {blocks} block(s), {:.0} bytes per profile",
        flush_cpu * 1000.0 / n,
        flush_wall * 1000.0 / n,
        compact_cpu * 1000.0 / n,
        compact_wall * 1000.0 / n,
        (flush_cpu + compact_cpu) * 1000.0 / n,
        bytes as f64 / n,
    );
    store.close();
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&data);
    }
}
