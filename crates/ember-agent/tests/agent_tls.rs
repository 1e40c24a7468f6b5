//! The agent (in-process) pushing over `https://` (rustls, ring provider) to a real server behind
//! a local TLS endpoint (Python's ssl module terminating TLS in front of it) whose
//! certificate is signed by a private CA made with `openssl` here:
//! - with `exporters.server.tls.ca_file` naming that CA, profiles arrive;
//! - with the system roots only, every push fails on the certificate and nothing arrives;
//! - a CA file that does not exist is a configuration error naming the field.

#[path = "../../ember-http/tests/support/certs.rs"]
mod certs;
mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{
    RunningAgent, Server, Workload, events, host_perf_allowed, metric, temp_dir, wait_for,
};

const TLS_PROXY: &str = r#"
import socket, ssl, sys, threading
cert, key, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(listener.getsockname()[1], flush=True)

def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

def handle(conn):
    try:
        tls = ctx.wrap_socket(conn, server_side=True)
    except (OSError, ssl.SSLError) as e:
        print("handshake failed:", e, file=sys.stderr, flush=True)
        conn.close()
        return
    up = socket.create_connection(("127.0.0.1", upstream))
    threading.Thread(target=pipe, args=(up, tls), daemon=True).start()
    pipe(tls, up)

while True:
    conn, _ = listener.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
"#;

/// The Python TLS terminator in front of the server.
struct Proxy {
    child: Child,
    port: u16,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the TLS terminator with the certificate `certs::make_certs` wrote into `dir`.
fn tls_proxy(dir: &Path, upstream_port: u16) -> Proxy {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(TLS_PROXY)
        .arg(dir.join("server.pem"))
        .arg(dir.join("server.key"))
        .arg(upstream_port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("proxy port: {line:?}"));
    Proxy { child, port }
}

/// An agent configuration pushing the workload's profiles to `url` with `tls` options.
fn agent_config(url: &str, tls: &str) -> String {
    format!(
        "admin: {{listen: 127.0.0.1:0}}\n\
         profiling:\n  upload_interval: 1s\n  targets: {{all: false, comm: three_paths}}\n\
         exporters:\n  server: {{url: '{url}', min_backoff: 200ms, max_backoff: 500ms{tls}}}\n"
    )
}

#[test]
fn pushes_over_https_with_a_private_ca() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-tls");
    let dir = dir.path();
    certs::make_certs(dir);
    let server = Server::start(&dir.join("data"), &[]);
    let upstream: u16 = server.addr.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = tls_proxy(dir, upstream);
    let url = format!("https://localhost:{}", proxy.port);

    // A CA file that does not exist: rejected with the field path, the agent does not start.
    let missing = agent_config(&url, ", tls: {ca_file: /nonexistent/ca.pem}");
    let err = RunningAgent::try_start(&missing)
        .err()
        .expect("an agent with a missing CA file");
    assert!(err.contains("exporters.server.tls.ca_file"), "{err}");

    let _workload = Workload::start(dir);
    let trusted = RunningAgent::start(&agent_config(
        &url,
        &format!(", tls: {{ca_file: '{}'}}", dir.join("ca.pem").display()),
    ));
    let untrusted = RunningAgent::start(&agent_config(&url, ""));

    assert!(
        wait_for(Duration::from_secs(30), || {
            metric(&trusted.metrics(), "ember_agent_push_sent_profiles_total").unwrap_or(0.0) >= 2.0
        }),
        "nothing sent over https: {}\n{}",
        trusted.metrics(),
        trusted.log()
    );
    let (_, services) = server.get("/api/v1/label/service_name/values", &[]);
    assert!(services.contains("three_paths"), "{services}");
    assert_eq!(
        metric(&trusted.metrics(), "ember_agent_push_errors_total"),
        Some(0.0)
    );

    // The same endpoint without the CA: the handshake fails on the certificate.
    assert!(
        wait_for(Duration::from_secs(20), || {
            metric(&untrusted.metrics(), "ember_agent_push_errors_total").unwrap_or(0.0) >= 2.0
        }),
        "{}",
        untrusted.metrics()
    );
    let m = untrusted.metrics();
    assert_eq!(
        metric(&m, "ember_agent_push_sent_profiles_total"),
        Some(0.0),
        "{m}"
    );
    // The refusal is logged by the push client through `tracing`, naming the certificate (the
    // trusted agent pushes to the same URL without errors: these are the untrusted one's).
    let refusals: Vec<String> = events("push failed")
        .iter()
        .filter(|e| e.field("url").is_some_and(|u| u.starts_with(&url)))
        .map(|e| e.field("error").unwrap_or_default().to_string())
        .collect();
    assert!(
        refusals
            .iter()
            .any(|e| e.contains("TLS") && e.to_ascii_lowercase().contains("certificate")),
        "{refusals:?}\n{}",
        untrusted.log()
    );
    assert!(trusted.terminate().flushed);
}
