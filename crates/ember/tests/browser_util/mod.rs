//! What the browser tests share: the repository root (the node scripts live in
//! `tests/browser/`), whether chromium, node and playwright-core are here, running one
//! script, and where screenshots go.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether Debian's chromium, node and `tests/browser/node_modules/playwright-core` are here.
pub fn browser_tools_present() -> bool {
    let chromium = Path::new("/usr/bin/chromium").exists();
    let node = Command::new("node").arg("--version").output().is_ok();
    let playwright = repo_root()
        .join("tests/browser/node_modules/playwright-core")
        .exists();
    chromium && node && playwright
}

/// True when the browser tools are here; false (with a loud message) when they are missing
/// outside CI; a failure under CI, where `.ci/setup` installs them.
pub fn browser_available() -> bool {
    if browser_tools_present() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "chromium, node or playwright-core missing under CI: run `bash .ci/setup`"
    );
    eprintln!(
        "SKIPPED: browser test needs chromium, node and tests/browser/node_modules (run `bash .ci/setup`)"
    );
    false
}

/// Runs `tests/browser/{script}` with `args` as JSON; returns its output after checking that
/// it succeeded and ran at least `min_checks` checks to the end.
pub fn run_script(script: &str, args: &serde_json::Value, min_checks: usize) -> String {
    let output = Command::new("node")
        .arg(repo_root().join("tests/browser").join(script))
        .arg(args.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "browser checks failed:\n{stdout}\n{stderr}"
    );
    let checks = stdout.matches("ok: ").count();
    assert!(
        checks >= min_checks && stdout.contains("ok: all checks ran"),
        "every browser check ran ({checks}):\n{stdout}"
    );
    stdout
}

/// `target/ui-screenshots/`, created if missing: the browser tests' screenshots (artifacts).
pub fn screenshots() -> PathBuf {
    let shots = repo_root().join("target/ui-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    shots
}
