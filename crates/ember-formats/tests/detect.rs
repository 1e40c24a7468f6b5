//! The one input detector on the real corpora: every `perf script` test input of FlameGraph is
//! perf script, every collapsed result is folded stacks, every profile.proto file is pprof,
//! speedscope files are speedscope, and gzip'd input is undone first.

use ember_formats::detect::{Kind, classify};
use ember_formats::input::read_bytes;
use std::path::{Path, PathBuf};

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

fn files(dir: &str, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(corpora().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
        .collect();
    out.sort();
    out
}

fn kind(path: &Path) -> Kind {
    let bytes = read_bytes(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    classify(&bytes)
}

#[test]
fn perf_script_inputs_are_perf_script() {
    let inputs = files("FlameGraph/test", |n| {
        n.starts_with("perf-") && n.ends_with(".txt")
    });
    assert!(inputs.len() >= 10, "{}", inputs.len());
    for path in inputs {
        assert_eq!(kind(&path), Kind::PerfScript, "{}", path.display());
    }
    let gz = corpora().join("FlameGraph/example-perf-stacks.txt.gz");
    assert_eq!(
        kind(&gz),
        Kind::PerfScript,
        "gzip is undone before classifying"
    );
}

#[test]
fn collapsed_results_are_folded() {
    let results = files("FlameGraph/test/results", |n| n.ends_with(".txt"));
    assert!(results.len() >= 10, "{}", results.len());
    for path in results {
        assert_eq!(kind(&path), Kind::Folded, "{}", path.display());
    }
}

#[test]
fn profiles_are_pprof_and_speedscope_is_speedscope() {
    let tsv = std::fs::read_to_string(corpora().join("pprof-cases.tsv")).expect("manifest");
    let protos: Vec<PathBuf> = tsv
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c.len() > 3 && !c[3].is_empty() && !c[2].contains("BROKEN"))
        .map(|c| corpora().join(c[0]))
        .collect();
    assert!(protos.len() >= 70);
    for path in protos {
        assert_eq!(kind(&path), Kind::Pprof, "{}", path.display());
    }
    for path in files("pyroscope/pkg/og/convert/speedscope/testdata", |n| {
        n.ends_with(".json")
    }) {
        assert_eq!(kind(&path), Kind::Speedscope, "{}", path.display());
    }
}
