//! End-to-end checks of the `ember` binary: exit codes, error messages on bad input, and that
//! the subcommands compose (collapse → flamegraph, pprof → folded → pprof → top).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
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
    child.wait_with_output().unwrap()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-cli-{name}-"))
        .tempdir()
        .expect("temp dir")
}

#[test]
fn collapse_from_stdin_matches_stackcollapse() {
    let input = std::fs::read(corpora().join("FlameGraph/test/perf-vertx-stacks-01.txt")).unwrap();
    let expected = std::fs::read(corpora().join(
        "derived/FlameGraph-results-lastsample/results/perf-vertx-stacks-01-collapsed-all.txt",
    ))
    .unwrap();
    let out = ember(&["collapse", "--all", "-"], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, expected);
}

#[test]
fn collapse_pipes_into_flamegraph() {
    let input = std::fs::read(corpora().join("FlameGraph/test/perf-java-stacks-01.txt")).unwrap();
    let folded = ember(&["collapse", "--all"], &input);
    assert!(folded.status.success());
    let svg = ember(&["flamegraph", "--title", "Java <stacks>"], &folded.stdout);
    assert!(
        svg.status.success(),
        "{}",
        String::from_utf8_lossy(&svg.stderr)
    );
    let svg = String::from_utf8(svg.stdout).unwrap();
    assert!(svg.starts_with("<?xml"));
    assert!(svg.contains("Java &lt;stacks&gt;"), "title is escaped");
    assert!(
        svg.contains("<title>all (46 samples, 100%)</title>"),
        "total includes the last sample"
    );
}

#[test]
fn broken_pprof_is_rejected_with_the_reason() {
    let broken = corpora().join("pyroscope/pkg/og/convert/pprof/testdata/dotnet-pprof-3.pb.gz");
    for sub in ["top", "convert"] {
        let mut args = vec![sub, path(&broken)];
        if sub == "convert" {
            args.extend(["-o", "/dev/null", "--to", "folded"]);
        }
        let out = ember(&args, b"");
        assert!(
            !out.status.success(),
            "ember {sub} accepted a broken profile"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("reserved ID=0"), "ember {sub}: {err}");
        assert!(
            out.stdout.is_empty(),
            "ember {sub} printed output on failure"
        );
    }
}

#[test]
fn gzip_bomb_is_an_error_not_an_oom() {
    use flate2::{Compression, write::GzEncoder};
    let dir = temp_dir("bomb");
    let dir = dir.path();
    let bomb = dir.join("bomb.pb.gz");
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..300 {
        gz.write_all(&zeros).unwrap();
    }
    std::fs::write(&bomb, gz.finish().unwrap()).unwrap();
    for args in [
        vec!["top", path(&bomb)],
        vec!["flamegraph", "--pprof", path(&bomb)],
    ] {
        let out = ember(&args, b"");
        assert!(!out.status.success(), "{args:?} succeeded on a gzip bomb");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("size limit"), "{args:?}: {err}");
    }
}

#[test]
fn empty_input_is_an_error() {
    let out = ember(&["flamegraph"], b"");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("No stack counts found"));
}

#[test]
fn missing_file_names_the_file_once() {
    let out = ember(&["top", "/nonexistent/profile.pb.gz"], b"");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/profile.pb.gz"), "{err}");
    assert_eq!(
        err.matches("No such file").count(),
        1,
        "cause repeated: {err}"
    );
}

