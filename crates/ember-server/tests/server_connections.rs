//! Slow and silent clients against the real server on loopback (issue 13, item 7): 1,500
//! half-sent requests over HTTP/1.1 and HTTP/2 are all closed after the configured timeouts
//! while normal requests keep being answered, a body that stops coming is answered 408, and
//! beyond `max_connections` a new connection waits until a slot frees.

#[path = "../../ember-http/tests/support/certs.rs"]
mod certs;
mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use util::{Server, enc, temp_dir};

/// Short timeouts so the test runs in seconds: 1 s for a request head, 2 s for a body, 2 s
/// idle.
const CONFIG: &str = r#"{"retention_days": 0, "header_read_timeout_seconds": 1,
    "body_read_timeout_seconds": 2, "idle_timeout_seconds": 2}"#;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 frame: 24-bit length, type, flags, stream id.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The HPACK block of a gRPC-style `POST /push.v1.PusherService/Push` (static table entries
/// and literals without Huffman coding, so no encoder is needed).
fn h2_push_headers() -> Vec<u8> {
    let literal = |index_byte: &[u8], value: &str| {
        let mut v = index_byte.to_vec();
        v.push(value.len() as u8);
        v.extend_from_slice(value.as_bytes());
        v
    };
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.extend(literal(&[0x04], "/push.v1.PusherService/Push")); // :path
    block.extend(literal(&[0x01], "localhost")); // :authority
    block.extend(literal(&[0x0f, 0x10], "application/proto")); // content-type (index 31)
    block
}

/// The ways a client can hold a connection without finishing its request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stall {
    /// Connects and sends nothing.
    Silent,
    /// HTTP/1.1: half of a request head.
    PartialHead,
    /// HTTP/1.1: a whole head announcing 1,000 bytes of body, then 10 of them.
    PartialBody,
    /// HTTP/2: half of the connection preface.
    PartialPreface,
    /// HTTP/2: preface, settings and a request's HEADERS, then no DATA.
    H2NoBody,
}

impl Stall {
    const ALL: [Stall; 5] = [
        Stall::Silent,
        Stall::PartialHead,
        Stall::PartialBody,
        Stall::PartialPreface,
        Stall::H2NoBody,
    ];

    fn open(self, addr: &str) -> TcpStream {
        let mut s = TcpStream::connect(addr).expect("connect");
        let bytes: Vec<u8> = match self {
            Stall::Silent => Vec::new(),
            Stall::PartialHead => {
                b"POST /ingest?name=slow.cpu HTTP/1.1\r\nHost: x\r\nUser-Ag".to_vec()
            }
            Stall::PartialBody => b"POST /ingest?name=slow.cpu HTTP/1.1\r\nHost: x\r\n\
                Content-Length: 1000\r\n\r\nmain;work "
                .to_vec(),
            Stall::PartialPreface => H2_PREFACE[..10].to_vec(),
            Stall::H2NoBody => [
                H2_PREFACE.to_vec(),
                h2_frame(4, 0, 0, &[]),                  // SETTINGS
                h2_frame(1, 0x4, 1, &h2_push_headers()), // HEADERS, END_HEADERS, no END_STREAM
            ]
            .concat(),
        };
        s.write_all(&bytes).expect("send the partial request");
        s
    }

    /// Latest time after it was opened by which the server must have closed the connection:
    /// the timeout that applies, plus the close grace (2 s) for the kinds that need it, plus
    /// slack for a loaded 2-core machine.
    fn closed_within(self) -> Duration {
        Duration::from_secs_f64(match self {
            Stall::Silent | Stall::PartialPreface | Stall::PartialHead => 1.0 + 2.0 + 3.0,
            Stall::PartialBody => 2.0 + 3.0,
            // The stream's body timeout, then idle, then GOAWAY's grace.
            Stall::H2NoBody => 2.0 + 2.0 + 2.0 + 3.0,
        })
    }

    /// Earliest: the timeout itself.
    fn not_closed_before(self) -> Duration {
        Duration::from_secs_f64(match self {
            Stall::Silent | Stall::PartialPreface | Stall::PartialHead => 0.9,
            Stall::PartialBody | Stall::H2NoBody => 1.9,
        })
    }
}

