//! Latency of one durable log append at a time, with nothing else running in the log:
//! appends N records of BYTES each (default 1,000 of 62,000 bytes, a realistic gzip'd
//! profile's record) to a fresh log under the temp dir, each waiting for its ack, and prints
//! the 10th, 50th and 90th percentile of the append-to-ack time, the process CPU per
//! append, and the log's own write + fsync time per fsync (`WalStats::sync_micros`).
//!
//! `cargo run --release -p ember-store --example wal_latency -- [N] [BYTES]`
//!
//! Alternate two builds (old, new, old, new) to compare them: the disk's fsync latency on a
//! shared machine swings by an order of magnitude within minutes.

use std::time::Instant;

#[path = "support/mod.rs"]
#[allow(dead_code)] // this example reads no loadgen directory
mod support;
use support::cpu as cpu_secs;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000)
        .max(10);
    let bytes: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(62_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let (wal, _) = ember_store::Wal::open(dir.path(), 0, |_, _| {}).expect("open the log");
    let payload = vec![7u8; bytes];
    let mut millis = Vec::with_capacity(n);
    let cpu = cpu_secs();
    for _ in 0..n {
        let started = Instant::now();
        wal.append_blocking(payload.clone())
            .expect("durable append");
        millis.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let cpu_ms = (cpu_secs() - cpu) * 1000.0 / n as f64;
    millis.sort_by(f64::total_cmp);
    let stats = wal.stats();
    println!(
        "append-to-ack p10 {:.3} median {:.3} p90 {:.3} ms; {cpu_ms:.3} ms CPU per append; \
         {} fsyncs, {:.0} µs written and fsync'd per fsync",
        millis[n / 10],
        millis[n / 2],
        millis[n * 9 / 10],
        stats.fsyncs,
        stats.sync_micros as f64 / stats.fsyncs.max(1) as f64
    );
    wal.close();
}
