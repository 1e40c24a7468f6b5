//! Profiles written by `go tool pprof -proto -diff_base A B`: the base's samples are negated
//! and labelled `pprof::base=true`, and `go tool pprof -top` reports against the base's total.
//! The top tables must equal Go's output byte for byte (`tests/data/diff-base`, see its
//! README for how each file was made).

use std::path::{Path, PathBuf};

use ember_formats::{SortBy, TopOptions, into_profile, read_input, top};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/diff-base")
        .join(name)
}

fn check(stem: &str) {
    let profile = into_profile(read_input(&data(&format!("{stem}.diff.pb.gz"))).unwrap());
    assert!(ember_pprof::has_diff_base(&profile), "{stem}");
    for (suffix, options) in [
        ("top", TopOptions::default()),
        (
            "top-cum-samples",
            TopOptions {
                sort: SortBy::Cum,
                sample_index: Some("samples".into()),
                ..TopOptions::default()
            },
        ),
    ] {
        let expected = std::fs::read_to_string(data(&format!("{stem}.{suffix}.txt"))).unwrap();
        let table = top(&profile, &options).unwrap();
        assert_eq!(table.render(), expected, "{stem} {suffix}");
    }
}

#[test]
fn diff_base_of_two_go_cpu_profiles_matches_go_tool_pprof_top() {
    check("sample-vs-large");
}

#[test]
fn diff_base_of_two_legacy_go_cpu_profiles_matches_go_tool_pprof_top() {
    check("crc32-vs-gobench");
}
