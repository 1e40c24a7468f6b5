//! jemalloc's own sampling as the heap source (`--features jemalloc`): this binary runs on
//! jemalloc with profiling on, a known live allocation site of 64 MiB must lead
//! `inuse_space` and be estimated within 20 %, the raw dump is served as
//! `format=jemalloc`, and `go tool pprof` reads the pprof.
//!
//! jemalloc samples every 512 KiB here (`lg_prof_sample:19`) rather than the 2 MiB default:
//! 64 blocks of 1 MiB at 2 MiB give a standard error of about 16 %, too close to the bound
//! for a test; at 512 KiB it is about 5 %. The estimator is the same.

#![cfg(feature = "jemalloc")]

mod common;

use common::*;

#[global_allocator]
static ALLOC: ember_sdk::Jemalloc = ember_sdk::Jemalloc;

/// jemalloc's options (its `const char *malloc_conf`, named with tikv-jemallocator's prefix):
/// a thin pointer to the first byte of a NUL-terminated string.
#[allow(non_upper_case_globals)]
// SAFETY: jemalloc reads this symbol as `const char *` at start-up; a `&u8` has that layout,
// and the string it points into is static and ends with a NUL.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: &u8 = &b"prof:true,prof_accum:true,lg_prof_sample:19\0"[0];

const MIB: f64 = (1 << 20) as f64;

#[inline(never)]
fn big_site(mib: usize) -> Vec<Vec<u8>> {
    let blocks = (0..mib).map(|i| vec![i as u8 | 1; 1 << 20]).collect();
    // Not a tail call: big_site's own frame stays on the stack under the allocations.
    std::hint::black_box(blocks)
}

fn inuse_of(p: &ember_pprof::Profile, site: &str) -> f64 {
    p.sample
        .iter()
        .filter(|s| stack_has(p, s, site))
        .map(|s| s.value[3] as f64)
        .sum()
}

#[test]
fn jemalloc_sampling_finds_the_big_site() {
    assert!(
        ember_sdk::heap::jemalloc::profiling_active(),
        "jemalloc profiling should be on in this binary"
    );
    assert!(ember_sdk::heap_profiling_enabled());
    let keep = big_site(64);
    let p = ember_sdk::heap_profile().expect("a jemalloc heap profile");
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
    let big = inuse_of(&p, "big_site");
    eprintln!("big_site inuse_space estimate: {:.1} MiB of 64", big / MIB);
    assert!(
        (big - 64.0 * MIB).abs() <= 0.20 * 64.0 * MIB,
        "big_site inuse {:.1} MiB",
        big / MIB
    );
    let top = p.sample.iter().max_by_key(|s| s.value[3]).expect("samples");
    assert!(
        stack_has(&p, top, "big_site"),
        "the largest inuse_space stack goes through big_site"
    );
    // jemalloc's own frames are cut: the leaf of big_site's stacks is Rust code.
    // The first function of the test's own code in that stack is big_site.
    let first_own = top
        .location_id
        .iter()
        .map(|&l| function_of(&p, l))
        .find(|f| f.contains("heap_jemalloc::") || f.contains("big_site"));
    assert_eq!(first_own.as_deref(), Some("heap_jemalloc::big_site"));
    let leaf = function_of(&p, top.location_id[0]);
    assert!(
        !leaf.starts_with("_rjem_") && !leaf.contains("prof_"),
        "leaf {leaf:?}"
    );
    // prof_accum: cumulative counts are there too.
    assert!(top.value[1] >= top.value[3] && top.value[0] > 0);

    let dir = temp_dir("heap-jemalloc");

    let dir = dir.path();
    let file = dir.join("heap.pb.gz");
    std::fs::write(&file, ember_pprof::encode_gzip(&p)).unwrap();
    if let Some(out) = go_pprof_top(&file) {
        assert!(out.contains("inuse_space"), "{out}");
        assert!(out.contains("heap_jemalloc::big_site"), "{out}");
    }

    over_http();
    std::hint::black_box(&keep);
}

fn over_http() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = ember_sdk::Profiling::new();
    rt.block_on(async {
        let a = ember_sdk::respond(&state, "/profile/heap", "format=jemalloc").await;
        assert_eq!(a.status, 200);
        let text = String::from_utf8(a.body).unwrap();
        assert!(text.starts_with("heap_v2/524288\n"), "{}", &text[..40]);
        assert!(text.contains("MAPPED_LIBRARIES:"));
        let dump = ember_sdk::heap::jemalloc::parse_dump(&text).unwrap();
        assert!(!dump.stacks.is_empty());

        let a = ember_sdk::respond(&state, "/profile/heap", "").await;
        assert_eq!(a.status, 200);
        let p = ember_pprof::decode(&a.body).unwrap();
        assert!((inuse_of(&p, "big_site") - 64.0 * MIB).abs() <= 0.20 * 64.0 * MIB);

        let a = ember_sdk::respond(&state, "/profile/heap", "format=svg").await;
        assert_eq!(a.status, 200);
        assert!(String::from_utf8_lossy(&a.body).contains("big_site"));

        let a = ember_sdk::respond(&state, "/profile/heap", "format=text").await;
        assert_eq!(a.status, 400);
        assert!(String::from_utf8_lossy(&a.body).contains("jemalloc"));
    });
}
