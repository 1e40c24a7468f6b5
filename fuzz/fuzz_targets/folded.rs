//! Fuzz target: `ember_formats::parse` (folded stacks, plain or differential) on arbitrary bytes.
//!
//! Also checks that the streaming entry point (`parse` over a reader) and the in-memory one
//! (`parse_bytes`) agree.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let from_reader = ember_formats::parse(data).expect("reading from a byte slice cannot fail");
    let from_bytes = ember_formats::parse_bytes(data);
    // Debug formatting compares NaN counts (should any slip through) as equal.
    assert_eq!(
        format!("{from_reader:?}"),
        format!("{from_bytes:?}"),
        "parse and parse_bytes disagree"
    );
    let _ = from_bytes.is_differential();
});
