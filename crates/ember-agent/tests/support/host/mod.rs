//! Host-side helpers shared by the agent's tests (`crates/ember-agent/tests`, in-process) and
//! the `ember` binary's agent tests (`crates/ember/tests/agent_*.rs`, which include this file
//! with `#[path]`): a CPU-burning C workload, the root/perf and Python checks that decide
//! whether a test can run here, polling, and reading metrics, folded stacks and dump folders.
//!
//! The including module must have a `wire` module in scope (the HTTP helpers of
//! `crates/ember-server/tests/util/wire.rs`): this file talks HTTP through `super::wire`.
#![allow(dead_code)]

#[path = "../../../../ember-sampler/tests/programs/mod.rs"]
mod programs;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Polls `f` every 250 ms until it returns true or `limit` passes; returns the last answer.
pub fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    f()
}

/// Value of the first metric line starting with `prefix` (name plus labels).
pub fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Folded stacks the server at `addr` merges for `selector` and `profile_type` over the last
/// hour ("" until it has some).
pub fn query_folded(addr: &str, selector: &str, profile_type: &str) -> String {
    let enc = super::wire::enc;
    let path = format!(
        "/api/v1/query?query={}&type={}&from=now-1h&until=now&format=folded",
        enc(selector),
        enc(profile_type)
    );
    let (s, b) = super::wire::http(addr, "GET", &path, &[], b"");
    if s == 200 {
        String::from_utf8_lossy(&b).into_owned()
    } else {
        String::new()
    }
}

/// A port nothing listens on right now (for an address that must be known before anything
/// listens on it: a trigger port in a configuration, a server that comes up later).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// CPU time (user plus system, in seconds) process `pid` has used so far, from
/// `/proc/PID/stat`: what tests wait on to know that a sampler had something to see.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    ticks as f64 / clock_ticks()
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`), 100 on every Linux we run on.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// Whether this process may open whole-host perf events (root, or perf_event_paranoid <= 0).
/// Prints a loud skip notice when not; CI runs as root.
pub fn host_perf_allowed() -> bool {
    let paranoid =
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let ok = root || paranoid.trim().parse::<i32>().unwrap_or(2) <= 0;
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("CI must run the agent tests as root (whole-host perf events)");
        }
        eprintln!("!!!!!!!! SKIPPING: needs root or perf_event_paranoid <= 0 !!!!!!!!");
    }
    ok
}

/// Python import check: a missing module skips the test locally (loudly) and fails it in CI.
pub fn python_has(check: &str, pip_hint: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", check])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("CI must provide the python module ({check}): pip install {pip_hint}");
        }
        eprintln!("!!!!!!!! SKIPPING: python3 cannot `{check}`; pip install {pip_hint} !!!!!!!!");
    }
    ok
}

/// The sampler's three_paths C program (path_a/path_b/path_c burning CPU), compiled with
/// frame pointers and running until dropped.
pub struct Workload {
    pub child: Child,
}

impl Workload {
    /// Compiles three_paths into `dir` and starts it.
    pub fn start(dir: &Path) -> Workload {
        let bin = dir.join("three_paths");
        programs::compile_to("three_paths", &programs::FRAME_POINTERS, &bin);
        let child = Command::new(&bin)
            .arg("100000000")
            .stdout(Stdio::null())
            .spawn()
            .expect("start three_paths");
        Workload { child }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Files (recursively) under `dir`, as paths relative to it, sorted.
pub fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.push(rel.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Whether `name` is `YYYYMMDDTHHMMSS-<suffix>`.
pub fn is_stamped(name: &str, suffix: &str) -> bool {
    let Some(stamp) = name.strip_suffix(suffix).and_then(|s| s.strip_suffix('-')) else {
        return false;
    };
    stamp.len() == 15
        && stamp.as_bytes()[8] == b'T'
        && stamp
            .bytes()
            .enumerate()
            .all(|(i, b)| i == 8 || b.is_ascii_digit())
}

/// Sum of the counts of folded lines containing `needle`.
pub fn folded_count(folded: &str, needle: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The path of a file of the workspace, from the including crate's directory.
pub fn workspace_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}
