//! `ember server --tls-cert --tls-key` (issue 13, item 10), the real binary on loopback with a
//! certificate signed by a private CA made here with openssl:
//! - `ember push` and `ember query` (Ember's own HTTP client, ember-http) push and read back a
//!   profile over https, with bearer tokens;
//! - plain HTTP to the TLS port gets a 400 saying to use https, and `ember query` over http://
//!   fails with that message instead of hanging;
//! - a bad certificate or key stops the start with an error naming the file;
//! - bound to 0.0.0.0 without --auth-tokens the server warns loudly at start, and says what is
//!   open; on 127.0.0.1 it does not.

#[path = "../../ember-http/tests/support/certs.rs"]
mod certs;
mod server_util;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use server_util::{corpus, temp_dir};

/// A running `ember server` child and everything it wrote on stderr so far.
struct Running {
    child: Child,
    addr: String,
    log: Arc<Mutex<String>>,
    /// The start-up lines, up to and including the "listening on" banner.
    startup: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `ember server --data-dir DIR/data --listen LISTEN ARGS...` and reads its stderr up
/// to the banner.
fn start(dir: &Path, listen: &str, args: &[&str]) -> Running {
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("config.json");
    std::fs::write(&config, r#"{"retention_days": 0}"#).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["server", "--listen", listen, "--data-dir"])
        .arg(dir.join("data"))
        .arg("--config")
        .arg(&config)
        .args(args)
        .env("EMBER_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ember server");
    let mut reader = BufReader::new(child.stderr.take().expect("stderr"));
    let mut startup = String::new();
    let addr = loop {
        let mut line = String::new();
        if reader.read_line(&mut line).expect("read stderr") == 0 {
            let status = child.wait().unwrap();
            panic!("ember server exited ({status}) before listening:\n{startup}");
        }
        startup.push_str(&line);
        if let Some(rest) = line.strip_prefix("ember server: listening on ") {
            let url = rest.split(',').next().unwrap();
            break url.split_once("://").unwrap().1.to_string();
        }
    };
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            sink.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    Running {
        child,
        addr,
        log,
        startup,
    }
}

fn ember(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .expect("run ember");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn push_and_query_over_https_and_plain_http_to_the_tls_port_fails_clearly() {
    let dir = temp_dir("server-tls");
    let dir = dir.path();
    let certs = certs::make_certs(&dir.join("certs"));
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "s3cret team-tls\n").unwrap();
    let server = start(
        dir,
        "127.0.0.1:0",
        &[
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
            "--auth-tokens",
            tokens.to_str().unwrap(),
        ],
    );
    assert!(
        server.startup.contains("listening on https://"),
        "{}",
        server.startup
    );
    let url = format!(
        "https://localhost:{}",
        server.addr.rsplit(':').next().unwrap()
    );
    let ca = certs.ca.to_str().unwrap();

    let profile = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let (ok, out, err) = ember(&[
        "push",
        profile.to_str().unwrap(),
        "--service",
        "tls-app",
        "--server",
        &url,
        "--ca-file",
        ca,
        "--token",
        "s3cret",
    ]);
    assert!(ok, "push over https: {out}\n{err}");
    assert!(out.contains("pushed 1 of 1 profiles"), "{out}");

    let query = |server_url: &str, ca: Option<&str>| {
        let mut args = vec![
            "query",
            "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"tls-app\"}",
            "--from",
            "0",
            "--until",
            "now",
            "--format",
            "folded",
            "--server",
            server_url,
            "--token",
            "s3cret",
        ];
        if let Some(ca) = ca {
            args.extend(["--ca-file", ca]);
        }
        ember(&args)
    };
    let (ok, out, err) = query(&url, Some(ca));
    assert!(ok, "query over https: {err}");
    let total: i64 = out
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(_, v)| v.parse::<i64>().unwrap())
        .sum();
    let pprof = ember_pprof::read_file(&profile).unwrap();
    let cpu = ember_pprof::sample_index(&pprof, Some("cpu")).unwrap();
    assert_eq!(
        total,
        pprof.sample.iter().map(|s| s.value[cpu]).sum::<i64>()
    );

    // Without the CA the client refuses the certificate.
    let (ok, _, err) = query(&url, None);
    assert!(!ok, "a certificate from an unknown CA must be refused");
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    // Plain HTTP to the TLS port: a readable 400, then the connection closes.
    let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    s.write_all(b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .expect("closed after the answer");
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("use https://"),
        "{answer}"
    );
    let plain = format!("http://{}", server.addr);
    let (ok, _, err) = query(&plain, None);
    assert!(!ok);
    assert!(err.contains("400") && err.contains("https"), "{err}");
    let log = server.log.lock().unwrap().clone();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_bad_certificate_or_key_stops_the_start_naming_the_file() {
    let dir = temp_dir("server-tls-bad");
    let dir = dir.path();
    let certs = certs::make_certs(&dir.join("certs"));
    let data = dir.join("data");
    let run = |cert: &Path, key: &Path| {
        Command::new(env!("CARGO_BIN_EXE_ember"))
            .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .output()
            .unwrap()
    };
    // The key given as the certificate: no CERTIFICATE block.
    let out = run(&certs.server_key, &certs.server_key);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("server.key") && err.contains("CERTIFICATE"),
        "{err}"
    );
    // The CA's key with the server's certificate: they do not match.
    let out = run(&certs.server_cert, &dir.join("certs/ca.key"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a key of another certificate: {err}");
    assert!(err.contains("does not belong to the certificate"), "{err}");
    // A missing key file.
    let out = run(&certs.server_cert, &dir.join("nope.key"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("nope.key"), "{err}");
}

#[test]
fn an_open_server_on_all_interfaces_warns_at_start_and_says_what_is_open() {
    let dir = temp_dir("server-exposed");
    let dir = dir.path();
    let server = start(&dir.join("open"), "0.0.0.0:0", &[]);
    let warning = server
        .startup
        .lines()
        .find(|l| l.contains("WARN") && l.contains("UNPROTECTED"))
        .unwrap_or_else(|| panic!("no warning at start:\n{}", server.startup));
    for open in [
        "--auth-tokens",
        "any tenant",
        "/metrics",
        "/ready",
        "web UI",
    ] {
        assert!(warning.contains(open), "{open} in {warning}");
    }
    drop(server);

    // With tokens but without TLS: the tokens travel in clear.
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "t0ken team\n").unwrap();
    let server = start(
        &dir.join("tokens-only"),
        "0.0.0.0:0",
        &["--auth-tokens", tokens.to_str().unwrap()],
    );
    assert!(
        server.startup.contains("WARN") && server.startup.contains("clear text"),
        "{}",
        server.startup
    );
    assert!(
        !server.startup.contains("UNPROTECTED"),
        "{}",
        server.startup
    );
    drop(server);

    // On loopback: no warning.
    let server = start(&dir.join("loopback"), "127.0.0.1:0", &[]);
    assert!(!server.startup.contains("WARN"), "{}", server.startup);
}
