//! `ember convert` writes and reads Perfetto traces (by extension or `--to perfetto`), and
//! `ember flamegraph` / `ember top` take a trace through the one input detector. Traces Ember
//! writes are folded a second time by `tests/data/perfetto/fold.py` with Perfetto's own
//! schema (PyPI `perfetto`), when that package is installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .expect("run ember")
}

/// Runs `cmd`, which must succeed, and returns its stdout.
fn checked(mut cmd: Command) -> Vec<u8> {
    let out = cmd.output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?}: {stderr}");
    out.stdout
}

fn ember(args: &[&str]) -> Vec<u8> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ember"));
    cmd.args(args);
    checked(cmd)
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-perfetto-{name}-"))
        .tempdir()
        .expect("temp dir")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn sorted(text: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(text)
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// `ember convert INPUT -o DIR/out.folded EXTRA...`: the folded lines, sorted.
fn folded_of(dir: &Path, input: &Path, extra: &[&str]) -> Vec<String> {
    let out = dir.join("out.folded");
    let mut args = vec!["convert", s(input), "-o", s(&out)];
    args.extend_from_slice(extra);
    ember(&args);
    sorted(&std::fs::read(&out).unwrap())
}

/// Whether Perfetto's Python schema can be imported here.
fn have_perfetto_python() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "from perfetto.protos.perfetto.trace import perfetto_trace_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Go CPU profiles → `.perfetto-trace` → folded stacks (and pprof, and top) equal the
/// profile's own; Perfetto's schema folds the trace to the same stacks.
#[test]
fn cpu_profiles_round_trip_through_a_trace() {
    let dir = temp_dir("cpu");
    let dir = dir.path();
    let python = have_perfetto_python();
    for rel in [
        "tests/data/corpora/pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
        "tests/data/corpora/pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
        "tests/data/corpora/pyroscope/pkg/pprof/testdata/single_group_with_optional_span_id.pb.gz",
    ] {
        let input = repo(rel);
        let trace = dir.join("cpu.perfetto-trace");
        ember(&["convert", s(&input), "-o", s(&trace)]);
        let samples = ["--sample-index", "samples"];
        let original = folded_of(dir, &input, &samples);
        assert_eq!(folded_of(dir, &trace, &samples), original, "{rel}");
        // The time type comes back as count × period: the same top table totals.
        let top = |p: &Path| {
            String::from_utf8(ember(&["top", s(p), "--sample-index", "cpu"]))
                .unwrap()
                .lines()
                .find(|l| l.starts_with("Showing nodes"))
                .unwrap()
                .to_owned()
        };
        assert_eq!(top(&trace), top(&input), "{rel}");
        let svg = ember(&["flamegraph", s(&trace)]);
        assert!(svg.starts_with(b"<?xml"), "{rel}");
        if python {
            let mut fold = Command::new("python3");
            fold.arg(repo("tests/data/perfetto/fold.py")).arg(&trace);
            assert_eq!(sorted(&checked(fold)), original, "{rel}: Perfetto's schema");
        }
    }
    std::fs::remove_dir_all(dir).ok();
}

/// A heap profile becomes a heapprofd dump and comes back with its inuse/alloc stacks;
/// `--to perfetto` works whatever the output is called; a folded input becomes samples.
#[test]
fn heap_and_folded_inputs_and_to_perfetto() {
    let dir = temp_dir("heap");
    let dir = dir.path();
    let heap = repo("tests/data/corpora/pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz");
    let trace = dir.join("heap.bin");
    ember(&["convert", s(&heap), "-o", s(&trace), "--to", "perfetto"]);
    for ty in ["inuse_space", "alloc_objects"] {
        let index = ["--sample-index", ty];
        let want = folded_of(dir, &heap, &index);
        assert_eq!(folded_of(dir, &trace, &index), want, "{ty}");
    }
    let folded =
        repo("tests/data/corpora/FlameGraph/test/results/perf-java-stacks-01-collapsed-pid.txt");
    let trace = dir.join("f.pftrace");
    ember(&["convert", s(&folded), "-o", s(&trace)]);
    let want = folded_of(dir, &folded, &[]);
    assert_eq!(folded_of(dir, &trace, &[]), want);
    std::fs::remove_dir_all(dir).ok();
}

/// Perfetto's own heapprofd test trace converts from the command line; a cut trace is an
/// error naming the file, and the output is not created.
#[test]
fn perfettos_trace_converts_and_a_cut_one_is_an_error() {
    let dir = temp_dir("bad");
    let dir = dir.path();
    let trace = repo("tests/data/perfetto/heap_profile_dump_max.pftrace");
    let max = folded_of(dir, &trace, &["--sample-index", "inuse_space"]);
    assert_eq!(max, vec!["f1;f2 90", "f1;f2;f3 1000"]);
    let bytes = std::fs::read(&trace).unwrap();
    let cut = dir.join("cut.pftrace");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let target = dir.join("x.pb.gz");
    let result = run(&["convert", s(&cut), "-o", s(&target)]);
    assert!(!result.status.success());
    let err = String::from_utf8_lossy(&result.stderr);
    assert!(
        err.contains("cut.pftrace: Perfetto trace: trace cut short at byte"),
        "{err}"
    );
    assert!(!target.exists());
    std::fs::remove_dir_all(dir).ok();
}
