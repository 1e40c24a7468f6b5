//! The C programs of this folder, for the tests that record them: compiling them, and what
//! they are known to do. Used by the sampler's own tests and by those of other crates that
//! include this file with `#[path]` (ember-export's live session test, the ember agent tests'
//! workload).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Frame pointers the sampler can walk: `-fno-shrink-wrap` keeps gcc from delaying the frame
/// set-up past the hot loop.
pub const FRAME_POINTERS: [&str; 2] = ["-fno-omit-frame-pointer", "-fno-shrink-wrap"];

/// This folder (found from any crate of the workspace).
pub fn programs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ember-sampler/tests/programs")
}

/// Compiles `<name>.c` of this folder with `gcc -O2 flags` into `out`; panics if gcc fails.
pub fn compile_to(name: &str, flags: &[&str], out: &Path) {
    let status = Command::new("gcc")
        .arg("-O2")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(programs_dir().join(format!("{name}.c")))
        .status()
        .expect("gcc must be installed");
    assert!(status.success(), "gcc failed for {name}");
}

/// Compiles `<name>.c` with `flags` as `output` in a directory of its own per test (tests
/// run in parallel).
pub fn compile(test: &str, name: &str, output: &str, flags: &[&str]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(output);
    compile_to(name, flags, &out);
    out
}

/// Checks the off-CPU nanoseconds (as `f64`) measured in `sleeper`'s two functions against the sleeps
/// it makes (300 ms in `sleep_long`, 100 ms in `sleep_short`); `what` names the recording in
/// the printed summary.
pub fn check_sleeper_times(what: &str, long: f64, short: f64, switches: u64) {
    eprintln!(
        "{what}: sleep_long {:.1} ms (slept 300), sleep_short {:.1} ms (slept 100), {switches} switches",
        long / 1e6,
        short / 1e6,
    );
    // nanosleep never returns early. Off-CPU time also covers the wait on the run queue after
    // the wake-up, which on a loaded 2-core CI machine (other tests spin at the same time) adds
    // up to a few hundred ms; a stack counted twice or time given to the wrong stack still fails.
    assert!((300e6..600e6).contains(&long), "{long}");
    assert!((100e6..300e6).contains(&short), "{short}");
    assert!(long > short, "{long} <= {short}");
}