/// Reads until the server closes the connection (end of stream or reset); `None` if it is
/// still open after `wait`. Returns what was received.
fn read_until_closed(s: &mut TcpStream, wait: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                return Some(got);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None;
            }
            Err(e) => panic!("reading: {e}"),
        }
    }
}

fn metric(text: &str, line_start: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line_start} in /metrics:\n{text}"))
}

#[test]
fn fifteen_hundred_half_sent_requests_are_closed_after_the_timeouts_while_others_are_served() {
    let dir = temp_dir("slowloris");
    let dir = dir.path();
    let config = dir.join("config.json");
    std::fs::write(&config, CONFIG).unwrap();
    let server = Server::start(&dir.join("data"), &["--config", config.to_str().unwrap()]);

    // First one of each kind alone, timed precisely: not closed before its timeout.
    for stall in Stall::ALL {
        let opened = Instant::now();
        let mut s = stall.open(&server.addr);
        let got = read_until_closed(&mut s, stall.closed_within())
            .unwrap_or_else(|| panic!("{stall:?}: still open after {:?}", stall.closed_within()));
        let took = opened.elapsed();
        eprintln!("{stall:?}: closed after {took:?}");
        assert!(
            took >= stall.not_closed_before(),
            "{stall:?}: closed after {took:?}, before its timeout"
        );
        if stall == Stall::PartialBody {
            let text = String::from_utf8_lossy(&got);
            assert!(
                text.starts_with("HTTP/1.1 408") && text.contains("deadline_exceeded"),
                "a stalled body is answered 408: {text}"
            );
        }
    }

    // Then 300 of each kind at once: 1,500 connections holding half-sent requests.
    let started = Instant::now();
    let mut held: Vec<(Stall, TcpStream)> = Vec::new();
    for _ in 0..300 {
        for stall in Stall::ALL {
            held.push((stall, stall.open(&server.addr)));
        }
    }
    let opened_all = started.elapsed();

    // Meanwhile normal requests are answered: a push whose body comes in three pieces (well
    // within the body timeout), a query, /ready.
    let mut s = TcpStream::connect(&server.addr).unwrap();
    let body = "main;work;compute 70\nmain;idle 30\n";
    write!(
        s,
        "POST /ingest?name=steady.cpu&from=1700000000&until=1700000010 HTTP/1.1\r\nHost: x\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    for piece in [&body[..10], &body[10..20], &body[20..]] {
        std::thread::sleep(Duration::from_millis(300));
        s.write_all(piece.as_bytes()).unwrap();
    }
    let answer = read_until_closed(&mut s, Duration::from_secs(20)).expect("answered");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "slow but steady push: {answer}"
    );
    let (status, _) = server.get("/ready", &[]);
    assert_eq!(status, 200);
    let (status, text) = server.get(
        &format!(
            "/api/v1/query?query={}&from=1700000000&until=1700000020&format=folded",
            enc("steady.cpu{}")
        ),
        &[],
    );
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("main;work;compute 70"), "{text}");

    // Every held connection is closed by the server in time (read in order: the later ones
    // are long closed by the time they are read, so each check is an upper bound).
    for (i, (stall, mut s)) in held.into_iter().enumerate() {
        let bound = stall.closed_within() + opened_all;
        let left = bound.saturating_sub(started.elapsed()) + Duration::from_millis(100);
        if read_until_closed(&mut s, left).is_none() {
            panic!(
                "connection {i} ({stall:?}) still open {:?} after the 1,500 were opened",
                started.elapsed()
            );
        }
    }

    eprintln!(
        "1,500 connections opened in {opened_all:?}, all closed {:?} after the first",
        started.elapsed()
    );
    let (status, text) = server.get("/metrics", &[]);
    assert_eq!(status, 200);
    let closed_by = |reason: &str| {
        metric(
            &text,
            &format!("ember_connections_closed_total{{reason=\"{reason}\"}} "),
        )
    };
    // Silent, partial head and partial preface: 301 of each.
    assert!(closed_by("header_timeout") >= 903.0, "{text}");
    // The HTTP/2 connections, once their stream timed out.
    assert!(closed_by("idle_timeout") >= 301.0, "{text}");
    // Both body kinds: 301 over HTTP/1.1, 301 over HTTP/2.
    assert!(
        metric(&text, "ember_request_body_timeouts_total ") >= 602.0,
        "{text}"
    );
    assert_eq!(metric(&text, "ember_connections_open "), 1.0, "{text}");
    server.terminate();
}

