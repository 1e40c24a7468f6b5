//! Blocks and retention of `ember server`: a graceful shutdown folds the write-ahead log into
//! an immutable block that the next start loads; retention deletes only expired data.

mod server_util;

use server_util::{Server, corpus, enc, push_request, temp_dir};

fn files_with_ext(dir: &std::path::Path, ext: &str) -> Vec<(std::path::PathBuf, u64)> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == ext))
                .map(|e| (e.path(), e.metadata().unwrap().len()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn shutdown_flushes_into_a_block_that_restart_loads() {
    let dir = temp_dir("blocks");
    let dir = dir.path();
    let data = dir.join("data");
    let files = [
        "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
        "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
        "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    ];
    let server = Server::start(&data, &[]);
    let mut input_bytes = 0u64;
    // 100 distinct label sets, as in the storage benchmark of issue 4.
    for i in 0..100 {
        let bytes = std::fs::read(corpus(files[i % files.len()])).unwrap();
        input_bytes += bytes.len() as u64;
        let pod = format!("pod-{i}");
        let req = push_request(&[("service_name", "blocks"), ("pod", &pod)], &bytes);
        let (s, b) = server.push(&req);
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    }
    let query = format!(
        "/api/v1/query?query={}&type=cpu&from=0&format=folded",
        enc("{service_name=\"blocks\"}")
    );
    let (s, before) = server.get(&query, &[]);
    assert_eq!(s, 200);
    server.terminate();

    let blocks = files_with_ext(&data.join("blocks"), "blk");
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    // Record bytes left in the log: each segment starts with its 8-byte header.
    let wal: u64 = files_with_ext(&data.join("wal"), "wal")
        .iter()
        .map(|f| f.1.saturating_sub(8))
        .sum();
    assert_eq!(wal, 0, "the log is folded into the block");
    let ratio = blocks[0].1 as f64 / input_bytes as f64;
    eprintln!(
        "block {} bytes for {input_bytes} input pprof bytes: {:.1}%",
        blocks[0].1,
        ratio * 100.0
    );

    let server = Server::start(&data, &[]);
    let (s, after) = server.get(&query, &[]);
    assert_eq!(s, 200);
    assert_eq!(
        after, before,
        "a block restores exactly what the head served"
    );
    let pods = server.get_json(
        &format!(
            "/api/v1/label/pod/values?query={}&from=0",
            enc("{service_name=\"blocks\"}")
        ),
        &[],
    );
    assert_eq!(pods.as_array().unwrap().len(), 100);
    // New data after a restart goes to the log again and is kept apart from the block.
    let (s, _) = server.request(
        "POST",
        "/ingest?name=blocks.cpu&from=1700000000",
        &[],
        b"main;late 5\n",
    );
    assert_eq!(s, 200);
    server.kill9();
    let server = Server::start(&data, &[]);
    let (_, again) = server.get(&query, &[]);
    assert!(again.contains("main;late 50000000"), "{again}");
    assert_eq!(again.lines().count(), before.lines().count() + 1);
    drop(server);
}

#[test]
fn retention_deletes_only_expired_data() {
    let dir = temp_dir("retention");
    let dir = dir.path();
    let data = dir.join("data");
    let config = dir.join("config.json");
    let keep_all = dir.join("keep-all.json");
    std::fs::write(
        &config,
        r#"{"retention_days": 1, "flush_interval_seconds": 0}"#,
    )
    .unwrap();
    std::fs::write(
        &keep_all,
        r#"{"retention_days": 0, "flush_interval_seconds": 0}"#,
    )
    .unwrap();
    let args = ["--config", config.to_str().unwrap()];
    // A profile from years ago (the corpus file's own timestamp), stored while nothing
    // expires: a server with retention refuses it at ingest (below).
    let server = Server::start(&data, &["--config", keep_all.to_str().unwrap()]);
    let old = std::fs::read(corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz")).unwrap();
    let req = push_request(&[("service_name", "old")], &old);
    let (s, _) = server.push(&req);
    assert_eq!(s, 200);
    server.terminate();
    assert_eq!(files_with_ext(&data.join("blocks"), "blk").len(), 1);
    // With a day of retention, the only block holds expired data only: deleted.
    let server = Server::start(&data, &args);
    // An expired profile is refused with a 400 naming its time and the window (issue 13:
    // it used to be acknowledged, then deleted at the next flush).
    let (s, body) = server.push(&req);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(s, 400, "{body}");
    assert!(body.contains("retention window of 24 h"), "{body}");
    server.terminate();
    assert!(files_with_ext(&data.join("blocks"), "blk").is_empty());

    let server = Server::start(&data, &args);
    let (s, _) = server.request("POST", "/ingest?name=fresh.cpu", &[], b"main;now 3\n");
    assert_eq!(s, 200);
    server.terminate();
    assert_eq!(files_with_ext(&data.join("blocks"), "blk").len(), 1);
    let server = Server::start(&data, &args);
    let services = server.get_json("/api/v1/label/service_name/values?query={}&from=0", &[]);
    assert_eq!(services, serde_json::json!(["fresh"]));
    drop(server);
}
