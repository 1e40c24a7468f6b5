//! Durability of `ember server`: every acknowledged push survives SIGKILL, and SIGTERM
//! shuts down cleanly with everything flushed.

mod server_util;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use server_util::{Server, enc, push_request, temp_dir};

/// Sum of the `cpu` sample type of a corpus profile, computed independently of the server.
fn cpu_total(bytes: &[u8]) -> (String, i64) {
    let p = ember_pprof::decode(bytes).expect("corpus profile decodes");
    let i = ember_pprof::sample_index(&p, Some("cpu")).expect("cpu sample type");
    let s = |x: i64| ember_pprof::string(&p, x).to_string();
    let vt = p.sample_type[i];
    let pt = p.period_type.expect("period type");
    let id = format!(
        "process_cpu:{}:{}:{}:{}",
        s(vt.r#type),
        s(vt.unit),
        s(pt.r#type),
        s(pt.unit)
    );
    (id, p.sample.iter().map(|x| x.value[i]).sum())
}

#[test]
fn acknowledged_pushes_survive_sigkill() {
    let tmp = temp_dir("durability");
    // The data directory inside the guard: the config file the server gets goes beside it.
    let dir = &tmp.path().join("data");
    let files = [
        "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
        "pprof/internal/report/testdata/sample.cpu",
        "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
    ];
    let profiles: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(server_util::corpus(f)).expect("read corpus"))
        .collect();
    let server = Server::start(dir, &[]);
    let addr = server.addr.clone();
    let acked: Arc<Mutex<BTreeMap<u32, usize>>> = Arc::default();
    let profiles = Arc::new(profiles);
    // Four concurrent pushers keep pushing; the server is killed while pushes are in flight.
    let mut threads = Vec::new();
    for t in 0..4u32 {
        let (addr, acked, profiles) = (addr.clone(), acked.clone(), profiles.clone());
        threads.push(std::thread::spawn(move || {
            for i in 0..1000u32 {
                let seq = t * 1000 + i;
                let which = (seq as usize) % profiles.len();
                let body = push_request(
                    &[
                        ("__name__", "process_cpu"),
                        ("service_name", "durable"),
                        ("seq", &seq.to_string()),
                    ],
                    &profiles[which],
                );
                let result = server_util::try_http(
                    &addr,
                    "POST",
                    "/push.v1.PusherService/Push",
                    &[("Content-Type", "application/proto")],
                    &body,
                );
                match result {
                    Ok((200, _)) => {
                        acked.lock().unwrap().insert(seq, which);
                    }
                    _ => return,
                }
            }
        }));
    }
    while acked.lock().unwrap().len() < 80 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Pushes still in flight when the kill lands are either acknowledged (and must survive)
    // or fail on the client side (and may be lost).
    server.kill9();
    for t in threads {
        let _ = t.join();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 80);

    let server = Server::start(dir, &[]);
    let (type_id, _) = cpu_total(&profiles[0]);
    let values = server.get_json(
        &format!(
            "/api/v1/label/seq/values?query={}&from=0",
            enc("{service_name=\"durable\"}")
        ),
        &[],
    );
    let stored: BTreeSet<u32> = values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().parse().unwrap())
        .collect();
    let missing: Vec<&u32> = acked.keys().filter(|s| !stored.contains(s)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged but lost after SIGKILL: {missing:?}"
    );

    // Every acknowledged profile is complete: its total matches the corpus file's.
    let ts = server.get_json(
        &format!(
            "/api/v1/timeseries?query={}&type={}&from=0&step=1000000000&groupBy=seq",
            enc("{service_name=\"durable\"}"),
            enc(&type_id)
        ),
        &[],
    );
    let mut totals: BTreeMap<u32, i64> = BTreeMap::new();
    for s in ts["series"].as_array().unwrap() {
        let seq: u32 = s["labels"]["seq"].as_str().unwrap().parse().unwrap();
        let sum: i64 = s["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_i64().unwrap())
            .sum();
        totals.insert(seq, sum);
    }
    for (seq, which) in &acked {
        let (_, expected) = cpu_total(&profiles[*which]);
        assert_eq!(
            totals.get(seq),
            Some(&expected),
            "seq {seq} (file {})",
            files[*which]
        );
    }
    eprintln!(
        "{} acknowledged pushes, all {} queryable after SIGKILL + restart",
        acked.len(),
        acked.len()
    );
    drop(server);
}

#[test]
fn sigterm_shuts_down_gracefully_and_keeps_data() {
    let tmp = temp_dir("sigterm");
    // The data directory inside the guard: the config file the server gets goes beside it.
    let dir = &tmp.path().join("data");
    let folded = "main;work;compute 7\nmain;idle 3\n";
    let server = Server::start(dir, &[]);
    let (status, body) = server.request(
        "POST",
        "/ingest?name=graceful.cpu&from=1700000000",
        &[],
        folded.as_bytes(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let pid = server.child.id().to_string();
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(ok.success());
    let mut server = server;
    let status = server.child.wait().unwrap();
    assert!(status.success(), "exit status after SIGTERM: {status:?}");
    let server = Server::start(dir, &[]);
    let (s, folded_out) = server.get(
        &format!(
            "/api/v1/query?query={}&from=1699999000&until=1700001000&format=folded",
            enc("graceful.cpu{}")
        ),
        &[],
    );
    assert_eq!(s, 200, "{folded_out}");
    // 100 Hz default sample rate: each sample is 10 ms of CPU.
    assert_eq!(
        folded_out,
        "main;idle 30000000\nmain;work;compute 70000000\n"
    );
}

/// A second `ember server` on a data directory that one already serves exits at once with
/// a message naming the lock, and the first keeps serving (issue 13: without the lock both
/// started, and one's flush deleted the other's log segments).
#[test]
fn a_second_server_on_the_same_directory_refuses_to_start() {
    let tmp = temp_dir("one-server");
    // The data directory inside the guard: the config file the server gets goes beside it.
    let dir = &tmp.path().join("data");
    let first = Server::start(dir, &[]);
    let config = dir.with_extension("config.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(["server", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .arg("--config")
        .arg(&config)
        .output()
        .expect("run a second ember server");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "second server started: {stderr}");
    assert!(
        stderr.contains("in use by another Ember server") && stderr.contains("LOCK"),
        "{stderr}"
    );
    let (status, _) = first.get("/ready", &[]);
    assert_eq!(status, 200, "the first server stops serving");
    first.terminate();
}