#[test]
fn beyond_max_connections_a_new_connection_waits_for_a_free_slot() {
    let dir = temp_dir("conncap");
    let dir = dir.path();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"retention_days": 0, "max_connections": 4, "header_read_timeout_seconds": 2}"#,
    )
    .unwrap();
    let server = Server::start(&dir.join("data"), &["--config", config.to_str().unwrap()]);
    let opened = Instant::now();
    let silent: Vec<TcpStream> = (0..4).map(|_| Stall::Silent.open(&server.addr)).collect();
    // The fifth waits until the header timeout frees the first slots, then is answered.
    let (status, _) = server.get("/ready", &[]);
    let waited = opened.elapsed();
    assert_eq!(status, 200);
    assert!(
        waited >= Duration::from_millis(1800),
        "answered after {waited:?}: the cap of 4 did not hold it back"
    );
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    drop(silent);
    let (_, text) = server.get("/metrics", &[]);
    assert!(
        metric(&text, "ember_connection_cap_waits_total ") >= 1.0,
        "{text}"
    );
    server.terminate();
}

#[test]
fn bad_connection_settings_are_refused_at_start() {
    let dir = temp_dir("badconn");
    let dir = dir.path();
    let limits: ember_server::Limits =
        serde_json::from_str(r#"{"body_read_timeout_seconds": -1}"#).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = runtime
        .block_on(ember_server::Server::bind(ember_server::Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.join("data"),
            limits,
            tokens: None,
            tls: None,
            metrics_auth: false,
        }))
        .expect_err("a negative timeout is refused");
    assert!(
        err.to_string().contains("body_read_timeout_seconds"),
        "{err}"
    );
}

#[test]
fn shutdown_does_not_wait_for_idle_or_silent_connections() {
    let dir = temp_dir("conn-shutdown");
    let dir = dir.path();
    // The default timeouts (10 s head, 60 s idle): shutdown must not wait for them.
    let server = Server::start(&dir.join("data"), &[]);
    let silent = Stall::Silent.open(&server.addr);
    // HTTP/2: one complete GET, answered, then the connection idles (and never answers the
    // server's PING or GOAWAY).
    let mut h2 = TcpStream::connect(&server.addr).unwrap();
    let mut block = vec![0x82, 0x86, 0x04, 6];
    block.extend_from_slice(b"/ready");
    block.extend_from_slice(&[0x01, 9]);
    block.extend_from_slice(b"localhost");
    let request = [
        H2_PREFACE.to_vec(),
        h2_frame(4, 0, 0, &[]),
        h2_frame(1, 0x5, 1, &block), // END_STREAM | END_HEADERS
    ]
    .concat();
    h2.write_all(&request).unwrap();
    // HTTP/1.1 keep-alive: one answered request, then idle.
    let mut h1 = TcpStream::connect(&server.addr).unwrap();
    h1.write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    h1.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let n = h1.read(&mut buf).unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    h2.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(
        h2.read(&mut buf).unwrap() > 0,
        "the HTTP/2 request is answered"
    );
    std::thread::sleep(Duration::from_millis(200));

    let stopping = Instant::now();
    server.terminate();
    let took = stopping.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "shutdown waited {took:?} for idle connections"
    );
    drop((silent, h1, h2));
}

#[test]
fn shutdown_does_not_wait_for_a_tls_handshake_in_progress() {
    let dir = temp_dir("conn-shutdown-tls");
    let dir = dir.path();
    let certs = certs::make_certs(&dir.join("certs"));
    let config = dir.join("config.json");
    // A long header timeout, so only the shutdown itself can end the handshake soon.
    std::fs::write(
        &config,
        r#"{"retention_days": 0, "header_read_timeout_seconds": 30}"#,
    )
    .unwrap();
    let server = Server::start(
        &dir.join("data"),
        &[
            "--config",
            config.to_str().unwrap(),
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
        ],
    );
    // The first byte of a TLS record, then nothing: the handshake waits for the rest.
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.write_all(&[0x16]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let stopping = Instant::now();
    server.terminate();
    let took = stopping.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "shutdown waited {took:?} for a stalled TLS handshake"
    );
    assert!(
        read_until_closed(&mut s, Duration::from_secs(5)).is_some(),
        "the stalled handshake's connection is closed"
    );
}
