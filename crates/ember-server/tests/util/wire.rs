//! Wire helpers shared by the server's end-to-end tests (in-process ones in
//! `crates/ember-server/tests`, and the process-level ones in `crates/ember/tests`, which
//! include this file): minimal HTTP/1.1 over a plain socket, URL encoding, corpus paths,
//! temporary directories and a hand-rolled `PushRequest` encoder (independent of the
//! server's own prost types, so a wrong field number there would fail the tests).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A running server's address and the requests the tests send it. The in-process server
/// (`crates/ember-server/tests/util`) and the `ember server` child process
/// (`crates/ember/tests/server_util`) both dereference to one.
pub struct Endpoint {
    /// `host:port`.
    pub addr: String,
}

impl Endpoint {
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

    /// POSTs a binary `push.v1` request (see [`push_request`]); returns (status, body).
    pub fn push(&self, request: &[u8]) -> (u16, Vec<u8>) {
        let proto = [("Content-Type", "application/proto")];
        self.request("POST", "/push.v1.PusherService/Push", &proto, request)
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

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
pub fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-{name}-"))
        .tempdir()
        .expect("temp dir")
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
