//! The pieces `ember diff` chains together, on corpus files: pprof profiles folded and diffed,
//! diff-folded text read back by the folded parser, and the differential flame graph colours.

use ember_formats::diff_folded::{DiffOptions, diff_folded, diff_stacks, write_diff};
use std::path::{Path, PathBuf};

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

fn folded_u64(path: &str, index: usize) -> Vec<(String, u64)> {
    let profile = ember_pprof::read_file(&corpora().join(path)).unwrap();
    ember_pprof::folded_stacks(&profile, index)
        .into_iter()
        .map(|(s, v)| (s, u64::try_from(v).unwrap()))
        .collect()
}

#[test]
fn same_profile_gzip_and_raw_diff_to_no_change() {
    let dir = "pyroscope/pkg/og/convert/pprof/testdata";
    for index in 0..4 {
        let before = folded_u64(&format!("{dir}/heap.pb"), index);
        let after = folded_u64(&format!("{dir}/heap.pb.gz"), index);
        let n = before.len();
        let diff = diff_stacks(before, after, &DiffOptions::default());
        assert_eq!(diff.lines.len(), n);
        assert!(
            diff.lines.iter().all(|l| l.before == l.after),
            "index {index}"
        );
    }
}

#[test]
fn different_profiles_keep_both_totals() {
    let dir = "pyroscope/pkg/og/convert/pprof/testdata";
    let before = folded_u64(&format!("{dir}/cpu.pb.gz"), 1);
    let after = folded_u64(&format!("{dir}/cpu-exemplars.pb.gz"), 1);
    let (tb, ta): (u64, u64) = (
        before.iter().map(|x| x.1).sum(),
        after.iter().map(|x| x.1).sum(),
    );
    let diff = diff_stacks(before, after, &DiffOptions::default());
    assert_eq!(diff.lines.iter().map(|l| l.before).sum::<u64>(), tb);
    assert_eq!(diff.lines.iter().map(|l| l.after).sum::<u64>(), ta);
    // Normalising scales the before side to (at most, because of truncation) the after total.
    let normalized = diff_stacks(
        folded_u64(&format!("{dir}/cpu.pb.gz"), 1),
        folded_u64(&format!("{dir}/cpu-exemplars.pb.gz"), 1),
        &DiffOptions {
            normalize: true,
            ..Default::default()
        },
    );
    let nb: u64 = normalized.lines.iter().map(|l| l.before).sum();
    assert!(
        nb <= ta && nb + normalized.lines.len() as u64 >= ta,
        "{nb} vs {ta}"
    );
}

#[test]
fn diff_text_reads_back_and_renders_red_and_blue() {
    let dir = corpora().join("inferno/tests/data/diff-folded");
    let before = std::fs::read(dir.join("before.txt")).unwrap();
    let after = std::fs::read(dir.join("after.txt")).unwrap();
    let diff = diff_folded(&before[..], &after[..], &DiffOptions::default()).unwrap();
    let mut text = Vec::new();
    write_diff(&diff.lines, &mut text).unwrap();
    let parsed = ember_formats::parse_bytes(&text);
    assert_eq!(parsed, diff.to_folded());

    let render = |negate: bool| {
        let options = ember_flamegraph::Options {
            negate_differentials: negate,
            ..Default::default()
        };
        let mut svg = Vec::new();
        ember_flamegraph::render(&parsed, &options, &mut svg).unwrap();
        String::from_utf8(svg).unwrap()
    };
    let svg = render(false);
    // Grown frames are drawn red (rgb(255,g,b)), shrunk ones blue (rgb(r,g,255)).
    assert!(svg.contains("fill=\"rgb(255,"), "no red frame");
    assert!(svg.contains(",255)\""), "no blue frame");
    assert_ne!(svg, render(true));
}
