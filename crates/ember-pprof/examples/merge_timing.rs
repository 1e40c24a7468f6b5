//! Times decoding and merging N copies of one profile, the shape of the
//! "merge 1,000 Go CPU profiles" benchmark.
//!
//! `cargo run --release -p ember-pprof --example merge_timing -- <profile> [N]`

use std::time::Instant;

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: merge_timing <profile> [N]");
        std::process::exit(2);
    };
    let n: usize = args
        .next()
        .and_then(|s| s.to_str().and_then(|s| s.parse().ok()))
        .unwrap_or(1000);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let t = Instant::now();
    let mut profiles = Vec::with_capacity(n);
    for _ in 0..n {
        match ember_pprof::decode(&bytes) {
            Ok(p) => profiles.push(p),
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    }
    let decoded = t.elapsed();
    let t = Instant::now();
    let merged = match ember_pprof::merge(&profiles) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let merging = t.elapsed();
    println!(
        "{n} × {} bytes: decode {:.3}s, merge {:.3}s -> {} samples, {} locations",
        bytes.len(),
        decoded.as_secs_f64(),
        merging.as_secs_f64(),
        merged.sample.len(),
        merged.location.len()
    );
}
