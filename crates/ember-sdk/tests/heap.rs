//! Heap sampling against the true allocations: a known large live allocation site must
//! dominate `inuse_space` and be estimated within 10 %; a churning site's `alloc_space`
//! within 15 % of the bytes it really allocated, its `inuse_space` back to zero once freed.
//!
//! This binary samples every 256 KiB on average (tighter estimates from fewer bytes than
//! the 2 MiB default; the estimator is the same). Per-site checks need frame pointers (see
//! `ember_sdk::FRAME_POINTERS`); without them the totals over all sites are checked.

mod common;

use std::time::Duration;

use common::*;

const RATE: usize = 256 << 10;

#[global_allocator]
static ALLOC: ember_sdk::SamplingAllocator =
    ember_sdk::SamplingAllocator::with_rate(std::alloc::System, RATE);

#[inline(never)]
fn big_site(mib: usize) -> Vec<Vec<u8>> {
    (0..mib).map(|i| vec![i as u8; 1 << 20]).collect()
}

#[inline(never)]
fn churn_site(total: usize) -> u64 {
    let mut acc = 0u64;
    for i in 0..total / (16 << 10) {
        let v = std::hint::black_box(vec![i as u8; 16 << 10]);
        acc += u64::from(v[7]);
    }
    acc
}

/// (alloc_space, inuse_space) of the samples whose stack goes through `site`, or of all.
fn space(p: &ember_pprof::Profile, site: Option<&str>) -> (f64, f64) {
    let mut out = (0.0, 0.0);
    for s in &p.sample {
        if site.is_none_or(|name| stack_has(p, s, name)) {
            out.0 += s.value[1] as f64;
            out.1 += s.value[3] as f64;
        }
    }
    out
}

fn within(got: f64, want: f64, tolerance: f64) -> bool {
    (got - want).abs() <= want * tolerance
}

#[test]
fn estimates_match_the_true_allocations() {
    const MIB: f64 = (1 << 20) as f64;
    let mut keep = big_site(128);
    std::hint::black_box(churn_site(1 << 30));
    assert!(ember_sdk::heap_profiling_enabled());
    let p = ember_sdk::heap_profile().unwrap();
    let p = ember_pprof::decode(&ember_pprof::encode_gzip(&p)).unwrap();
    let types: Vec<_> = p
        .sample_type
        .iter()
        .map(|t| p.string_table[t.r#type as usize].as_str())
        .collect();
    assert_eq!(
        types,
        [
            "alloc_objects",
            "alloc_space",
            "inuse_objects",
            "inuse_space"
        ]
    );
    if ember_sdk::FRAME_POINTERS {
        let (big_alloc, big_inuse) = space(&p, Some("big_site"));
        let (churn_alloc, churn_inuse) = space(&p, Some("churn_site"));
        eprintln!(
            "big: alloc {:.1} MiB inuse {:.1} MiB; churn: alloc {:.1} MiB inuse {:.1} MiB",
            big_alloc / MIB,
            big_inuse / MIB,
            churn_alloc / MIB,
            churn_inuse / MIB
        );
        assert!(
            within(big_inuse, 128.0 * MIB, 0.10),
            "big inuse {big_inuse}"
        );
        assert!(
            within(churn_alloc, 1024.0 * MIB, 0.15),
            "churn alloc {churn_alloc}"
        );
        assert!(
            churn_inuse < 2.0 * MIB,
            "churn freed everything: {churn_inuse}"
        );
        // The known site dominates inuse_space.
        let top = p.sample.iter().max_by_key(|s| s.value[3]).expect("samples");
        assert!(
            stack_has(&p, top, "big_site"),
            "largest inuse stack is big_site's"
        );
        keep.truncate(64);
        let p2 = ember_sdk::heap_profile().unwrap();
        let (alloc2, inuse2) = space(&p2, Some("big_site"));
        assert!(
            within(inuse2, 64.0 * MIB, 0.15),
            "after freeing half: {inuse2}"
        );
        assert!(
            within(alloc2, big_alloc, 0.01),
            "alloc_space keeps what was allocated"
        );
    } else {
        let (alloc, inuse) = space(&p, None);
        eprintln!(
            "all: alloc {:.1} MiB inuse {:.1} MiB",
            alloc / MIB,
            inuse / MIB
        );
        assert!(within(alloc, 1152.0 * MIB, 0.15), "alloc {alloc}");
        assert!(within(inuse, 128.0 * MIB, 0.15), "inuse {inuse}");
    }
    std::hint::black_box(&keep);
    heap_over_http();
}

fn heap_over_http() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = ember_sdk::Profiling::new();
    rt.block_on(async {
        let a = ember_sdk::respond(&state, "/profile/heap", "").await;
        assert_eq!(a.status, 200);
        let p = ember_pprof::decode(&a.body).unwrap();
        assert!(!p.sample.is_empty());
        let a = ember_sdk::respond(&state, "/profile/heap", "format=svg").await;
        assert_eq!(a.status, 200);
        assert!(String::from_utf8_lossy(&a.body).contains("<svg"));
        let a = ember_sdk::respond(&state, "/profile/heap", "format=jemalloc").await;
        // Unknown without the feature; with it, jemalloc's profiling is off in this binary.
        let want = if cfg!(feature = "jemalloc") { 404 } else { 400 };
        assert_eq!(a.status, want);
        let a = ember_sdk::respond(&state, "/profile/heap", "seconds=1").await;
        assert_eq!(a.status, 400);
    });
    let dir = temp_dir("heap");
    let dir = dir.path();
    let file = dir.join("heap.pb.gz");
    let p = ember_sdk::heap_profile().unwrap();
    std::fs::write(&file, ember_pprof::encode_gzip(&p)).unwrap();
    if let Some(top) = go_pprof_top(&file) {
        assert!(top.contains("inuse_space"), "{top}");
    }
    std::thread::sleep(Duration::from_millis(1));
}
