//! `ember push` against a real `ember server`: files are validated locally, pushed, and the
//! server then holds exactly what the files contain.

mod server_util;

use server_util::{Server, corpus, enc, temp_dir};
use std::process::Command;

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

/// Sum of the folded stacks the server returns for a query.
fn server_total(
    server: &Server,
    selector: &str,
    profile_type: &str,
    tenant: &[(&str, &str)],
) -> i64 {
    let (status, body) = server.get(
        &format!(
            "/api/v1/query?query={}&type={}&from=0&until=now&format=folded",
            enc(selector),
            enc(profile_type)
        ),
        tenant,
    );
    if status == 404 && body.contains("no profiles match") {
        return 0;
    }
    assert_eq!(status, 200, "{body}");
    body.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(_, v)| v.trim().parse::<i64>().expect("folded count"))
        .sum()
}

fn file_total(path: &std::path::Path, sample_type: &str) -> i64 {
    let profile = ember_pprof::read_file(path).unwrap();
    let index = ember_pprof::sample_index(&profile, Some(sample_type)).unwrap();
    profile.sample.iter().map(|s| s.value[index]).sum()
}

#[test]
fn push_files_then_query_them_back() {
    let dir = temp_dir("push-cli");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let url = format!("http://{}", server.addr);
    let go_cpu = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let large = corpus("pprof/internal/proftest/testdata/large.cpu");
    let (ok, out, err) = ember(&[
        "push",
        go_cpu.to_str().unwrap(),
        large.to_str().unwrap(),
        "--service",
        "push-test",
        "--label",
        "region=eu-west",
        "--server",
        &url,
        "--tenant",
        "team-push",
    ]);
    assert!(ok, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("pushed 2 of 2 profiles"), "{out}");
    assert!(
        out.contains("accepted ") && out.contains("cpu/nanoseconds"),
        "{out}"
    );

    let tenant = [("X-Scope-OrgID", "team-push")];
    let expected = file_total(&go_cpu, "cpu") + file_total(&large, "cpu");
    assert!(expected > 0);
    let cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    assert_eq!(
        server_total(
            &server,
            "{service_name=\"push-test\",region=\"eu-west\"}",
            cpu,
            &tenant
        ),
        expected
    );
    // Another tenant sees nothing.
    assert_eq!(
        server_total(&server, "{service_name=\"push-test\"}", cpu, &[]),
        0
    );

    // --type sets __name__: a memory profile pushed as "memory" is found under that name.
    let heap = corpus("pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz");
    if heap.is_file() {
        let (ok, out, err) = ember(&[
            "push",
            heap.to_str().unwrap(),
            "--service",
            "push-heap",
            "--type",
            "memory",
            "--server",
            &url,
        ]);
        assert!(ok, "{out}{err}");
        let values = server.get_json(
            &format!(
                "/api/v1/label/__name__/values?query={}&from=0&until=now",
                enc("{service_name=\"push-heap\"}")
            ),
            &[],
        );
        assert_eq!(values, serde_json::json!(["memory"]));
    }
}

#[test]
fn at_now_stores_an_old_profile_as_of_now() {
    let dir = temp_dir("push-at");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let url = format!("http://{}", server.addr);
    // A Go CPU profile taken years ago.
    let old = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    let recent = |service: &str| {
        let (status, body) = server.get(
            &format!(
                "/api/v1/query?query={}&type={}&from=now-1h&until=now&format=folded",
                enc(&format!("{{service_name=\"{service}\"}}")),
                enc(cpu)
            ),
            &[],
        );
        (status, body)
    };
    let (ok, out, err) = ember(&[
        "push",
        old.to_str().unwrap(),
        "--service",
        "push-at",
        "--at",
        "now",
        "--server",
        &url,
    ]);
    assert!(ok, "stdout: {out}\nstderr: {err}");
    assert!(!err.contains("days ago"), "no warning with --at: {err}");
    let (status, body) = recent("push-at");
    assert_eq!(status, 200, "{body}");
    let total: i64 = body
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(_, v)| v.trim().parse::<i64>().unwrap())
        .sum();
    assert_eq!(
        total,
        file_total(&old, "cpu"),
        "the whole profile, in the last hour"
    );
    // Without --at the profile keeps its own (old) time, and the user is told so.
    let (_, _, err) = ember(&[
        "push",
        old.to_str().unwrap(),
        "--service",
        "push-own-time",
        "--server",
        &url,
    ]);
    assert!(
        err.contains("days ago") && err.contains("--at now"),
        "{err}"
    );
    assert_ne!(recent("push-own-time").0, 200, "not in the last hour");
    // A bad --at is refused before anything is read or sent.
    let (ok, _, err) = ember(&["push", "x.pb.gz", "--service", "s", "--at", "yesterday"]);
    assert!(!ok);
    assert!(err.contains("expected `now` or unix seconds"), "{err}");
}

#[test]
fn invalid_files_are_named_and_nothing_is_sent() {
    let dir = temp_dir("push-invalid");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let url = format!("http://{}", server.addr);
    let good = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let bad = dir.join("broken.pb.gz");
    let mut bytes = std::fs::read(&good).unwrap();
    bytes.truncate(bytes.len() / 3);
    std::fs::write(&bad, &bytes).unwrap();
    let (ok, out, err) = ember(&[
        "push",
        good.to_str().unwrap(),
        bad.to_str().unwrap(),
        "--service",
        "never",
        "--server",
        &url,
    ]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("broken.pb.gz") && err.contains("not a valid pprof"),
        "{err}"
    );
    let services = server.get_json("/api/v1/label/service_name/values?from=0&until=now", &[]);
    assert!(
        !services.as_array().unwrap().iter().any(|v| v == "never"),
        "the valid file must not have been sent alone: {services}"
    );

    // Missing file, bad label, bad URL: errors that say what is wrong.
    let (ok, _, err) = ember(&[
        "push",
        "/nonexistent.pb",
        "--service",
        "x",
        "--server",
        &url,
    ]);
    assert!(!ok && err.contains("/nonexistent.pb"), "{err}");
    let (ok, _, err) = ember(&[
        "push",
        good.to_str().unwrap(),
        "--service",
        "x",
        "--label",
        "1bad=v",
    ]);
    assert!(!ok && err.contains("label name"), "{err}");
    let (ok, _, err) = ember(&[
        "push",
        good.to_str().unwrap(),
        "--service",
        "x",
        "--server",
        "ftp://h",
    ]);
    assert!(!ok && err.contains("http://"), "{err}");
}

#[test]
fn unreachable_server_fails_after_retries() {
    let good = corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    // Bind then drop a listener: the port is (almost certainly) closed afterwards.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let (ok, out, err) = ember(&[
        "push",
        good.to_str().unwrap(),
        "--service",
        "x",
        "--server",
        &format!("http://127.0.0.1:{port}"),
        "--retries",
        "1",
    ]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("cannot connect") && err.contains("retrying"),
        "{err}"
    );
    assert!(out.contains("pushed 0 of 1"), "{out}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn help_documents_every_option() {
    let (ok, out, _) = ember(&["push", "--help"]);
    assert!(ok);
    for option in [
        "--service",
        "--label",
        "--server",
        "--type",
        "--tenant",
        "--token",
        "--token-file",
        "--timeout",
        "--retries",
        "--ca-file",
        "http://127.0.0.1:4040",
    ] {
        assert!(out.contains(option), "--help lacks {option}:\n{out}");
    }
}
