//! Runs every row of `tests/data/corpora/perf-cases.tsv` (read at run time) through
//! `ember_collapse::collapse` and compares byte for byte with the expected folded file, with one
//! thread, with two threads, and with two threads on tiny chunks (so that the parallel chunking
//! is really exercised on these small inputs).

use std::fs;
use std::path::{Path, PathBuf};

use ember_collapse::{CollapseOptions, Collapsed, WarningKind, collapse, fold_stacks};

const YAMAKAKY: &str = "FlameGraph/test/perf-rust-Yamakaky-dcpu.txt";

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

struct Row {
    input: String,
    expected: String,
    options: String,
    notes: String,
}

fn rows() -> Vec<Row> {
    let tsv = fs::read_to_string(corpora().join("perf-cases.tsv")).expect("read perf-cases.tsv");
    let mut lines = tsv.lines();
    let header = lines.next().expect("tsv header");
    assert_eq!(
        header.split('\t').collect::<Vec<_>>(),
        ["input", "expected", "options", "semantics", "notes"]
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert!(cols.len() >= 4, "bad tsv row: {l}");
            Row {
                input: cols[0].to_owned(),
                expected: cols[1].to_owned(),
                options: cols[2].to_owned(),
                notes: cols.get(4).copied().unwrap_or("").to_owned(),
            }
        })
        .collect()
}

fn options_for(spec: &str) -> CollapseOptions {
    let mut o = CollapseOptions::default();
    if spec == "(default)" {
        return o;
    }
    for flag in spec.split_whitespace() {
        match flag {
            "--pid" => o.include_pid = true,
            "--tid" => o.include_tid = true,
            "--kernel" => o.annotate_kernel = true,
            "--jit" => o.annotate_jit = true,
            "--all" => {
                o.annotate_kernel = true;
                o.annotate_jit = true;
            }
            "--addrs" => o.include_addrs = true,
            other => panic!("unknown option in perf-cases.tsv: {other}"),
        }
    }
    o
}

/// (label, threads, chunk size) variants every case runs under.
const VARIANTS: [(&str, usize, usize); 3] = [
    ("1 thread", 1, 1 << 20),
    ("2 threads", 2, 1 << 20),
    ("2 threads, 1 KiB chunks", 2, 1024),
];

