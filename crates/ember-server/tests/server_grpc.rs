//! A real gRPC client against the server (run in-process): Python `grpcio` (installed by `.ci/setup` with
//! `grpcio-tools`) generates stubs from the `push.v1` subset of Pyroscope's push.proto, pushes
//! a corpus Go CPU profile plainly and gzip-compressed over cleartext HTTP/2, and sends a
//! broken profile; the test then queries the pushed profile back over HTTP/1.1. The same
//! client pushes over TLS too (HTTP/2 chosen by ALPN), to a server started with a certificate.

#[path = "../../ember-http/tests/support/certs.rs"]
mod certs;
mod util;

use std::process::Command;

use util::{Server, corpus, enc, temp_dir};

/// The wire-relevant subset of Pyroscope's `push/v1/push.proto` and `types/v1/types.proto`
/// (field numbers and the service's full name are what matter on the wire).
const PUSH_PROTO: &str = r#"
syntax = "proto3";
package push.v1;
message LabelPair { string name = 1; string value = 2; }
message RawSample { bytes raw_profile = 1; string ID = 2; }
message RawProfileSeries { repeated LabelPair labels = 1; repeated RawSample samples = 2; }
message PushRequest { repeated RawProfileSeries series = 1; }
message PushResponse {}
service PusherService { rpc Push(PushRequest) returns (PushResponse) {} }
"#;

const CLIENT: &str = r#"
import sys, grpc
sys.path.insert(0, sys.argv[1])
from grpc_tools import protoc
if protoc.main(["protoc", "-I" + sys.argv[1], "--python_out=" + sys.argv[1],
                "--grpc_python_out=" + sys.argv[1], sys.argv[1] + "/push.proto"]) != 0:
    sys.exit("protoc failed")
import push_pb2, push_pb2_grpc

addr, profile_path = sys.argv[2], sys.argv[3]
raw = open(profile_path, "rb").read()
if len(sys.argv) > 4:
    # TLS: trust the test's CA; gRPC insists on HTTP/2 by ALPN.
    creds = grpc.ssl_channel_credentials(root_certificates=open(sys.argv[4], "rb").read())
    channel = grpc.secure_channel(addr, creds)
else:
    channel = grpc.insecure_channel(addr)
grpc.channel_ready_future(channel).result(timeout=30)
stub = push_pb2_grpc.PusherServiceStub(channel)

def request(raw_profile, pod):
    labels = [push_pb2.LabelPair(name="service_name", value="grpc-app"),
              push_pb2.LabelPair(name="pod", value=pod)]
    return push_pb2.PushRequest(series=[push_pb2.RawProfileSeries(
        labels=labels, samples=[push_pb2.RawSample(raw_profile=raw_profile, ID="x")])])

stub.Push(request(raw, "plain"), timeout=30)
print("plain ok", flush=True)
stub.Push(request(raw, "gzip"), timeout=30, compression=grpc.Compression.Gzip)
print("gzip ok", flush=True)
try:
    stub.Push(request(b"\x0a\xff\xff\xff", "broken"), timeout=30)
    print("broken accepted", flush=True)
except grpc.RpcError as e:
    print("broken", e.code().name, e.details(), flush=True)
"#;

#[test]
fn grpcio_client_pushes_over_http2_and_profiles_are_queryable() {
    let probe = Command::new("python3")
        .args(["-c", "import grpc, grpc_tools"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "grpcio/grpcio-tools are not installed (run .ci/setup): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("python3 not found: {e}"),
    }
    let dir = temp_dir("grpc");
    let dir = dir.path();
    let stubs = dir.join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    std::fs::write(stubs.join("push.proto"), PUSH_PROTO).unwrap();
    let script = dir.join("client.py");
    std::fs::write(&script, CLIENT).unwrap();
    let profile_path = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let server = Server::start(&dir.join("data"), &[]);

    let out = Command::new("timeout")
        .args(["120", "python3"])
        .arg(&script)
        .arg(&stubs)
        .arg(&server.addr)
        .arg(&profile_path)
        .output()
        .expect("run grpcio client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "grpc client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("plain ok"), "{stdout}");
    assert!(stdout.contains("gzip ok"), "{stdout}");
    let broken = stdout
        .lines()
        .find(|l| l.starts_with("broken"))
        .unwrap_or_default();
    assert!(
        broken.starts_with("broken INVALID_ARGUMENT") && broken.contains("invalid pprof"),
        "a broken profile must fail with INVALID_ARGUMENT naming the problem: {broken:?}"
    );

    // Both accepted pushes are stored, each exactly once; the broken one left nothing behind.
    let profile = ember_pprof::read_file(&profile_path).unwrap();
    let index = ember_pprof::sample_index(&profile, Some("cpu")).unwrap();
    let expected: i64 = ember_pprof::folded_stacks(&profile, index)
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert!(expected > 0);
    for pod in ["plain", "gzip"] {
        let selector = enc(&format!("{{service_name=\"grpc-app\", pod=\"{pod}\"}}"));
        let (s, folded) = server.get(
            &format!("/api/v1/query?query={selector}&type=cpu&from=0&format=folded"),
            &[],
        );
        assert_eq!(s, 200, "{folded}");
        let total: i64 = folded
            .lines()
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<i64>().ok())
            .sum();
        assert_eq!(total, expected, "pod {pod}: folded total");
        let (leaf_stack, _) = &ember_pprof::folded_stacks(&profile, index)[0];
        assert!(folded.contains(leaf_stack.as_str()), "stack {leaf_stack}");
    }
    let pods = server.get_json("/api/v1/label/pod/values", &[]);
    assert_eq!(pods, serde_json::json!(["gzip", "plain"]));
    drop(server);
}

#[test]
fn grpcio_client_pushes_over_tls_with_http2_by_alpn() {
    let dir = temp_dir("grpc-tls");
    let dir = dir.path();
    let stubs = dir.join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    std::fs::write(stubs.join("push.proto"), PUSH_PROTO).unwrap();
    let script = dir.join("client.py");
    std::fs::write(&script, CLIENT).unwrap();
    let certs = certs::make_certs(&dir.join("certs"));
    let profile_path = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let data = dir.join("data");
    let server = Server::start(
        &data,
        &[
            "--tls-cert",
            certs.server_cert.to_str().unwrap(),
            "--tls-key",
            certs.server_key.to_str().unwrap(),
        ],
    );
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let out = Command::new("timeout")
        .args(["120", "python3"])
        .arg(&script)
        .arg(&stubs)
        .arg(format!("localhost:{port}"))
        .arg(&profile_path)
        .arg(&certs.ca)
        .output()
        .expect("run grpcio client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "grpc client over TLS failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("plain ok") && stdout.contains("gzip ok"),
        "{stdout}"
    );
    assert!(stdout.contains("broken INVALID_ARGUMENT"), "{stdout}");
    // Plain HTTP to the TLS port is answered 400, not left hanging.
    let (status, body) = server.get("/ready", &[]);
    assert_eq!(status, 400, "{body}");
    server.terminate();

    // The same data, served without TLS: both pushes are there.
    let server = Server::start(&data, &[]);
    let pods = server.get_json("/api/v1/label/pod/values", &[]);
    assert_eq!(pods, serde_json::json!(["gzip", "plain"]));
    drop(server);
}
