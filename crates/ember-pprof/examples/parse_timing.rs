//! Times the ingest path's decode on a directory of gzip'd profiles (such as one written by
//! `ember-loadgen --write-dir`): decompression alone, then `ProfileView::parse_reusing`
//! right after each decompression (the raw bytes still in cache, the tables of the previous
//! profile reused, as the store does), then one profile parsed again and again (hot).
//!
//! `cargo run --release -p ember-pprof --example parse_timing -- DIR [LIMIT] [HOT_REPEATS]`

/// This process's user+sys CPU time, in seconds (the machine is shared: wall time is not
/// this program's).
fn cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<f64> = (stat.rsplit(')').next().unwrap_or(""))
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

/// A stand-in for `Instant` that measures this process's CPU time.
#[derive(Clone, Copy)]
struct Instant(f64);

impl Instant {
    fn now() -> Self {
        Instant(cpu())
    }
    fn elapsed(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64((cpu() - self.0).max(0.0))
    }
}

use ember_pprof::{DecodeLimits, ProfileView, ViewTables};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = std::path::PathBuf::from(args.next().expect("usage: parse_timing DIR [LIMIT]"));
    let limit: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let hot: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".pb.gz"))
        .collect();
    names.sort();
    names.truncate(limit);
    let bodies: Vec<Vec<u8>> = names
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect();
    let n = bodies.len() as f64;
    let limits = DecodeLimits::default();
    let t = Instant::now();
    let mut raw_bytes = 0;
    for b in &bodies {
        raw_bytes += ember_pprof::decompress(b, &limits).expect("gzip").len();
    }
    let inflate = t.elapsed().as_secs_f64() * 1e3 / n;
    let mut tables = ViewTables::default();
    let t = Instant::now();
    for b in &bodies {
        let raw = ember_pprof::decompress(b, &limits).expect("gzip");
        let v = ProfileView::parse_reusing(&raw, u64::MAX, tables).expect("pprof");
        std::hint::black_box(v.sample.len());
        tables = v.into_tables();
    }
    let both = t.elapsed().as_secs_f64() * 1e3 / n;
    let parse = both - inflate;
    let raw = ember_pprof::decompress(&bodies[0], &limits).expect("gzip");
    let t = Instant::now();
    for _ in 0..hot {
        let v = ProfileView::parse_reusing(&raw, u64::MAX, tables).expect("pprof");
        std::hint::black_box(v.sample.len());
        tables = v.into_tables();
    }
    let hot_ms = t.elapsed().as_secs_f64() * 1e3 / hot.max(1) as f64;
    println!(
        "{} profiles, {:.0} KB raw on average: inflate {inflate:.3} ms, inflate+parse {:.3} ms \
         (so parse {:.3} ms, {:.2} GB/s), one profile parsed hot {hot_ms:.3} ms ({:.2} GB/s)",
        bodies.len(),
        raw_bytes as f64 / n / 1e3,
        both,
        parse,
        raw_bytes as f64 / n / parse / 1e6,
        raw.len() as f64 / hot_ms / 1e6,
    );
}
