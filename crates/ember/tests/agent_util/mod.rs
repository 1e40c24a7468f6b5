//! Helpers of the `agent_*` tests: start `ember agent` / `ember server` binaries, build the Go
//! pprof test program, poll conditions.
#![allow(dead_code)]

#[path = "../../../ember-sampler/tests/programs/mod.rs"]
mod programs;

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
        Self::start_with_env(config, &[])
    }

    /// Starts the agent with extra environment variables (AWS_* for a local S3).
    pub fn start_with_env(config: &Path, env: &[(&str, String)]) -> AgentProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
            .args(["agent", "--config"])
            .arg(config)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
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
            if let Some(rest) = line.split("msg=\"admin listening\" url=http://").nth(1) {
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

    /// SIGTERM; returns (exit success, seconds taken). Then checks that everything the
    /// agent logged, shutdown included, was structured.
    pub fn terminate(mut self) -> (bool, f64) {
        let started = Instant::now();
        self.signal("-TERM");
        let status = self.child.wait().unwrap();
        let taken = started.elapsed().as_secs_f64();
        // The reader thread sees the end of the pipe right after the exit.
        wait_for(Duration::from_secs(2), || {
            self.log().contains("msg=\"stopped\"")
        });
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

/// Folded stacks the server at `addr` merges for `selector` and `profile_type` over the last
/// hour ("" until it has some).
pub fn query_folded(addr: &str, selector: &str, profile_type: &str) -> String {
    let enc = super::server_util::enc;
    let (s, b) = super::server_util::http(
        addr,
        "GET",
        &format!(
            "/api/v1/query?query={}&type={}&from=now-1h&until=now&format=folded",
            enc(selector),
            enc(profile_type)
        ),
        &[],
        b"",
    );
    if s == 200 {
        String::from_utf8_lossy(&b).into_owned()
    } else {
        String::new()
    }
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

/// The GNU build-id linked into the Go test program (`go build -ldflags=-B`), so the
/// agent's `__meta_process_build_id` can be checked against a known value.
pub const GO_BUILD_ID: &str = "e3be40a6c0ffee00d15ea5e5ba5eba11deadbeef";

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
        .arg(format!("-ldflags=-B 0x{GO_BUILD_ID}"))
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

/// `ember collapse FILE` output.
pub fn collapse_file(path: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .arg("collapse")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ember collapse {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sum of the counts of folded lines containing `needle`.
pub fn folded_count(folded: &str, needle: &str) -> u64 {
    folded
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A `moto_server` (S3) child on 127.0.0.1:port.
pub struct Moto {
    child: Option<Child>,
    pub port: u16,
}

impl Moto {
    pub fn start(port: u16) -> Moto {
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server starts");
        let addr = format!("127.0.0.1:{port}");
        assert!(
            wait_for(Duration::from_secs(60), || {
                super::server_util::try_http(&addr, "GET", "/", &[], b"").is_ok()
            }),
            "moto_server did not come up on {addr}"
        );
        Moto {
            child: Some(child),
            port,
        }
    }

    pub fn create_bucket(&self, bucket: &str) {
        let addr = format!("127.0.0.1:{}", self.port);
        let (s, b) = super::server_util::http(&addr, "PUT", &format!("/{bucket}"), &[], b"");
        assert_eq!(s, 200, "create bucket: {}", String::from_utf8_lossy(&b));
    }

    /// Object keys of `bucket` (ListObjectsV2; a few hundred keys at most in these tests).
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let addr = format!("127.0.0.1:{}", self.port);
        let (s, b) =
            super::server_util::http(&addr, "GET", &format!("/{bucket}?list-type=2"), &[], b"");
        assert_eq!(s, 200, "list: {}", String::from_utf8_lossy(&b));
        let text = String::from_utf8_lossy(&b);
        let mut keys: Vec<String> = text
            .split("<Key>")
            .skip(1)
            .filter_map(|p| p.split("</Key>").next())
            .map(str::to_string)
            .collect();
        keys.sort();
        keys
    }

    /// Downloads an object with boto3 (moto answers unsigned GETs with 403).
    pub fn get(&self, bucket: &str, key: &str, to: &Path) {
        let script = "import boto3,sys\n\
            s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1',\n\
                aws_access_key_id='testing', aws_secret_access_key='testing')\n\
            s3.download_file(sys.argv[2], sys.argv[3], sys.argv[4])\n";
        let status = Command::new("python3")
            .args(["-c", script])
            .arg(format!("http://127.0.0.1:{}", self.port))
            .args([bucket, key])
            .arg(to)
            .status()
            .expect("python3");
        assert!(status.success(), "boto3 download of {key}");
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `key=value` fields of a log line, in order.
pub type LogFields = Vec<(String, String)>;

/// Splits one structured log line, `COMPONENT: key=value key="quoted value" ...`, into its
/// component and fields; `Err` says what is not logfmt.
pub fn parse_log_line(line: &str) -> Result<(&str, LogFields), String> {
    let (component, rest) = line.split_once(": ").ok_or("no `component: ` prefix")?;
    let mut fields = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.next_if_eq(&' ').is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && *c != ' ') {
            key.push(c);
        }
        if key.is_empty() || chars.next() != Some('=') {
            return Err(format!("field {key:?} has no `=`"));
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => value.push(chars.next().ok_or("dangling escape")?),
                    Some(c) => value.push(c),
                    None => return Err(format!("unterminated quote in {key}")),
                }
            }
            if chars.peek().is_some_and(|c| *c != ' ') {
                return Err(format!("text right after the quoted value of {key}"));
            }
        } else {
            while let Some(c) = chars.next_if(|c| *c != ' ') {
                value.push(c);
            }
        }
        fields.push((key, value));
    }
    Ok((component, fields))
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

/// Whether the log has the event `message`, written by the agent's own logfmt lines
/// (`msg="message"`) or by a library through `tracing` (`target: message`).
pub fn logged(log: &str, message: &str) -> bool {
    log.contains(&format!("msg=\"{message}\""))
        || log
            .lines()
            .any(|l| is_tracing_line(l) && l.contains(&format!(": {message}")))
}

/// Every line the agent wrote is structured: a `tracing` event, or a known component, then
/// `level=` (info, warn or error) and `msg=` first, then key=value fields.
pub fn assert_structured_logs(log: &str) {
    for line in log
        .lines()
        .filter(|l| !l.trim().is_empty() && !is_tracing_line(l))
    {
        let (component, fields) =
            parse_log_line(line).unwrap_or_else(|e| panic!("not structured ({e}): {line}"));
        assert!(
            ["ember agent", "ember-push", "ember-export"].contains(&component),
            "unknown component: {line}"
        );
        assert!(
            fields.len() >= 2
                && fields[0].0 == "level"
                && ["info", "warn", "error"].contains(&fields[0].1.as_str())
                && fields[1].0 == "msg"
                && !fields[1].1.is_empty(),
            "no level= and msg= first: {line}"
        );
    }
}