/// `base` under each of the [`VARIANTS`]: (label, options).
fn variants(base: &CollapseOptions) -> impl Iterator<Item = (&'static str, CollapseOptions)> + '_ {
    VARIANTS.into_iter().map(|(label, threads, chunk_bytes)| {
        let options = CollapseOptions {
            threads,
            chunk_bytes,
            ..base.clone()
        };
        (label, options)
    })
}

fn run(input: &Path, options: &CollapseOptions) -> Collapsed {
    let file = fs::File::open(input).unwrap_or_else(|e| panic!("open {}: {e}", input.display()));
    collapse(file, options).unwrap_or_else(|e| panic!("collapse {}: {e}", input.display()))
}

fn folded(c: &Collapsed) -> Vec<u8> {
    let mut out = Vec::new();
    c.write_folded(&mut out).unwrap();
    out
}

#[test]
fn every_perf_case_is_byte_identical() {
    let root = corpora();
    let rows = rows();
    let mut passed = 0;
    let mut failures = Vec::new();
    let mut yamakaky_perl_rows = 0;
    for row in &rows {
        let input = root.join(&row.input);
        let base = options_for(&row.options);
        let label = format!("{} [{}] -> {}", row.input, row.options, row.expected);

        if row.expected == "-" {
            // Warning-only case: the notes name the warning that must appear exactly once.
            let kind = if row.notes.contains("Weird event line") {
                WarningKind::WeirdEventLine
            } else if row.notes.contains("Weird stack line") {
                WarningKind::WeirdStackLine
            } else {
                panic!("row without golden and without known warning: {label}");
            };
            let mut ok = true;
            for (variant, o) in variants(&base) {
                let c = run(&input, &o);
                let hits: Vec<_> = c.warnings.iter().filter(|w| w.kind == kind).collect();
                if hits.len() != 1 || hits[0].count != 1 || hits[0].line == 0 {
                    failures.push(format!("{label} ({variant}): warnings {:?}", c.warnings));
                    ok = false;
                }
            }
            passed += usize::from(ok);
            continue;
        }

        let expected = fs::read(root.join(&row.expected))
            .unwrap_or_else(|e| panic!("read {}: {e}", row.expected));
        // The Rust input is listed twice per option. We deliberately match inferno's results
        // (Rust symbols fully re-demangled), not the Perl ones (half-demangled `$LT$..h<hash>`):
        // for the Perl row, assert that we differ from it AND equal inferno's file instead.
        let perl_rust_row = row.input == YAMAKAKY && row.expected.starts_with("derived/");
        let target = if perl_rust_row {
            yamakaky_perl_rows += 1;
            let name = Path::new(&row.expected).file_name().unwrap();
            let inferno = root
                .join("inferno/tests/data/collapse-perf/results")
                .join(name);
            let inferno = fs::read(&inferno).expect("inferno's Yamakaky result for this option");
            assert!(
                String::from_utf8_lossy(&expected).contains("::h"),
                "Perl row is expected to keep Rust hashes: {label}"
            );
            assert!(
                !String::from_utf8_lossy(&inferno).contains("$LT$"),
                "inferno row is expected to be fully demangled"
            );
            inferno
        } else {
            expected.clone()
        };

        let mut ok = true;
        for (variant, o) in variants(&base) {
            let actual = folded(&run(&input, &o));
            if actual != target {
                let first_diff = actual
                    .split(|&b| b == b'\n')
                    .zip(target.split(|&b| b == b'\n'))
                    .find(|(a, b)| a != b)
                    .map(|(a, b)| {
                        format!(
                            "\n  got:      {}\n  expected: {}",
                            String::from_utf8_lossy(a),
                            String::from_utf8_lossy(b)
                        )
                    })
                    .unwrap_or_else(|| "(length differs)".into());
                failures.push(format!("{label} ({variant}): {first_diff}"));
                ok = false;
            } else if perl_rust_row && actual == expected {
                failures.push(format!("{label}: unexpectedly equal to the Perl row"));
                ok = false;
            }
        }
        passed += usize::from(ok);
    }
    eprintln!(
        "perf-cases.tsv: {passed}/{} rows passed under {} variants each \
         ({yamakaky_perl_rows} Perl Rust rows checked against inferno's re-demangled results)",
        rows.len(),
        VARIANTS.len()
    );
    assert_eq!(
        yamakaky_perl_rows, 6,
        "expected 6 Perl rows for the Rust input"
    );
    assert!(
        rows.len() >= 95,
        "perf-cases.tsv shrank: {} rows",
        rows.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The CLI writes through `fold_stacks` + `Folded::write_folded` (no `String` per stack): it
/// must produce exactly the bytes, warnings and event of `collapse` on every input.
#[test]
fn fold_stacks_writes_what_collapse_writes() {
    let root = corpora();
    let mut compared = 0;
    for row in rows() {
        let input = root.join(&row.input);
        for threads in [1, 2] {
            let options = CollapseOptions {
                threads,
                ..options_for(&row.options)
            };
            let reference = run(&input, &options);
            let file = fs::File::open(&input).expect("open input");
            let compact = fold_stacks(file, &options).expect("fold_stacks");
            let mut written = Vec::new();
            compact.write_folded(&mut written).expect("write to a Vec");
            assert_eq!(
                written,
                folded(&reference),
                "{} [{}]",
                row.input,
                row.options
            );
            assert_eq!(compact.len(), reference.stacks.len());
            assert_eq!(compact.is_empty(), reference.stacks.is_empty());
            assert_eq!(compact.warnings(), reference.warnings.as_slice());
            assert_eq!(compact.event(), reference.event.as_deref());
            assert_eq!(compact.into_collapsed(), reference);
            compared += 1;
        }
    }
    assert!(compared >= 190, "only {compared} comparisons");
}
