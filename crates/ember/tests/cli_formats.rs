//! `ember convert` reads every format Ember knows through the one input detector (pprof,
//! folded, speedscope JSON, perf script) and writes pprof, folded and speedscope; round trips
//! on real files keep every stack and value. `pprof -diff_base` profiles keep both sides.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn ember(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ember");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ember {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn convert(input: &Path, output: &Path, extra: &[&str]) -> Vec<u8> {
    let mut args = vec![
        "convert",
        input.to_str().unwrap(),
        "-o",
        output.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ember(&args, b"");
    std::fs::read(output).unwrap()
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-formats-{name}-"))
        .tempdir()
        .expect("temp dir")
}

#[test]
fn perf_script_converts_like_ember_collapse_and_round_trips_through_pprof() {
    let dir = temp_dir("perf");
    let dir = dir.path();
    for rel in [
        "crates/ember-collapse/tests/data/producers/simpleperf-report-sample.txt",
        "tests/data/corpora/FlameGraph/test/perf-java-stacks-01.txt",
    ] {
        let input = repo(rel);
        let collapsed = ember(&["collapse", input.to_str().unwrap()], b"").stdout;
        let folded = convert(&input, &dir.join("a.folded"), &[]);
        assert_eq!(folded, collapsed, "{rel}: perf script → folded");
        let pprof = dir.join("a.pb.gz");
        convert(&input, &pprof, &["--sample-type", "cpu/nanoseconds"]);
        let back = convert(&pprof, &dir.join("b.folded"), &[]);
        assert_eq!(back, collapsed, "{rel}: perf script → pprof → folded");
    }
}

#[test]
fn speedscope_from_other_programs_and_from_ember_round_trips() {
    let dir = temp_dir("speedscope");
    let dir = dir.path();
    // Written by speedscope's own exporter (pyroscope's test files): read, not refused.
    let two = repo(
        "tests/data/corpora/pyroscope/pkg/og/convert/speedscope/testdata/two-sampled.speedscope.json",
    );
    let folded = convert(&two, &dir.join("two.folded"), &[]);
    assert_eq!(
        String::from_utf8(folded).unwrap(),
        "a;b 10\na;b;c 10\na;b;d 8\n"
    );

    // pprof → speedscope → pprof keeps every positive stack of every sample type.
    let cpu = repo("tests/data/corpora/pprof/internal/report/testdata/sample.cpu");
    for index in ["samples", "cpu"] {
        let direct = convert(&cpu, &dir.join("d.folded"), &["--sample-index", index]);
        let json = dir.join("s.json");
        convert(&cpu, &json, &[]);
        let pprof = dir.join("s.pb.gz");
        convert(&json, &pprof, &[]);
        let unit_index = if index == "samples" { "0" } else { "1" };
        let back = convert(
            &pprof,
            &dir.join("b.folded"),
            &["--sample-index", unit_index],
        );
        assert_eq!(back, direct, "sample type {index}");
    }
}

#[test]
fn diff_base_profiles_convert_and_draw_as_their_two_sides() {
    let dir = temp_dir("diff-base");
    let dir = dir.path();
    let diff = repo("crates/ember-formats/tests/data/diff-base/crc32-vs-gobench.diff.pb.gz");
    let folded = convert(&diff, &dir.join("d.folded"), &[]);
    let text = String::from_utf8(folded.clone()).unwrap();
    // `stack before after`: before sums to the base's total, the one go tool pprof divides
    // by (2110ms in crc32-vs-gobench.top.txt), after to the new profile's.
    let before: i64 = text
        .lines()
        .map(|l| l.split(' ').nth_back(1).unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(before, 2_110_000_000, "{text}");
    assert!(text.lines().all(|l| l.split(' ').count() == 3), "{text}");
    // The flame graph of the profile is the differential one of its folded form.
    let from_pprof = ember(&["flamegraph", diff.to_str().unwrap()], b"").stdout;
    let from_folded = ember(&["flamegraph", "--countname", "nanoseconds", "-"], &folded).stdout;
    assert_eq!(
        String::from_utf8(from_pprof).unwrap(),
        String::from_utf8(from_folded).unwrap()
    );
    // speedscope has no negative weights: both sides, as two profiles per sample type, the
    // base adding up to Go's total and the new one to the folded after column (it was the
    // new side alone, the base dropped without a word).
    let after: i64 = text
        .lines()
        .map(|l| l.split(' ').nth_back(0).unwrap().parse::<i64>().unwrap())
        .sum();
    let json = convert(
        &diff,
        &dir.join("d.speedscope.json"),
        &["--sample-index", "cpu"],
    );
    let file: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let sides: Vec<(String, f64)> = file["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let sum = p["weights"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_f64().unwrap())
                .sum();
            (p["name"].as_str().unwrap().to_string(), sum)
        })
        .collect();
    assert_eq!(
        sides,
        [
            ("cpu (nanoseconds) base".to_string(), 2_110_000_000.0),
            ("cpu (nanoseconds) new".to_string(), after as f64)
        ]
    );
    assert_eq!(file["activeProfileIndex"], 1);
    // Re-encoding keeps the base labels, so the top table is still Go's.
    let again = dir.join("again.pb.gz");
    convert(&diff, &again, &[]);
    let expected = std::fs::read_to_string(repo(
        "crates/ember-formats/tests/data/diff-base/crc32-vs-gobench.top.txt",
    ))
    .unwrap();
    let top = ember(&["top", again.to_str().unwrap()], b"").stdout;
    assert_eq!(String::from_utf8(top).unwrap(), expected);
}

/// A profile written as perf script folds back (`ember collapse`, and the one input detector
/// of `ember convert`) to the profile's own folded stacks: the samples count as they are, CPU
/// time through the period (10 ms a block in this Go profile).
#[test]
fn pprof_writes_perf_script_that_folds_back_to_its_stacks() {
    let dir = temp_dir("to-perf-script");
    let dir = dir.path();
    let cpu = repo("tests/data/corpora/pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let expected = convert(&cpu, &dir.join("p.folded"), &["--sample-index", "samples"]);
    assert!(!expected.is_empty());
    // Folding perf script puts the thread name first, as stackcollapse-perf.pl does: this
    // profile has none, written `[unknown]`.
    let expected: Vec<u8> = String::from_utf8(expected)
        .unwrap()
        .lines()
        .flat_map(|l| format!("[unknown];{l}\n").into_bytes())
        .collect();
    for (name, extra) in [
        ("a.perf", vec![]),
        ("b.perf-script", vec!["--sample-index", "cpu"]),
    ] {
        let perf = convert(&cpu, &dir.join(name), &extra);
        let text = String::from_utf8(perf.clone()).unwrap();
        assert!(
            text.lines().next().unwrap().ends_with(" cpu-clock: "),
            "{text}"
        );
        let collapsed = ember(&["collapse"], &perf).stdout;
        let mut lines: Vec<&str> = std::str::from_utf8(&collapsed).unwrap().lines().collect();
        let mut want: Vec<&str> = std::str::from_utf8(&expected).unwrap().lines().collect();
        lines.sort_unstable();
        want.sort_unstable();
        assert_eq!(lines, want, "{name}");
        // Read back by the one input detector too.
        let back = convert(&dir.join(name), &dir.join(format!("{name}.folded")), &[]);
        let mut back: Vec<&str> = std::str::from_utf8(&back).unwrap().lines().collect();
        back.sort_unstable();
        assert_eq!(back, want, "{name} through convert");
    }
}
