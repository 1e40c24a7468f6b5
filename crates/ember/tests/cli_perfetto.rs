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

fn ember(args: &[&str]) -> Vec<u8> {
    let out = run(args);
    assert!(
        out.status.success(),
        "ember {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ember-perfetto-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn sorted_lines(path: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
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
    let python = have_perfetto_python();
    for rel in [
        "tests/data/corpora/pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
        "tests/data/corpora/pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
        "tests/data/corpora/pyroscope/pkg/pprof/testdata/single_group_with_optional_span_id.pb.gz",
    ] {
        let input = repo(rel);
        let trace = dir.join("cpu.perfetto-trace");
        ember(&["convert", s(&input), "-o", s(&trace)]);
        let (from_trace, original) = (dir.join("t.folded"), dir.join("o.folded"));
        ember(&[
            "convert",
            s(&trace),
            "-o",
            s(&from_trace),
            "--sample-index",
            "samples",
        ]);
        ember(&[
            "convert",
            s(&input),
            "-o",
            s(&original),
            "--sample-index",
            "samples",
        ]);
        assert_eq!(sorted_lines(&from_trace), sorted_lines(&original), "{rel}");
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
            let out = Command::new("python3")
                .arg(repo("tests/data/perfetto/fold.py"))
                .arg(&trace)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let folded: Vec<String> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect();
            assert_eq!(folded, sorted_lines(&original), "{rel}: Perfetto's schema");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// A heap profile becomes a heapprofd dump and comes back with its inuse/alloc stacks;
/// `--to perfetto` works whatever the output is called; a folded input becomes samples.
#[test]
fn heap_and_folded_inputs_and_to_perfetto() {
    let dir = temp_dir("heap");
    let heap = repo("tests/data/corpora/pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz");
    let trace = dir.join("heap.bin");
    ember(&["convert", s(&heap), "-o", s(&trace), "--to", "perfetto"]);
    for ty in ["inuse_space", "alloc_objects"] {
        let (a, b) = (dir.join("a.folded"), dir.join("b.folded"));
        ember(&["convert", s(&trace), "-o", s(&a), "--sample-index", ty]);
        ember(&["convert", s(&heap), "-o", s(&b), "--sample-index", ty]);
        assert_eq!(sorted_lines(&a), sorted_lines(&b), "{ty}");
    }
    let folded =
        repo("tests/data/corpora/FlameGraph/test/results/perf-java-stacks-01-collapsed-pid.txt");
    let trace = dir.join("f.pftrace");
    ember(&["convert", s(&folded), "-o", s(&trace)]);
    let back = dir.join("back.folded");
    ember(&["convert", s(&trace), "-o", s(&back)]);
    let original = dir.join("orig.folded");
    ember(&["convert", s(&folded), "-o", s(&original)]);
    assert_eq!(sorted_lines(&back), sorted_lines(&original));
    std::fs::remove_dir_all(&dir).ok();
}

/// Perfetto's own heapprofd test trace converts from the command line; a cut trace is an
/// error naming the file, and the output is not created.
#[test]
fn perfettos_trace_converts_and_a_cut_one_is_an_error() {
    let dir = temp_dir("bad");
    let trace = repo("tests/data/perfetto/heap_profile_dump_max.pftrace");
    let out = dir.join("max.folded");
    ember(&[
        "convert",
        s(&trace),
        "-o",
        s(&out),
        "--sample-index",
        "inuse_space",
    ]);
    assert_eq!(sorted_lines(&out), vec!["f1;f2 90", "f1;f2;f3 1000"]);
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
    std::fs::remove_dir_all(&dir).ok();
}
