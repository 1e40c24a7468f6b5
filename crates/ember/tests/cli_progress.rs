//! Long CLI work shows progress on a terminal and nothing extra when piped (issue 14, item 7):
//! merging thousands of files (`ember convert`, `ember top`, `ember flamegraph`), a collapse
//! that takes a while, and `ember push` of many files. The terminal is a pty from util-linux
//! `script`.

mod server_util;

use std::path::Path;
use std::process::{Command, Stdio};

const EMBER: &str = env!("CARGO_BIN_EXE_ember");
const PROFILE: &str = "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz";

/// Runs `command` with `sh -c` in `dir`, piped: (success, stdout, stderr).
fn piped(dir: &Path, command: &str) -> (bool, String, String) {
    let out = Command::new("sh")
        .env("EMBER_PROGRESS_DELAY_MS", "0")
        .args(["-c", command])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `command` on a pty in `dir`: (success, everything the terminal showed).
fn on_a_terminal(dir: &Path, command: &str) -> (bool, String) {
    // Drawn from the first step: how long 8,000 merges take depends on the machine (0.24 s,
    // under the default quarter of a second, on a quiet one).
    let out = Command::new("script")
        .env("EMBER_PROGRESS_DELAY_MS", "0")
        .args(["-qec", command, "/dev/null"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("util-linux script");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A folder with `p.pb.gz` (removed when the guard drops) and a shell word listing it `n`
/// times.
fn many(name: &str, n: usize) -> (tempfile::TempDir, String) {
    let dir = server_util::temp_dir(name);
    std::fs::copy(server_util::corpus(PROFILE), dir.path().join("p.pb.gz")).unwrap();
    (dir, vec!["p.pb.gz"; n].join(" "))
}

#[test]
fn merging_thousands_of_files_shows_progress_on_a_terminal_only() {
    let (dir, files) = many("progress-merge", 8000);
    for command in [
        format!("{EMBER} convert {files} -o merged.pb.gz"),
        format!("{EMBER} top {files}"),
        format!("{EMBER} flamegraph {files} > merged.svg"),
    ] {
        let (ok, _, err) = piped(dir.path(), &command);
        assert!(ok, "{err}");
        assert_eq!(err, "", "piped: nothing extra on stderr");
        let (ok, screen) = on_a_terminal(dir.path(), &command);
        assert!(ok, "{screen}");
        assert!(
            screen.contains(" / 8000 files (") && screen.contains("\u{1b}[2K"),
            "{command}: {screen:?}"
        );
        // The line is erased at the end: the last thing drawn is the erase.
        let last_draw = screen.rfind("ember: ").unwrap();
        assert!(
            screen[last_draw..].contains("\r\u{1b}[2K"),
            "not erased: {screen:?}"
        );
    }
    // Progress never reaches stdout: the merged table is the same either way.
    let (_, table, _) = piped(dir.path(), &format!("{EMBER} top {files}"));
    assert!(
        table.starts_with("File: ") || table.contains("flat%"),
        "{table}"
    );
}

#[test]
fn a_slow_collapse_shows_how_far_it_got() {
    let dir = server_util::temp_dir("progress-collapse");
    let dir = dir.path();
    let perf = server_util::corpus("FlameGraph/test/perf-java-stacks-01.txt");
    // Half the input, a pause, the rest: long enough for the line to be drawn.
    let command = format!(
        "(cat {p}; echo; sleep 1; cat {p}) | {EMBER} collapse > out.folded",
        p = perf.display()
    );
    let (ok, _, err) = piped(dir, &command);
    assert!(ok, "{err}");
    assert_eq!(err, "");
    let expected = std::fs::read(dir.join("out.folded")).unwrap();
    let (ok, screen) = on_a_terminal(dir, &command);
    assert!(ok, "{screen}");
    assert!(
        screen.contains("ember: collapsing ")
            && screen.contains(" MB, ")
            && screen.contains("stdin"),
        "{screen:?}"
    );
    // The output file is the same with or without a terminal.
    assert_eq!(std::fs::read(dir.join("out.folded")).unwrap(), expected);
}

#[test]
fn pushing_many_files_shows_progress_on_a_terminal_only() {
    let (dir, files) = many("progress-push", 400);
    let server = server_util::Server::start(&dir.path().join("data"), &[]);
    let url = format!("http://{}", server.endpoint.addr);
    let command = format!("{EMBER} push {files} --service progress --at now --server {url}");
    let (ok, out, err) = piped(dir.path(), &command);
    assert!(ok, "{err}");
    assert_eq!(err, "", "piped: nothing extra on stderr");
    assert!(out.contains("pushed 400 of 400 profiles"), "{out}");
    let (ok, screen) = on_a_terminal(dir.path(), &command);
    assert!(ok, "{screen}");
    assert!(
        screen.contains("ember: pushing ") && screen.contains(" / 400 files"),
        "{screen:?}"
    );
    // Each "accepted" line is written over an erased line (what follows the last carriage
    // return is what the terminal shows), never after the progress text.
    for line in screen.lines().filter(|l| l.contains("accepted p.pb.gz")) {
        let shown = line.rsplit('\r').next().unwrap();
        assert!(
            shown
                .trim_start_matches("\u{1b}[2K")
                .starts_with("accepted p.pb.gz"),
            "{line:?}"
        );
    }
}
