//! Shared helpers of the `server_*` tests that need the `ember server` process itself
//! (the CLI, SIGKILL and SIGTERM, its memory): start the real binary on a free port and
//! speak minimal HTTP/1.1 to it over a plain socket. The in-process server tests live in
//! `crates/ember-server/tests`, whose wire helpers this reuses.
#![allow(dead_code)]

#[path = "../../../ember-server/tests/util/wire.rs"]
mod wire;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub use wire::*;

/// A running `ember server` child process.
pub struct Server {
    pub child: Child,
    /// Where it listens, and the requests tests send it.
    pub endpoint: Endpoint,
    pub data_dir: PathBuf,
}

impl Server {
    /// Starts `ember server --listen 127.0.0.1:0 --data-dir dir [extra...]` and waits for its address.
    /// Without a `--config` in `extra`, retention is disabled: the corpus profiles carry
    /// their original (years old) timestamps.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        if !extra.contains(&"--config") {
            std::fs::create_dir_all(data_dir).unwrap();
            let config = data_dir.with_extension("config.json");
            std::fs::write(&config, r#"{"retention_days": 0}"#).unwrap();
            args.push("--config".into());
            args.push(config.display().to_string());
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
            .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ember server");
        let stderr = child.stderr.take().expect("stderr");
        let mut reader = BufReader::new(stderr);
        // Log lines may come before the banner (a restart after SIGKILL warns about the
        // torn tail of the write-ahead log it replays): read until the line with the address.
        let mut before = String::new();
        let addr = loop {
            let mut line = String::new();
            let n = reader.read_line(&mut line).expect("read server banner");
            if n == 0 {
                panic!("the server ended before printing its address; it printed:\n{before}");
            }
            if let Some(rest) = line.split("http://").nth(1) {
                break rest.split(',').next().unwrap_or(rest).trim().to_string();
            }
            before.push_str(&line);
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = reader.read_to_string(&mut sink);
        });
        Server {
            child,
            endpoint: Endpoint { addr },
            data_dir: data_dir.to_path_buf(),
        }
    }

    /// SIGTERM and wait for a clean exit (graceful shutdown flushes).
    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(ok.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "exit status after SIGTERM: {status:?}");
    }

    /// SIGKILL, no chance to flush anything.
    pub fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::ops::Deref for Server {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pyroscope's Java CPU profile (corpus path): the profile the web UI tests draw.
pub const JAVA_SHOP: &str = "pyroscope/pkg/pprof/testdata/profile_java";

/// A server in a fresh `temp_dir(tag)` holding [`JAVA_SHOP`] as the application
/// `java-shop.cpu` (legacy `/ingest`): the directory (removed when dropped: keep it declared
/// before the server), the server and the profile's path.
pub fn java_shop_server(tag: &str) -> (tempfile::TempDir, Server, PathBuf) {
    let dir = temp_dir(tag);
    let server = Server::start(&dir.path().join("data"), &[]);
    let java = corpus(JAVA_SHOP);
    let body = std::fs::read(&java).unwrap();
    let (status, answer) = server.request(
        "POST",
        "/ingest?name=java-shop.cpu&format=pprof",
        &[],
        &body,
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    (dir, server, java)
}
