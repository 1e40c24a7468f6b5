//! Helpers of the `agent_*` tests: start `ember agent` / `ember server` binaries, build the Go
//! pprof test program, poll conditions.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `ember agent`.
pub struct AgentProc {
    pub child: Child,
    pub admin: String,
    pub log: Arc<Mutex<String>>,
}

impl AgentProc {
    pub fn start(config: &Path) -> AgentProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
            .args(["agent", "--config"])
            .arg(config)
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
            if let Some(rest) = line.split("admin on http://").nth(1) {
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

    pub fn url(&self) -> String {
        format!("http://{}", self.admin)
    }

    pub fn metrics(&self) -> String {
        let (s, b) = http_get(&self.admin, "/metrics");
        assert_eq!(s, 200);
        b
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGTERM; returns (exit success, seconds taken).
    pub fn terminate(mut self) -> (bool, f64) {
        let started = Instant::now();
        self.signal("-TERM");
        let status = self.child.wait().unwrap();
        (status.success(), started.elapsed().as_secs_f64())
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Value of the first metric line starting with `prefix` (name plus labels).
pub fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let (s, b) = super::server_util::http(addr, "GET", path, &[], b"");
    (s, String::from_utf8_lossy(&b).into_owned())
}

/// Polls `f` every 250 ms until it returns true or `limit` passes.
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

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn find_go() -> Option<PathBuf> {
    [
        std::env::var_os("EMBER_GO").map(PathBuf::from),
        Some(PathBuf::from("/usr/lib/go-1.19/bin/go")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file())
}

const GO_PROGRAM: &str = r#"package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
)

var sink []byte
var mu sync.Mutex

//go:noinline
func emberBurn() int {
	x := 0
	for i := 0; i < 2000000; i++ {
		x += i * i % 7
	}
	return x
}

func main() {
	runtime.SetMutexProfileFraction(1)
	runtime.SetBlockProfileRate(1)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(l.Addr().String())
	go func() {
		for {
			mu.Lock()
			sink = make([]byte, 64<<10)
			emberBurn()
			mu.Unlock()
		}
	}()
	http.Serve(l, nil)
}
"#;

/// A running Go program serving net/http/pprof.
pub struct GoApp {
    pub child: Child,
    pub addr: String,
}

impl Drop for GoApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Builds (once per directory) and starts the Go test program; None when Go is missing
/// outside CI.
pub fn go_app(dir: &Path, name: &str) -> Option<GoApp> {
    let Some(go) = find_go() else {
        if std::env::var_os("CI").is_some() {
            panic!("go (Go 1.19, /usr/lib/go-1.19/bin/go) is required in CI: run .ci/setup");
        }
        eprintln!("!!!!!!!! SKIPPING: Go 1.19 not found (install golang-1.19-go) !!!!!!!!");
        return None;
    };
    let src = dir.join("main.go");
    std::fs::write(&src, GO_PROGRAM).unwrap();
    let bin = dir.join(name);
    let out = Command::new(&go)
        .arg("build")
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .env("GOCACHE", dir.join("gocache"))
        .env("GOPATH", dir.join("gopath"))
        .env("GO111MODULE", "off")
        .env("HOME", dir)
        .output()
        .expect("run go build");
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = Command::new(&bin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    Some(GoApp {
        child,
        addr: line.trim().to_string(),
    })
}

/// Starts `ember server --listen ADDR` on a fixed address (to restart it on the same port).
pub fn server_on(addr: &str, data_dir: &Path) -> Child {
    std::fs::create_dir_all(data_dir).unwrap();
    let config = data_dir.with_extension("config.json");
    std::fs::write(&config, r#"{"retention_days": 0}"#).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["server", "--listen", addr, "--data-dir"])
        .arg(data_dir)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_for(Duration::from_secs(20), || {
        super::server_util::try_http(addr, "GET", "/ready", &[], b"")
            .map(|(s, _)| s == 200)
            .unwrap_or(false)
    }));
    child
}
