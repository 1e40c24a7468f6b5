//! `ember top` against `go tool pprof -top` on every profile.proto file of the corpus.
//!
//! For each proto file listed in `pprof-cases.tsv`, and for each of its sample types (plus the
//! default, a `-cum` and a `-nodecount=5` run), both tools print the top table and the test
//! requires the whole output to be identical: the `File:`/`Type:`/`Time:`/`Duration:` lines (Go
//! runs with `TZ=UTC`, Ember always prints UTC), the summary, `Dropped N nodes`, the column
//! header, and every row (flat, flat%, sum%, cum, cum%, name and inline mark). Go runs with
//! `-symbolize=none` so that it never looks for local binaries or symbol servers. The two .NET
//! files whose function ids are all 0 must be rejected with an error by both.
//!
//! Go 1.19's pprof is the reference (Debian `golang-1.19-go`, installed by `.ci/setup`). Without
//! it the test is skipped with a loud message, unless `CI` is set, where it fails.

use ember_formats::{SortBy, TopOptions, top};
use std::path::{Path, PathBuf};
use std::process::Command;

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

fn find_go() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("EMBER_GO").map(PathBuf::from),
        Some(PathBuf::from("/usr/lib/go-1.19/bin/go")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_file())
}

/// (path, is the broken .NET file)
fn proto_cases() -> Vec<(PathBuf, bool)> {
    let tsv = std::fs::read_to_string(corpora().join("pprof-cases.tsv")).expect("pprof-cases.tsv");
    let mut cases = Vec::new();
    for line in tsv.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        // Legacy (pre-proto) files have no sample types in the manifest.
        if cols.len() < 4 || cols[3].is_empty() {
            continue;
        }
        cases.push((corpora().join(cols[0]), cols[2].contains("BROKEN")));
    }
    cases
}

/// The whole report, byte for byte. Go prints the profile's strings raw; Ember decodes them as
/// UTF-8 (lossy), so Go's output goes through the same lossy conversion (this only matters for
/// `invalid_utf8.pb.gz`).
fn comparable(report: &str) -> String {
    report.to_owned()
}

fn go_top(go: &Path, file: &Path, args: &[String]) -> Result<String, String> {
    let out = Command::new(go)
        .args(["tool", "pprof", "-top", "-symbolize=none"])
        .args(args)
        .arg(file)
        .env("TZ", "UTC")
        .env("PPROF_TMPDIR", std::env::temp_dir())
        .output()
        .map_err(|e| format!("running go: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn top_matches_go_tool_pprof_on_every_proto_file() {
    let Some(go) = find_go() else {
        if std::env::var_os("CI").is_some() {
            panic!("go (Go 1.19, /usr/lib/go-1.19/bin/go) is required in CI: run .ci/setup");
        }
        eprintln!(
            "\n!!!!!!!! SKIPPING top_matches_go_tool_pprof: Go 1.19 not found (install golang-1.19-go) !!!!!!!!\n"
        );
        return;
    };
    let cases = proto_cases();
    assert!(
        cases.len() >= 70,
        "manifest lists only {} proto files",
        cases.len()
    );
    let mut runs = 0;
    let mut files_exact = 0;
    let mut broken = 0;
    let mut failures = Vec::new();
    for (path, is_broken) in &cases {
        let name = path
            .strip_prefix(corpora())
            .unwrap_or(path)
            .display()
            .to_string();
        let decoded = ember_pprof::read_file(path);
        if *is_broken {
            assert!(decoded.is_err(), "{name}: broken .NET profile was accepted");
            assert!(
                go_top(&go, path, &[]).is_err(),
                "{name}: go accepted the broken profile"
            );
            broken += 1;
            continue;
        }
        let profile = decoded.unwrap_or_else(|e| panic!("{name}: {e}"));
        // Default sample type, every sample type by index, and the cumulative sort.
        let mut variants: Vec<(Vec<String>, TopOptions)> =
            vec![(Vec::new(), TopOptions::default())];
        for i in 0..profile.sample_type.len() {
            variants.push((
                vec![format!("-sample_index={i}")],
                TopOptions {
                    sample_index: Some(i.to_string()),
                    ..Default::default()
                },
            ));
        }
        variants.push((
            vec!["-cum".into()],
            TopOptions {
                sort: SortBy::Cum,
                ..Default::default()
            },
        ));
        variants.push((
            vec!["-nodecount=5".into()],
            TopOptions {
                node_count: 5,
                ..Default::default()
            },
        ));
        let mut all_exact = true;
        for (args, options) in variants {
            runs += 1;
            let expected = go_top(&go, path, &args)
                .unwrap_or_else(|e| panic!("{name} {args:?}: go failed: {e}"));
            let table = top(&profile, &options).unwrap_or_else(|e| panic!("{name} {args:?}: {e}"));
            let got = table.render();
            if comparable(&got) != comparable(&expected) {
                all_exact = false;
                failures.push(format!(
                    "=== {name} {args:?}\n--- go\n{}\n--- ember\n{}",
                    comparable(&expected),
                    comparable(&got)
                ));
            }
        }
        if all_exact {
            files_exact += 1;
        }
    }
    eprintln!(
        "go tool pprof -top agreement: {files_exact}/{} proto files identical in every variant ({runs} runs); {broken} broken files rejected",
        cases.len() - broken
    );
    assert!(
        failures.is_empty(),
        "{} of {runs} runs differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
