//! The binary's logging set-up: `--log-level`, `--log-format`, `EMBER_LOG`/`RUST_LOG`, and that
//! log lines go to stderr only, leaving a command's stdout data exactly as without logging.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `ember` with `args`, `input` on stdin and the given environment (the logging variables
/// of the test's own environment are removed first).
fn ember(args: &[&str], env: &[(&str, &str)], input: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ember"));
    command
        .args(args)
        .env_remove("EMBER_LOG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("run ember");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ember {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn perf_script() -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/corpora/FlameGraph/test/perf-vertx-stacks-01.txt"),
    )
    .unwrap()
}

#[test]
fn debug_level_logs_on_stderr_and_leaves_stdout_alone() {
    let input = perf_script();
    let quiet = ember(&["collapse", "--all", "-"], &[], &input);
    assert!(
        quiet.stderr.is_empty(),
        "short commands log at warn by default: {}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let loud = ember(
        &["--log-level", "debug", "collapse", "--all", "-"],
        &[],
        &input,
    );
    let stderr = String::from_utf8_lossy(&loud.stderr);
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("DEBUG") && l.contains("starting")),
        "{stderr}"
    );
    assert_eq!(loud.stdout, quiet.stdout);
    // The flag is global: it may also follow the subcommand.
    let after = ember(
        &["collapse", "--all", "-", "--log-level", "debug"],
        &[],
        &input,
    );
    assert!(String::from_utf8_lossy(&after.stderr).contains("starting"));
}

#[test]
fn json_format_writes_one_object_per_line() {
    let input = perf_script();
    let quiet = ember(&["collapse", "--all", "-"], &[], &input);
    let out = ember(
        &[
            "--log-format",
            "json",
            "--log-level",
            "trace",
            "collapse",
            "--all",
            "-",
        ],
        &[],
        &input,
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let start = lines
        .iter()
        .find(|v| v["fields"]["message"] == "starting")
        .unwrap_or_else(|| panic!("no start event in {stderr}"));
    assert_eq!(start["level"], "DEBUG");
    assert_eq!(start["fields"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(out.stdout, quiet.stdout);
}

#[test]
fn environment_filter_applies_unless_the_flag_is_given() {
    let input = perf_script();
    for var in ["EMBER_LOG", "RUST_LOG"] {
        let out = ember(&["collapse", "--all", "-"], &[(var, "ember=debug")], &input);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("starting"),
            "{var}"
        );
    }
    let flag_wins = ember(
        &["--log-level", "warn", "collapse", "--all", "-"],
        &[("EMBER_LOG", "debug")],
        &input,
    );
    assert!(flag_wins.stderr.is_empty());
    // EMBER_LOG comes before RUST_LOG.
    let ember_first = ember(
        &["collapse", "--all", "-"],
        &[("EMBER_LOG", "warn"), ("RUST_LOG", "debug")],
        &input,
    );
    assert!(ember_first.stderr.is_empty());
}

#[test]
fn an_invalid_filter_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["collapse", "/dev/null"])
        .env("EMBER_LOG", "ember=loud")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("EMBER_LOG"), "{stderr}");
}
