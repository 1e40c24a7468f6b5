//! Helpers of the `agent_*` tests that need the `ember` binary itself (its command line,
//! signals and stderr): start `ember agent`, read its log. The agent's own end-to-end tests run
//! it in-process in `crates/ember-agent/tests`, whose host helpers (workload, polling, metrics)
//! this includes.
#![allow(dead_code)]

#[path = "../../../ember-agent/tests/support/host/mod.rs"]
mod host;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// `host` talks HTTP through `super::wire`.
use super::server_util as wire;

pub use host::*;

/// A running `ember agent`.
pub struct AgentProc {
    pub child: Child,
    pub admin: String,
    pub log: Arc<Mutex<String>>,
}

impl AgentProc {
    /// Starts `ember agent --config FILE` and waits for its admin banner.
    pub fn start(config: &Path) -> AgentProc {
        Self::start_with(config, &[])
    }

    /// [`AgentProc::start`] with more options (`--admin-token-file FILE`).
    pub fn start_with(config: &Path, extra: &[&str]) -> AgentProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
            .args(["agent", "--config"])
            .arg(config)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ember agent");
        let mut reader = BufReader::new(child.stderr.take().unwrap());
        let log = Arc::new(Mutex::new(String::new()));
        let mut admin = None;
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            log.lock().unwrap().push_str(&line);
            if let Some(rest) = line.split("admin listening url=http://").nth(1) {
                admin = Some(rest.split_whitespace().next().unwrap().to_string());
                break;
            }
            line.clear();
        }
        let admin = admin.unwrap_or_else(|| panic!("no admin banner: {}", log.lock().unwrap()));
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        AgentProc { child, admin, log }
    }

    /// The admin endpoint's URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.admin)
    }

    /// `GET /metrics` on the admin endpoint.
    pub fn metrics(&self) -> String {
        let (s, b) = http_get(&self.admin, "/metrics");
        assert_eq!(s, 200);
        b
    }

    /// What the agent wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Sends `sig` (`-HUP`, `-TERM`) with kill(1).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGTERM; returns (exit success, seconds taken). Then checks that the agent logged its
    /// `stopped` line and that everything it logged, shutdown included, was structured.
    pub fn terminate(mut self) -> (bool, f64) {
        let started = Instant::now();
        self.signal("-TERM");
        let status = self.child.wait().unwrap();
        let taken = started.elapsed().as_secs_f64();
        // The reader thread sees the end of the pipe right after the exit.
        let stopped = wait_for(Duration::from_secs(2), || {
            self.log().lines().any(|l| l.contains(" stopped flushed="))
        });
        assert!(stopped, "no `stopped` line: {}", self.log());
        assert_structured_logs(&self.log());
        (status.success(), taken)
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` on `addr`: status and body text.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let (s, b) = super::server_util::http(addr, "GET", path, &[], b"");
    (s, String::from_utf8_lossy(&b).into_owned())
}

/// Whether `line` is an event of the binary's `tracing` subscriber in its text format:
/// `TIMESTAMP LEVEL target: message key=value ...`, from Ember's crates or a library that
/// logs through `tracing` too (object_store's retries: `object_store::client::retry:`).
pub fn is_tracing_line(line: &str) -> bool {
    let mut words = line.split_whitespace();
    let (Some(_time), Some(level), Some(target)) = (words.next(), words.next(), words.next())
    else {
        return false;
    };
    ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level)
        && target.strip_suffix(':').is_some_and(|path| {
            !path.is_empty()
                && path.split("::").all(|m| {
                    !m.is_empty() && m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
        })
}

/// Every line the agent wrote is structured: a `tracing` event (level, target, message,
/// `key=value` fields), nothing printed by hand.
pub fn assert_structured_logs(log: &str) {
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        assert!(is_tracing_line(line), "not a tracing line: {line}");
    }
}
