//! Shared helpers of the SDK's tests: CPU burners in known functions, profile inspection,
//! a minimal HTTP/1.1 client over a real socket.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ember_pprof::Profile;

/// A CPU-bound loop in a function of known name.
#[inline(never)]
pub fn burn_hot(iters: u64) -> u64 {
    let mut x = std::hint::black_box(1u64);
    for i in 0..iters {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        x ^= x >> 17;
    }
    std::hint::black_box(x)
}

/// The same loop under another name, run a tenth as long.
#[inline(never)]
pub fn burn_cold(iters: u64) -> u64 {
    let mut x = std::hint::black_box(3u64);
    for i in 0..iters {
        x = x.wrapping_mul(2862933555777941757).wrapping_add(i);
        x ^= x >> 13;
    }
    std::hint::black_box(x)
}

/// Calls [`burn_hot`] and [`burn_cold`] (10:1) until `until`.
#[inline(never)]
pub fn burn_outer(until: Instant) -> u64 {
    let mut acc = 0;
    while Instant::now() < until {
        acc ^= burn_hot(200_000);
        acc ^= burn_cold(20_000);
    }
    std::hint::black_box(acc)
}

/// CPU time used by the calling thread.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec for the calling thread's CPU clock.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Name of the real (not inlined) function of a location: its last line's function.
pub fn function_of(p: &Profile, location_id: u64) -> String {
    let Some(loc) = p.location.iter().find(|l| l.id == location_id) else {
        return String::new();
    };
    let Some(line) = loc.line.last() else {
        return format!("0x{:x}", loc.address);
    };
    let f = p
        .function
        .iter()
        .find(|f| f.id == line.function_id)
        .unwrap();
    p.string_table[f.name as usize].clone()
}

/// Every function name of a location, innermost first.
pub fn names_of(p: &Profile, location_id: u64) -> Vec<String> {
    let Some(loc) = p.location.iter().find(|l| l.id == location_id) else {
        return Vec::new();
    };
    loc.line
        .iter()
        .map(|line| {
            let f = p
                .function
                .iter()
                .find(|f| f.id == line.function_id)
                .unwrap();
            p.string_table[f.name as usize].clone()
        })
        .collect()
}

/// Value `index` summed per leaf function.
pub fn self_by_function(p: &Profile, index: usize) -> Vec<(String, i64)> {
    let mut sums: HashMap<String, i64> = HashMap::new();
    for s in &p.sample {
        let name = s
            .location_id
            .first()
            .map(|&l| function_of(p, l))
            .unwrap_or_default();
        *sums.entry(name).or_default() += s.value[index];
    }
    let mut v: Vec<_> = sums.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// A sample's string labels.
pub fn labels_of(p: &Profile, s: &ember_pprof::Sample) -> HashMap<String, String> {
    s.label
        .iter()
        .map(|l| {
            (
                p.string_table[l.key as usize].clone(),
                p.string_table[l.str as usize].clone(),
            )
        })
        .collect()
}

/// Whether any frame (inlined ones included) of the sample's stack is named like `needle`.
pub fn stack_has(p: &Profile, s: &ember_pprof::Sample, needle: &str) -> bool {
    s.location_id
        .iter()
        .any(|&l| names_of(p, l).iter().any(|n| n.contains(needle)))
}

/// `GET path` over a fresh connection; (status, body).
pub fn http_get(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (status, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&b[..eol]).unwrap().trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + n]);
        b = &b[eol + 2 + n + 2..];
    }
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
pub fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-sdk-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// `go tool pprof -top FILE` when Go is installed: Some(stdout), panics on failure.
pub fn go_pprof_top(file: &std::path::Path) -> Option<String> {
    let go = ["/usr/lib/go-1.19/bin/go", "/usr/local/go/bin/go"]
        .into_iter()
        .find(|g| std::path::Path::new(g).exists())?;
    let home = temp_dir("gohome");
    let home = home.path();
    let out = std::process::Command::new(go)
        .args(["tool", "pprof", "-top"])
        .arg(file)
        .env("HOME", home)
        .env("GOCACHE", home.join("cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// An allocation-heavy workload with real work between allocations (formatting, hashing,
/// sorting, joining): CPU time per round, best of `tries`, in nanoseconds.
pub fn allocation_heavy_round_ns(rounds: u32, tries: u32) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..tries {
        let t0 = thread_cpu();
        for r in 0..rounds {
            let words: Vec<String> = (0..200).map(|i| format!("key-{r}-{i}")).collect();
            let mut map: HashMap<String, Vec<u32>> = HashMap::new();
            for (i, w) in words.iter().enumerate() {
                map.entry(w[..w.len().min(7)].to_string())
                    .or_default()
                    .push(i as u32);
            }
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let joined = keys
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(",");
            std::hint::black_box((joined, words));
        }
        best = best.min(thread_cpu() - t0);
    }
    best.as_nanos() as f64 / f64::from(rounds)
}

/// Starts an Ember server in this process on 127.0.0.1:0 (its own runtime and thread);
/// returns its address.
pub fn start_server(data_dir: &std::path::Path) -> String {
    let config = ember_server::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: data_dir.to_path_buf(),
        limits: serde_json::from_str(r#"{"retention_days": 0}"#).unwrap(),
        tokens: None,
        tls: None,
        metrics_auth: false,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let server = ember_server::Server::bind(config).await.unwrap();
            tx.send(server.local_addr().unwrap().to_string()).unwrap();
            server.run(std::future::pending::<()>()).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// Percent-encodes everything but unreserved characters.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The folded stacks of `profile_type{selector}` over the last hour (empty while none match).
pub fn query_folded(server: &str, profile_type_and_selector: &str) -> String {
    let q = url_encode(profile_type_and_selector);
    let (status, body) = http_get(
        server,
        &format!("/api/v1/query?query={q}&format=folded&from=now-1h&until=now"),
    );
    if status == 404 {
        return String::new();
    }
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    String::from_utf8_lossy(&body).into_owned()
}
