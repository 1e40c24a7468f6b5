//! Fuzz target: `ember_collapse::collapse` (perf script → folded) on arbitrary bytes.
//!
//! Runs three option sets on each input: the defaults, every flag at once (pid/tid, kernel/jit
//! annotations, addresses, an event filter and skip-after), and the defaults folded by two worker
//! threads over tiny chunks. The last must give exactly the single-threaded result, since
//! `collapse` promises output independent of the thread count and chunk boundaries.
#![no_main]

use ember_collapse::{CollapseOptions, collapse_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let single = CollapseOptions {
        threads: 1,
        ..CollapseOptions::default()
    };
    let baseline = collapse_bytes(data, &single);

    let everything = CollapseOptions {
        include_pid: true,
        include_tid: true,
        annotate_kernel: true,
        annotate_jit: true,
        include_addrs: true,
        event_filter: Some("cycles".to_owned()),
        skip_after: vec!["main".to_owned(), "start_thread".to_owned()],
        threads: 1,
        ..CollapseOptions::default()
    };
    let _ = collapse_bytes(data, &everything);

    // Chunk size from the first byte so boundaries fall everywhere across runs.
    let chunk_bytes = usize::from(data.first().copied().unwrap_or(0)) + 1;
    let parallel = CollapseOptions {
        threads: 2,
        chunk_bytes,
        ..CollapseOptions::default()
    };
    let split = collapse_bytes(data, &parallel);
    match (&baseline, &split) {
        (Ok(a), Ok(b)) => assert_eq!(
            a.stacks, b.stacks,
            "2 threads with {chunk_bytes}-byte chunks changed the folded stacks"
        ),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "single/parallel disagree on success: {:?} vs {:?}",
            baseline.as_ref().err(),
            split.as_ref().err()
        ),
    }
});
