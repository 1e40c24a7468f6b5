//! Shared helpers of the `server_*` integration tests: start the real `ember server` binary
//! on a free port and speak minimal HTTP/1.1 to it over a plain socket.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `ember server` child process.
pub struct Server {
    pub child: Child,
    pub addr: String,
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
        let mut line = String::new();
        reader.read_line(&mut line).expect("read server banner");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("unexpected banner: {line:?}"))
            .to_string();
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = reader.read_to_string(&mut sink);
        });
        Server {
            child,
            addr,
            data_dir: data_dir.to_path_buf(),
        }
    }

    /// Sends a request; returns (status, body).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        http(&self.addr, method, path, headers, body)
    }

    /// GET returning (status, body as text).
    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let (s, b) = self.request("GET", path, headers, b"");
        (s, String::from_utf8_lossy(&b).into_owned())
    }

    /// GET expecting 200 and a JSON body.
    pub fn get_json(&self, path: &str, headers: &[(&str, &str)]) -> serde_json::Value {
        let (s, b) = self.get(path, headers);
        assert_eq!(s, 200, "GET {path}: {b}");
        serde_json::from_str(&b).unwrap_or_else(|e| panic!("GET {path}: {e}: {b}"))
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

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Minimal HTTP/1.1 client (Connection: close; content-length or chunked responses).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    try_http(addr, method, path, headers, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// [`http`] that reports connection errors instead of panicking.
pub fn try_http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let bad = |m: &str| std::io::Error::other(m.to_string());
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no response head"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status"))?;
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let eol = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or_else(|| bad("chunk size"))?;
            let size = std::str::from_utf8(&rest[..eol])
                .ok()
                .and_then(|t| usize::from_str_radix(t.trim(), 16).ok())
                .ok_or_else(|| bad("chunk size"))?;
            if size == 0 {
                break;
            }
            out.extend_from_slice(
                rest.get(eol + 2..eol + 2 + size)
                    .ok_or_else(|| bad("short chunk"))?,
            );
            rest = rest
                .get(eol + 4 + size..)
                .ok_or_else(|| bad("short chunk"))?;
        }
        body = out;
    }
    Ok((status, body))
}

/// Percent-encodes a query parameter value.
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Path of a corpus file.
pub fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

/// A fresh, empty temporary directory.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ember-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Encodes a push.v1.PushRequest with one series and one sample (hand-rolled protobuf).
pub fn push_request(labels: &[(&str, &str)], raw_profile: &[u8]) -> Vec<u8> {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    fn field(tag: u32, data: &[u8], out: &mut Vec<u8>) {
        varint(u64::from(tag << 3 | 2), out);
        varint(data.len() as u64, out);
        out.extend_from_slice(data);
    }
    let mut series = Vec::new();
    for (n, v) in labels {
        let mut lp = Vec::new();
        field(1, n.as_bytes(), &mut lp);
        field(2, v.as_bytes(), &mut lp);
        field(1, &lp, &mut series);
    }
    let mut sample = Vec::new();
    field(1, raw_profile, &mut sample);
    field(2, b"id-1", &mut sample);
    field(2, &sample, &mut series);
    let mut req = Vec::new();
    field(1, &series, &mut req);
    req
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
