//! Flame graphs of wide ranges at the query level (no HTTP), on a store directory that
//! already holds data (for example one that `ember server` filled from `ember-loadgen
//! --workload realistic --backfill-from ...`; stop the server first).
//!
//! For each range (1 h, 24 h and 7 d ending at `END`), prints the merged frames, the merge
//! time (`Store::merge_stacks`), the flame graph time (`Querier::flamebearer` at the default
//! node limit: merge, cut, timeline, JSON) and the top table (`Format::Top`), first run
//! (cold) and best of ROUNDS (warm), and the process's peak resident memory. `CHECK=1` also
//! checks the node-limited merge cuts like the full merge; `NO_FULL=1` skips timing the full
//! merge; `RANGES=1h,7d` picks ranges.
//!
//! `cargo run -p ember-query --release --example range_timing -- DATA_DIR END_UNIX_SECONDS [ROUNDS]`

use std::time::Instant;

use ember_query::{NameRule, Querier, QueryRequest};
use ember_store::{Store, StoreOptions};

fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<u64>().ok())
        .map_or(0, |k| k / 1024)
}

/// User plus system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: range_timing DATA_DIR END_UNIX_SECONDS [ROUNDS]";
    let dir = std::path::PathBuf::from(args.get(1).expect(usage));
    let end: i64 = args.get(2).and_then(|e| e.parse().ok()).expect(usage);
    let rounds: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(3);
    let only: Option<String> = std::env::var("RANGES").ok();
    let opened = Instant::now();
    let options = StoreOptions {
        retention_nanos: 0,
        ..StoreOptions::default()
    };
    let store = Store::open(&dir, options).expect("open store");
    println!(
        "opened in {:.0} ms, peak RSS {} MiB",
        opened.elapsed().as_secs_f64() * 1000.0,
        peak_rss_mib()
    );
    let querier = Querier::new(&store);
    let query = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}";
    for (name, hours) in [("1h", 1), ("24h", 24), ("7d", 168)] {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|x| x == name))
        {
            continue;
        }
        let ns = 1_000_000_000i64;
        let req = QueryRequest::parse(
            query,
            None,
            NameRule::PyroscopeApp,
            (end - hours * 3600) * ns,
            end * ns,
        )
        .expect("request");
        let mut flame_ms = Vec::new();
        let cpu = cpu_seconds();
        for _ in 0..rounds {
            let t = Instant::now();
            let v = querier.flamebearer("anonymous", &req, "t").expect("flame");
            flame_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(v);
        }
        let flame_rss = peak_rss_mib();
        let flame_cpu = (cpu_seconds() - cpu) * 1000.0 / rounds as f64;
        let mut top_ms = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let out = querier.render("anonymous", &req, ember_query::Format::Top, "t");
            top_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            std::hint::black_box(out.ok());
        }
        let mut merge_ms = vec![0.0];
        let mut frames = 0;
        let full_rounds = if std::env::var_os("NO_FULL").is_some() {
            0
        } else {
            rounds
        };
        for _ in 0..full_rounds {
            let t = Instant::now();
            let m = querier.merge("anonymous", &req).expect("merge");
            merge_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            frames = m.frames.len();
        }
        if std::env::var_os("CHECK").is_some() {
            let q = ember_store::Query {
                selector: req.selector.clone(),
                profile_type: req.profile_type.clone(),
                start_nanos: req.start_nanos,
                end_nanos: req.end_nanos,
            };
            let heavy = store.merge_stacks_heavy("anonymous", &q, req.max_nodes);
            let full = store.merge_stacks("anonymous", &q);
            let a = ember_query::Tree::from_merged_cut(&heavy, req.max_nodes);
            let b = ember_query::Tree::from_merged_cut(&full, req.max_nodes);
            println!(
                "{name}: heavy merge {} frames; cut trees equal: {}",
                heavy.frames.len(),
                format!("{a:?}") == format!("{b:?}")
            );
        }
        let best = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
        println!(
            "{name}: flame graph first {:.0} ms best {:.0} ms, CPU {flame_cpu:.0} ms per run, peak RSS {flame_rss} MiB; top first {:.0} ms best {:.0} ms; full merge ({frames} frames) first {:.0} ms best {:.0} ms, peak RSS {} MiB",
            flame_ms[0],
            best(&flame_ms),
            top_ms[0],
            best(&top_ms),
            merge_ms[0],
            best(&merge_ms),
            peak_rss_mib()
        );
    }
}
