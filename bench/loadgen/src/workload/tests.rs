//! Tests of the workload as a whole: determinism, decodability, labels, sizes, stack counts.

use std::sync::OnceLock;
use std::time::Instant;

use super::*;

/// The bases, read once for all tests.
fn bases() -> Vec<Base> {
    static BASES_READ: OnceLock<Vec<Base>> = OnceLock::new();
    BASES_READ
        .get_or_init(|| Base::load_all(&default_corpora_dir()).expect("corpora"))
        .clone()
}

fn workload(churn: Churn, services: usize, seed: u64) -> Workload {
    let config = WorkloadConfig {
        seed,
        services,
        churn,
        ..WorkloadConfig::default()
    };
    Workload::new(config, bases()).unwrap()
}

#[test]
fn explore() {
    let w = workload(Churn::High, 1, 1);
    let t0 = Instant::now();
    let mut stats = RunStats::default();
    for k in 0..200 {
        stats.add(&w.profile(0, k));
    }
    eprintln!("{:?} in {:?}", stats.summary(), t0.elapsed());
}

#[test]
fn explore_size() {
    let b = &bases()[0];
    let raw = std::fs::read(default_corpora_dir().join(b.spec.path)).unwrap();
    let p = ember_pprof::decode(&raw).unwrap();
    let enc = ember_pprof::encode(&p);
    eprintln!("raw {} fast {} default {} strings {} samples {} labels {}", enc.len(), build::gzip_fast(&enc).len(), ember_pprof::encode_gzip(&p).len(), p.string_table.len(), p.sample.len(), p.sample.iter().map(|s| s.label.len()).sum::<usize>());
    let g = workload(Churn::High, 1, 1).profile(0, 100);
    let q = ember_pprof::decode(&g.bytes).unwrap();
    eprintln!("gen raw {} strings {} samples {}", ember_pprof::encode(&q).len(), q.string_table.len(), q.sample.len());
}

#[test]
fn explore_levels() {
    use std::io::Write;
    let g = workload(Churn::High, 1, 1).profile(0, 100);
    let q = ember_pprof::encode(&ember_pprof::decode(&g.bytes).unwrap());
    let b = &bases()[0];
    let p = ember_pprof::encode(&ember_pprof::decode(&std::fs::read(default_corpora_dir().join(b.spec.path)).unwrap()).unwrap());
    for level in 1..=6 {
        let z = |raw: &[u8]| { let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level)); e.write_all(raw).unwrap(); e.finish().unwrap().len() };
        let t0 = Instant::now();
        for _ in 0..20 { z(&q); }
        eprintln!("level {level}: base {} gen {} {:?}/20", z(&p), z(&q), t0.elapsed());
    }
}

#[test]
#[ignore = "a whole day: minutes in debug builds; run with --release -- --ignored"]
fn explore_day() {
    for churn in [Churn::High, Churn::Low] {
        let w = workload(churn, 1, 1);
        let t0 = Instant::now();
        let mut stats = RunStats::default();
        for p in w.generate(8640, 2) {
            stats.add(&p);
        }
        eprintln!("{churn:?}: {:?} in {:?}", stats.summary(), t0.elapsed());
    }
}
