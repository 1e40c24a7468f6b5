//! Programs the agent's tests profile, scrape and export to: a Go program serving
//! net/http/pprof (built here with Go 1.19) and a `moto_server` standing in for S3.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::wait_for;

/// The Go toolchain: `$EMBER_GO`, else the Debian/Ubuntu golang-1.19 package's.
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

/// A `moto_server` (S3) child on 127.0.0.1:port.
pub struct Moto {
    child: Option<Child>,
    pub port: u16,
}

impl Moto {
    /// Starts `moto_server` on `port` and waits until it answers.
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
                super::wire::try_http(&addr, "GET", "/", &[], b"").is_ok()
            }),
            "moto_server did not come up on {addr}"
        );
        Moto {
            child: Some(child),
            port,
        }
    }

    /// Creates `bucket` (moto keeps nothing across restarts).
    pub fn create_bucket(&self, bucket: &str) {
        let addr = format!("127.0.0.1:{}", self.port);
        let (s, b) = super::wire::http(&addr, "PUT", &format!("/{bucket}"), &[], b"");
        assert_eq!(s, 200, "create bucket: {}", String::from_utf8_lossy(&b));
    }

    /// Object keys of `bucket` (ListObjectsV2; a few hundred keys at most in these tests).
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let addr = format!("127.0.0.1:{}", self.port);
        let (s, b) = super::wire::http(&addr, "GET", &format!("/{bucket}?list-type=2"), &[], b"");
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

    /// Kills the server: the bucket is unreachable until a new [`Moto::start`].
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
