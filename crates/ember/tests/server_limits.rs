//! `ember server` against requests built to eat its memory and CPU: many small gzip bombs in
//! one request, over every ingest protocol. Run on the real binary so the memory measured
//! is the server process's own (`VmHWM`, its peak resident set) and `/ready` is timed over
//! real sockets while the hostile requests are being decoded.
//!
//! Before the per-request decompression limit and the ingest threads, one 4 MB push of 64
//! bombs took the server to 4.4 GB and stalled `/ready` for seconds.

mod server_util;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use server_util::{Server, corpus, enc, push_request, temp_dir, try_http};

/// Peak resident memory any hostile request may take the server to.
const PEAK_LIMIT_KB: u64 = 400 << 10;
/// Slowest answer of `/ready` while the hostile requests run.
const READY_LIMIT: Duration = Duration::from_millis(200);
/// The watchdog kills the server past this (the old code went to 4.4 GB per request; the
/// test machine is shared).
const KILL_KB: u64 = 1 << 20;
/// Hostile requests at once: more than the cores, so every thread the server has for
/// them is busy.
const CLIENTS: usize = 4;
/// Hostile requests each client sends, one after the other.
const ROUNDS: usize = 2;

/// A gzip member of `mib` MiB of zeros (~1,000:1): under the per-profile limit of 64 MiB.
fn bomb(mib: usize) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..mib {
        gz.write_all(&zeros).unwrap();
    }
    gz.finish().unwrap()
}

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

/// A `push.v1.PushRequest` of one series with `count` samples, each `raw` as its profile.
fn push_of(raw: &[u8], count: usize) -> Vec<u8> {
    let mut series = Vec::new();
    let mut label = Vec::new();
    field(1, b"service_name", &mut label);
    field(2, b"bombs", &mut label);
    field(1, &label, &mut series);
    for _ in 0..count {
        let mut sample = Vec::new();
        field(1, raw, &mut sample);
        field(2, &sample, &mut series);
    }
    let mut request = Vec::new();
    field(1, &series, &mut request);
    request
}

/// `VmRSS` and `VmHWM` of `pid`, KiB (0 once it is gone).
fn memory_kb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let get = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    };
    (get("VmRSS:"), get("VmHWM:"))
}

/// Sends a hostile request once to the server at the address; `Ok((status, body or the
/// gRPC response head))`.
type Sender = Box<dyn Fn(&str) -> std::io::Result<(u16, String)> + Send + Sync>;

/// One hostile request: how to send it and what the server must answer.
struct Attack {
    name: &'static str,
    send: Sender,
    /// Whether an answer is the refusal this request deserves.
    refused: fn(u16, &str) -> bool,
}

/// What one attack did to a fresh server.
struct Outcome {
    peak_kb: u64,
    baseline_kb: u64,
    slowest_ready: Duration,
    ready_checks: usize,
    answers: Vec<(u16, String)>,
    killed: bool,
    seconds: f64,
}

