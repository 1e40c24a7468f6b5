//! perf script text from producers other than Linux `perf` defaults (Android simpleperf's
//! `report_sample.py` in both of its formats, `perf script` with PID/TID, CPU and period
//! columns, a file cut without its last empty line), folded byte for byte as
//! `stackcollapse-perf.pl` folds it. The inputs and the Perl script's outputs are in
//! `tests/data/producers` (see its README for where each format comes from).

use std::fs;
use std::path::{Path, PathBuf};

use ember_collapse::{CollapseOptions, collapse_bytes};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/producers")
}

/// The options of `stackcollapse-perf.pl` each expected file was made with.
const OPTIONS: [&str; 7] = ["default", "pid", "tid", "kernel", "jit", "all", "addrs"];

fn options(name: &str, threads: usize, chunk_bytes: usize) -> CollapseOptions {
    let mut o = CollapseOptions {
        threads,
        chunk_bytes,
        ..CollapseOptions::default()
    };
    match name {
        "default" => {}
        "pid" => o.include_pid = true,
        "tid" => o.include_tid = true,
        "kernel" => o.annotate_kernel = true,
        "jit" => o.annotate_jit = true,
        "all" => (o.annotate_kernel, o.annotate_jit) = (true, true),
        "addrs" => o.include_addrs = true,
        other => panic!("unknown option {other}"),
    }
    o
}

fn check(stem: &str) {
    let input = fs::read(data().join(format!("{stem}.txt"))).unwrap();
    for name in OPTIONS {
        let expected_path = data().join(format!("expected/{stem}-{name}.txt"));
        let expected = fs::read_to_string(&expected_path).unwrap();
        assert!(!expected.is_empty(), "{}", expected_path.display());
        for (threads, chunk) in [(1, 1 << 20), (2, 1 << 20), (2, 512)] {
            let collapsed = collapse_bytes(&input, &options(name, threads, chunk)).unwrap();
            assert!(
                collapsed.warnings.is_empty(),
                "{stem} --{name}: {:?}",
                collapsed.warnings
            );
            let mut folded = Vec::new();
            collapsed.write_folded(&mut folded).unwrap();
            assert_eq!(
                String::from_utf8(folded).unwrap(),
                expected,
                "{stem} --{name}, {threads} threads, {chunk}-byte chunks"
            );
        }
    }
}

#[test]
fn simpleperf_report_sample_tab_separated() {
    check("simpleperf-report-sample");
}

#[test]
fn simpleperf_report_sample_first_format_tabs_after_pc_and_time() {
    check("simpleperf-report-sample-2017");
}

#[test]
fn perf_script_thread_names_with_numbers_and_odd_unknown_modules() {
    check("perf-script-pid-tid-cpu-period");
}

#[test]
fn perf_script_without_trailing_empty_line() {
    check("perf-script-tid-no-trailing-blank");
}
