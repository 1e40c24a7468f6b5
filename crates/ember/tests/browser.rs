//! Opens a flame graph written by `ember flamegraph` in a real browser (Debian's chromium,
//! driven by playwright-core from `tests/browser`) and checks that it works offline:
//! tooltips, click-to-zoom, reset, and regex search with the matched percentage.
//!
//! The expected search percentage is computed here from the folded input, independently of
//! the SVG's script. Needs `bash .ci/setup`; without chromium or node it is skipped with a
//! loud message, except under CI (`CI` set), where that is a failure.

mod browser_util;

use std::process::Command;

use browser_util::{browser_available, repo_root};

/// Share of samples (in percent) whose stack has at least one frame matching `pattern`:
/// what the search box must report when the graph is not zoomed.
fn matched_percent(folded: &str, pattern: &str) -> f64 {
    let re = regex::Regex::new(pattern).unwrap();
    let (mut matched, mut total) = (0u64, 0u64);
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let count: u64 = count.parse().unwrap();
        total += count;
        if stack.split(';').any(|frame| re.is_match(frame)) {
            matched += count;
        }
    }
    matched as f64 * 100.0 / total as f64
}

#[test]
fn flame_graph_is_interactive_in_chromium() {
    if !browser_available() {
        return;
    }
    let input = repo_root().join(
        "tests/data/corpora/derived/FlameGraph-results-lastsample/results/perf-vertx-stacks-01-collapsed-all.txt",
    );
    let folded = std::fs::read_to_string(&input).expect("corpus file");
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let svg = dir.join("vertx.svg");

    let status = Command::new(env!("CARGO_BIN_EXE_ember"))
        .arg("flamegraph")
        .arg(&input)
        .arg("-o")
        .arg(&svg)
        .status()
        .unwrap();
    assert!(status.success(), "ember flamegraph failed");

    let search = "VertxHandler";
    let expected = format!("{:.1}", matched_percent(&folded, search));
    let output = Command::new("node")
        .arg(repo_root().join("tests/browser/flamegraph.mjs"))
        .arg(&svg)
        .arg(search)
        .arg(&expected)
        .arg("io/netty/handler/codec/ByteToMessageDecoder:.channelRead")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "browser checks failed:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        stdout.matches("ok: ").count(),
        11,
        "every browser check ran:\n{stdout}"
    );
}
