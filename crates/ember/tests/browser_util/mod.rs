//! What the browser tests share: the repository root (the node scripts live in
//! `tests/browser/`) and whether chromium, node and playwright-core are here.

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
