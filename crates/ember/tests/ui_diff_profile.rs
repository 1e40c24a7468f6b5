//! A pushed `pprof -diff_base` profile in the web UI, in a real browser (a real `ember
//! server`, the real `ember push`, Debian's chromium through playwright-core): the Explore
//! view draws it as the differential flame graph it is (base → new), with the base's total and
//! shares of it as `go tool pprof -top` prints them (Go's own output, committed next to the
//! file in `crates/ember-formats/tests/data/diff-base`), and a note that the selection holds a
//! pushed diff profile; with the node limit off too (boot.js's first paint). A plain profile
//! stays a plain graph. The checks are in `tests/browser/ui_diff_profile.mjs`.
//!
//! Needs `bash .ci/setup`; skipped loudly without chromium or node, except under CI.

mod browser_util;
mod server_util;

use std::collections::BTreeMap;
use std::process::Command;

use browser_util::{browser_available, repo_root, run_script, screenshots};
use server_util::{Server, corpus, temp_dir};

const DIFF: &str = "crates/ember-formats/tests/data/diff-base/sample-vs-large";

/// `ember push FILE --service S --at now` to `server`.
fn push(server: &Server, file: &std::path::Path, service: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["push", "--at", "now", "--service", service, "--server"])
        .arg(format!("http://{}", server.addr))
        .arg(file)
        .output()
        .expect("run ember push");
    assert!(
        out.status.success(),
        "ember push {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Go's `-top` of the diff: the base's total (`Total samples = 1760ms`) in nanoseconds, and
/// each function's cum% (of that total).
fn go_top() -> (i64, BTreeMap<String, f64>) {
    let text = std::fs::read_to_string(repo_root().join(format!("{DIFF}.top.txt"))).unwrap();
    let total = text
        .split("Total samples = ")
        .nth(1)
        .and_then(|rest| rest.split("ms").next())
        .expect("Go's total");
    let total = total.trim().parse::<i64>().unwrap() * 1_000_000;
    let mut cum = BTreeMap::new();
    for line in text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
    {
        // flat flat% sum% cum cum% name (the name may hold spaces)
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 6 {
            continue;
        }
        let pct = cols[4].trim_end_matches('%').parse::<f64>().unwrap();
        cum.insert(cols[5..].join(" "), pct);
    }
    (total, cum)
}

#[test]
fn web_ui_draws_a_pushed_diff_profile_as_the_diff() {
    if !browser_available() {
        return;
    }
    let dir = temp_dir("ui-diff-profile");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    push(
        &server,
        &repo_root().join(format!("{DIFF}.diff.pb.gz")),
        "go-diff",
    );
    push(
        &server,
        &corpus("pprof/internal/report/testdata/sample.cpu"),
        "plain",
    );
    let types = server.get_json("/api/v1/profile_types", &[]);
    let cpu = types
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .find(|t| t.split(':').nth(1) == Some("cpu"))
        .expect("a cpu type")
        .to_string();
    let (base_total, go_cum) = go_top();
    assert_eq!(
        base_total, 1_760_000_000,
        "Go's base total: 1,760 ms of cpu"
    );
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "type": cpu,
        "diff": "go-diff",
        "plain": "plain",
        "baseTotal": base_total,
        "goCum": go_cum,
        "screenshots": screenshots(),
    });
    run_script("ui_diff_profile.mjs", &args, 25);
    drop(server);
}