#[test]
fn pprof_round_trips_through_folded() {
    let dir = temp_dir("roundtrip");
    let dir = dir.path();
    let cpu = corpora().join("pprof/internal/proftest/testdata/large.cpu");
    let folded = dir.join("cpu.folded");
    let back = dir.join("cpu.pb.gz");
    let out = ember(
        &[
            "convert",
            path(&cpu),
            "-o",
            path(&folded),
            "--sample-index",
            "cpu",
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ember(
        &[
            "convert",
            path(&folded),
            "-o",
            path(&back),
            "--sample-type",
            "cpu/nanoseconds",
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The flat figures of the top table survive pprof → folded → pprof.
    let first = ember(&["top", path(&cpu), "--sample-index", "cpu"], b"");
    let second = ember(&["top", path(&back)], b"");
    assert!(first.status.success() && second.status.success());
    let rows = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"))
            .skip(1)
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .collect()
    };
    assert!(!rows(&first).is_empty());
    assert_eq!(rows(&first), rows(&second));
}

#[test]
fn every_subcommand_explains_its_options() {
    for sub in ["collapse", "flamegraph", "diff", "top", "convert"] {
        let out = ember(&[sub, "--help"], b"");
        assert!(out.status.success(), "ember {sub} --help");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Usage: ember"), "{sub}: {help}");
        assert!(
            help.to_lowercase().contains("default"),
            "ember {sub} --help states no defaults"
        );
    }
}

#[test]
fn flamegraph_reads_raw_and_gzipped_pprof_alike() {
    let raw = corpora().join("pyroscope/pkg/og/convert/pprof/testdata/heap.pb");
    assert!(
        !std::fs::read(&raw).unwrap().starts_with(&[0x1f, 0x8b]),
        "corpus heap.pb is raw protobuf"
    );
    let from_raw = ember(
        &["flamegraph", path(&raw), "--sample-type", "inuse_space"],
        b"",
    );
    let detected = ember(&["flamegraph", path(&raw)], b"");
    assert!(
        from_raw.status.success(),
        "{}",
        String::from_utf8_lossy(&from_raw.stderr)
    );
    assert!(
        detected.status.success(),
        "{}",
        String::from_utf8_lossy(&detected.stderr)
    );
    let svg = String::from_utf8(detected.stdout).unwrap();
    assert!(
        svg.contains("bytes"),
        "count name comes from the profile's unit"
    );
}

#[test]
fn flamegraph_reads_gzipped_folded_and_perf_script_through_the_one_detector() {
    use flate2::{Compression, write::GzEncoder};
    let folded = std::fs::read(
        corpora().join("FlameGraph/test/results/perf-cycles-instructions-01-collapsed-all.txt"),
    )
    .unwrap();
    let dir = temp_dir("gz-folded");
    let dir = dir.path();
    let gz_path = dir.join("stacks.folded.gz");
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(&folded).unwrap();
    std::fs::write(&gz_path, gz.finish().unwrap()).unwrap();
    let plain = ember(&["flamegraph", "-"], &folded);
    let from_gz = ember(&["flamegraph", path(&gz_path)], b"");
    assert!(
        from_gz.status.success(),
        "{}",
        String::from_utf8_lossy(&from_gz.stderr)
    );
    assert_eq!(from_gz.stdout, plain.stdout, "gzip is undone transparently");

    // perf script is folded as `ember collapse` folds it, then drawn or summarised.
    let perf = corpora().join("FlameGraph/test/perf-cycles-instructions-01.txt");
    let collapsed = ember(&["collapse", path(&perf)], b"");
    assert!(collapsed.status.success());
    for sub in ["flamegraph", "top"] {
        let direct = ember(&[sub, path(&perf)], b"");
        assert!(
            direct.status.success(),
            "ember {sub}: {}",
            String::from_utf8_lossy(&direct.stderr)
        );
        let via = ember(&[sub, "-"], &collapsed.stdout);
        assert_eq!(direct.stdout, via.stdout, "ember {sub} of perf script");
    }
}

#[test]
fn flamegraph_merges_many_pprof_inputs_with_folded_ones() {
    // Inputs are read one at a time and pprof ones merged as they come: two copies of a
    // profile plus a folded file must draw what one folded file with the profile's counts
    // doubled plus that folded file draws.
    let cpu = corpora().join("pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof");
    let other =
        corpora().join("FlameGraph/test/results/perf-cycles-instructions-01-collapsed-all.txt");
    let dir = temp_dir("fg-many");
    let dir = dir.path();
    let folded = dir.join("cpu.folded");
    let out = ember(
        &["convert", path(&cpu), "--to", "folded", "-o", path(&folded)],
        b"",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut expected = String::new();
    for line in std::fs::read_to_string(&folded).unwrap().lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let count: u64 = count.parse().unwrap();
        expected.push_str(&format!("{stack} {}\n", count * 2));
    }
    expected.push_str(&std::fs::read_to_string(&other).unwrap());
    let reference = ember(
        &["flamegraph", "--countname", "nanoseconds", "-"],
        expected.as_bytes(),
    );
    let merged = ember(&["flamegraph", path(&cpu), path(&cpu), path(&other)], b"");
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    assert_eq!(
        String::from_utf8(merged.stdout).unwrap(),
        String::from_utf8(reference.stdout).unwrap()
    );
}

#[test]
fn a_diff_against_an_empty_baseline_says_so() {
    let dir = temp_dir("diff-empty");
    let dir = dir.path();
    let (before, after) = (dir.join("before.folded"), dir.join("after.folded"));
    std::fs::write(&before, "").unwrap();
    std::fs::write(&after, "main;work 5\nmain;idle 1\n").unwrap();
    let out = ember(
        &["diff", before.to_str().unwrap(), after.to_str().unwrap()],
        b"",
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("baseline") && err.contains("has no samples"),
        "{err}"
    );
    // Both sides with samples: no such warning.
    let out = ember(
        &["diff", after.to_str().unwrap(), after.to_str().unwrap()],
        b"",
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("no samples"));
}

#[test]
fn the_servers_and_queries_help_opens_with_what_they_do() {
    for (sub, first) in [
        ("server", "Run the profile server"),
        ("query", "Query a running server"),
        ("profiling", "On-demand actions"),
    ] {
        let out = ember(&[sub, "--help"], b"");
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.starts_with(first), "ember {sub} --help: {help}");
        assert!(!help.contains("Options of"), "{help}");
    }
    let out = ember(&["server", "--help"], b"");
    let help = String::from_utf8_lossy(&out.stdout);
    for key in [
        "retention_days",
        "/api/v1/query",
        "max_series_total",
        "--data-dir",
    ] {
        assert!(help.contains(key), "server --help names {key}");
    }
}

#[test]
fn flamechart_keeps_every_input_in_its_order() {
    // A flame chart merges nothing across inputs: folded text, perf script (folded as `ember
    // collapse` folds it) and folded text again draw what their folded lines draw as one
    // input, in that order; malformed lines and fractional counts are reported all the same.
    let dir = temp_dir("flamechart");
    let dir = dir.path();
    let first = dir.join("first.folded");
    std::fs::write(&first, "main;b 2\nmain;a 1.5\nnot a line\n").unwrap();
    let last = dir.join("last.folded");
    std::fs::write(&last, "main;a 3\nmain;b 1\n").unwrap();
    let perf = corpora().join("FlameGraph/test/perf-cycles-instructions-01.txt");
    let collapsed = ember(&["collapse", path(&perf)], b"");
    assert!(collapsed.status.success());
    let mut expected = std::fs::read(&first).unwrap();
    expected.extend(&collapsed.stdout);
    expected.extend(std::fs::read(&last).unwrap());
    let reference = ember(&["flamegraph", "--flamechart", "-"], &expected);
    let chart = ember(
        &[
            "flamegraph",
            "--flamechart",
            path(&first),
            path(&perf),
            path(&last),
        ],
        b"",
    );
    for out in [&reference, &chart] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(stderr.contains("fractional"), "{stderr}");
        assert!(stderr.contains("Ignored 1 lines"), "{stderr}");
    }
    assert_eq!(
        String::from_utf8(chart.stdout).unwrap(),
        String::from_utf8(reference.stdout).unwrap()
    );
}