/// Starts a fresh server, sends `CLIENTS` x `ROUNDS` of the attack while timing `/ready`
/// and watching the memory, then checks nothing of the attack was stored.
fn run(attack: &Attack) -> Outcome {
    let dir = temp_dir(&format!("limits-{}", attack.name));
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let addr = server.addr.clone();
    let pid = server.child.id();
    // A normal push first, so the baseline includes a warmed-up ingest path.
    let normal =
        std::fs::read(corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz")).unwrap();
    let (s, b) = server.push(&push_request(&[("service_name", "normal")], &normal));
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let baseline_kb = memory_kb(pid).1;

    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let (done, killed) = (done.clone(), killed.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                if memory_kb(pid).0 > KILL_KB {
                    killed.store(true, Ordering::SeqCst);
                    let _ = std::process::Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status();
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let slowest_ready = Arc::new(AtomicU64::new(0));
    let ready_checks = Arc::new(AtomicU64::new(0));
    let prober = {
        let (done, slowest, checks, addr) = (
            done.clone(),
            slowest_ready.clone(),
            ready_checks.clone(),
            addr.clone(),
        );
        std::thread::spawn(move || {
            // Give the hostile requests a moment to arrive and start decoding.
            std::thread::sleep(Duration::from_millis(20));
            while !done.load(Ordering::SeqCst) {
                let started = Instant::now();
                let answer = try_http(&addr, "GET", "/ready", &[], b"");
                let took = started.elapsed();
                if matches!(answer, Ok((200, _))) {
                    slowest.fetch_max(took.as_micros() as u64, Ordering::SeqCst);
                    checks.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let started = Instant::now();
    let answers: Vec<(u16, String)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                scope.spawn(|| {
                    (0..ROUNDS)
                        .map(|_| {
                            (attack.send)(&addr).unwrap_or_else(|e| (0, format!("no answer: {e}")))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect()
    });
    let seconds = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    watchdog.join().unwrap();
    prober.join().unwrap();
    let killed = killed.load(Ordering::SeqCst);
    let peak_kb = if killed { KILL_KB } else { memory_kb(pid).1 };
    if !killed {
        // Nothing of a refused request is stored; the server still takes normal pushes.
        let (s, body) = server.get(
            &format!(
                "/api/v1/series?query={}&from=0",
                enc("{service_name=\"bombs\"}")
            ),
            &[],
        );
        assert_eq!(s, 200, "{body}");
        assert!(
            !body.contains("bombs"),
            "a refused request left series: {body}"
        );
        let (s, b) = server.push(&push_request(&[("service_name", "after")], &normal));
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    }
    Outcome {
        peak_kb,
        baseline_kb,
        slowest_ready: Duration::from_micros(slowest_ready.load(Ordering::SeqCst)),
        ready_checks: ready_checks.load(Ordering::SeqCst) as usize,
        answers,
        killed,
        seconds,
    }
}

/// One attack at a time: three hostile loads at once on a small machine would time the
/// machine's CPU, not the server's `/ready`.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check(attack: Attack) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let o = run(&attack);
    println!(
        "{}: peak {} MiB (baseline {} MiB), slowest /ready {:?} over {} checks, {:.2} s for {} requests",
        attack.name,
        o.peak_kb >> 10,
        o.baseline_kb >> 10,
        o.slowest_ready,
        o.ready_checks,
        o.seconds,
        CLIENTS * ROUNDS
    );
    assert!(
        !o.killed,
        "{}: the server passed {} MiB and was killed",
        attack.name,
        KILL_KB >> 10
    );
    assert!(
        o.peak_kb < PEAK_LIMIT_KB,
        "{}: peak resident memory {} MiB, limit {} MiB",
        attack.name,
        o.peak_kb >> 10,
        PEAK_LIMIT_KB >> 10
    );
    assert!(o.ready_checks > 0, "{}: /ready never answered", attack.name);
    assert!(
        o.slowest_ready < READY_LIMIT,
        "{}: /ready took {:?} while the hostile requests ran",
        attack.name,
        o.slowest_ready
    );
    for (status, body) in &o.answers {
        assert!(
            (attack.refused)(*status, body),
            "{}: unexpected answer {status} {body}",
            attack.name
        );
    }
}

/// The push of 64 bombs of 63 MiB (4 MB on the wire, 4 GB decompressed).
fn hostile_push() -> Arc<Vec<u8>> {
    Arc::new(push_of(&bomb(63), 64))
}

#[test]
fn a_push_of_many_gzip_bombs_is_refused_within_bounded_memory_and_ready_keeps_answering() {
    let request = hostile_push();
    assert!(request.len() < 5 << 20, "{} bytes", request.len());
    check(Attack {
        name: "push",
        send: Box::new(move |addr| {
            let headers = [("Content-Type", "application/proto")];
            let path = "/push.v1.PusherService/Push";
            try_http(addr, "POST", path, &headers, &request)
                .map(|(s, b)| (s, String::from_utf8_lossy(&b).into_owned()))
        }),
        refused: |status, body| {
            status == 413
                && body.contains("max_request_decompressed_bytes")
                && body.contains("nothing was stored")
        },
    });
}

#[test]
fn a_grpc_push_of_many_gzip_bombs_is_refused_within_bounded_memory() {
    // gRPC needs HTTP/2 with prior knowledge: curl speaks it (nghttp2).
    let request = hostile_push();
    let dir = temp_dir("limits-grpc-body");
    let dir = dir.path();
    let framed = dir.join("framed.bin");
    let mut body = vec![0u8];
    body.extend_from_slice(&(request.len() as u32).to_be_bytes());
    body.extend_from_slice(&request);
    std::fs::write(&framed, body).unwrap();
    check(Attack {
        name: "grpc",
        send: Box::new(move |addr| {
            let out = std::process::Command::new("curl")
                .args([
                    "-sS",
                    "--http2-prior-knowledge",
                    "-D",
                    "-",
                    "-o",
                    "/dev/null",
                ])
                .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
                .arg("--data-binary")
                .arg(format!("@{}", framed.display()))
                .arg(format!("http://{addr}/push.v1.PusherService/Push"))
                .output()?;
            let head = String::from_utf8_lossy(&out.stdout).into_owned();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            Ok((status, head))
        }),
        refused: |status, head| {
            status == 200
                && head.contains("grpc-status: 8")
                && head.contains("max_request_decompressed_bytes")
        },
    });
}

#[test]
fn a_pyroscope_multipart_bomb_stays_within_bounded_memory() {
    // One profile of 63 MiB of zeros, with a sample_type_config so the server decodes it
    // itself; in a gzip'd body.
    let boundary = "ember-limits-boundary";
    let mut multipart = Vec::new();
    let part = |name: &str, data: &[u8], out: &mut Vec<u8>| {
        out.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    };
    part("profile", &bomb(63), &mut multipart);
    part(
        "sample_type_config",
        br#"{"cpu": {"units": "samples"}}"#,
        &mut multipart,
    );
    multipart.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&multipart).unwrap();
    let body = Arc::new(gz.finish().unwrap());
    let content_type = format!("multipart/form-data; boundary={boundary}");
    check(Attack {
        name: "ingest-multipart",
        send: Box::new(move |addr| {
            let headers = [
                ("Content-Type", content_type.as_str()),
                ("Content-Encoding", "gzip"),
            ];
            let path = "/ingest?name=bombs.cpu&format=pprof&from=1700000000";
            try_http(addr, "POST", path, &headers, &body)
                .map(|(s, b)| (s, String::from_utf8_lossy(&b).into_owned()))
        }),
        // Zeros are not a profile: refused as such once decompressed.
        refused: |status, body| status == 400 && body.contains("invalid pprof"),
    });
}

/// A profile of `mib` MiB that is nothing but empty strings: valid pprof, 2 bytes per
/// string-table entry, 16 bytes per entry once decoded.
fn empty_strings_profile(mib: usize) -> Vec<u8> {
    let mut raw = Vec::new();
    for s in [&b""[..], b"cpu", b"nanoseconds"] {
        field(6, s, &mut raw);
    }
    field(1, &[0x08, 0x01, 0x10, 0x02], &mut raw);
    while raw.len() + 2 <= mib << 20 {
        raw.extend_from_slice(&[0x32, 0x00]);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&raw).unwrap();
    gz.finish().unwrap()
}

/// Decoding multiplies a profile's size (the ingest view keeps 16 bytes per string-table
/// entry, 48 per sample), so a request within every decompression limit (here two profiles
/// of 60 MiB of empty strings, 120 KB on the wire) took the server past 1.2 GB while it
/// was decoded. The batch's decoded tables are bounded now (twice the batch's
/// decompression limit): refused with 413, well under that.
#[test]
fn decoding_amplification_peak() {
    let profile = empty_strings_profile(60);
    let mut series = Vec::new();
    let mut label = Vec::new();
    field(1, b"service_name", &mut label);
    field(2, b"crafted", &mut label);
    field(1, &label, &mut series);
    for _ in 0..2 {
        let mut sample = Vec::new();
        field(1, &profile, &mut sample);
        field(2, &sample, &mut series);
    }
    let mut request = Vec::new();
    field(1, &series, &mut request);
    let dir = temp_dir("limits-amplification");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let started = Instant::now();
    let (status, body) = server.push(&request);
    let body = String::from_utf8_lossy(&body);
    let peak_mib = memory_kb(server.child.id()).1 >> 10;
    println!(
        "{} bytes on the wire: {status} {body} after {:?}; peak {peak_mib} MiB",
        request.len(),
        started.elapsed(),
    );
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("decoded"), "{body}");
    // 120 MiB decompressed, tables of at most 2 x 128 + 16 MiB by their elements and twice
    // that allocated (a table grows by doubling), the server itself: was 1,216 MiB.
    assert!(peak_mib < 720, "peak {peak_mib} MiB");
}
