//! Fuzz target: `ember_formats::perfetto::read_trace` (a Perfetto trace → CPU and heap
//! profiles) on arbitrary bytes, and the detector's look at them.
//!
//! Also checks that every profile read validates, and that writing it back as a trace
//! (`profile_to_trace`) gives a trace that reads again with the same number of samples.
#![no_main]

use ember_formats::perfetto::{profile_to_trace, read_trace};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ember_formats::detect::classify(data);
    let _ = ember_formats::perfetto::looks_like_trace(data);
    let Ok(read) = read_trace(data) else {
        return;
    };
    for profile in [&read.cpu, &read.heap].into_iter().flatten() {
        ember_pprof::validate(profile).expect("a profile read from a trace validates");
    }
    if let Some(cpu) = &read.cpu {
        let (bytes, summary) = profile_to_trace(cpu);
        let again = read_trace(&bytes).expect("a written trace reads back");
        if summary.scaled.is_none() && summary.negative == 0 {
            assert_eq!(
                again.stats.cpu_samples, read.stats.cpu_samples,
                "samples lost writing the trace back"
            );
        }
    }
});
