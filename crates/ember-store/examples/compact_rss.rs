//! Peak memory and time of compacting a store's blocks, in a process of its own (so the
//! figures are compaction's alone, not the ingest's that wrote the blocks).
//!
//! `compact_rss STORE_DIR [COMPACT_MAX_BYTES]`: copies nothing; opens the store at
//! `STORE_DIR` (as `flush_cpu` leaves it with `EMBER_KEEP_STORE=DIR`), compacts with
//! `compact_max_bytes` set (default: the store's default), and prints blocks and bytes before
//! and after, the wall and CPU time of `Store::compact`, and the resident memory before and
//! at its peak (`VmHWM`). Work on a copy: compaction rewrites the store.

use std::time::Instant;

use ember_store::{Store, StoreOptions};

#[path = "support/mod.rs"]
#[allow(dead_code)] // the directory reader is for the examples that ingest
mod support;
use support::cpu;

/// The server's allocator.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `VmRSS` and `VmHWM` of this process, in MiB.
fn rss() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("usage: compact_rss STORE_DIR [MAX]"));
    let mut options = StoreOptions::default();
    if let Some(max) = args.get(2).and_then(|m| m.parse().ok()) {
        options.compact_max_bytes = max;
    }
    let store = Store::open(&dir, options).expect("store");
    let (blocks, bytes, _) = store.disk_usage();
    let (rss0, _) = rss();
    let (c0, t0) = (cpu(), Instant::now());
    let removed = store.compact().expect("compact");
    let (c1, t1) = (cpu(), Instant::now());
    let (rss1, hwm) = rss();
    let (after, after_bytes, _) = store.disk_usage();
    println!(
        "compaction: {blocks} blocks ({bytes} bytes) -> {after} ({after_bytes} bytes), {removed} removed; {:.2} s wall, {:.2} s CPU; RSS before {rss0:.0} MiB, after {rss1:.0} MiB, peak {hwm:.0} MiB",
        (t1 - t0).as_secs_f64(),
        c1 - c0,
    );
    store.close();
}
