//! Issue 13 at the server: a damaged write-ahead log record is skipped at start (the
//! records after it served, the skip counted on `/metrics`), and profiles outside the time
//! window are refused with a 400 that names the timestamp and the window.

mod util;

use util::{Server, corpus, enc, temp_dir};

/// Three profiles logged by a store that is then dropped without a flush (what a
/// crash leaves), the middle record's payload bit-flipped on disk: the server starts,
/// serves the first and last, and counts the skipped record.
#[test]
fn a_corrupt_log_record_is_skipped_counted_and_the_rest_served() {
    let dir = temp_dir("wal-corrupt");
    let dir = dir.path();
    let data = dir.join("data");
    {
        let store = ember_store::Store::open(&data, ember_store::StoreOptions::default()).unwrap();
        let pprof =
            std::fs::read(corpus("pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof")).unwrap();
        for seq in 0..3 {
            let batch = ember_store::IngestBatch {
                profiles: vec![ember_store::IngestProfile {
                    labels: vec![
                        ("service_name".into(), "wal".into()),
                        ("seq".into(), seq.to_string()),
                        ("marker".into(), format!("record-{seq}")),
                    ],
                    time_nanos: ember_store::now_nanos(),
                    pprof: pprof.clone(),
                    what: "profile".into(),
                }],
            };
            store.ingest("anonymous", batch).unwrap();
        }
    }
    let segment = std::fs::read_dir(data.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::metadata(p).unwrap().len() > 100)
        .expect("a segment with the records");
    let mut bytes = std::fs::read(&segment).unwrap();
    let needle = b"record-1";
    let at = bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("record 1 in the log");
    bytes[at] ^= 0x20;
    std::fs::write(&segment, &bytes).unwrap();

    let server = Server::start(&data, &[]);
    let values = server.get_json(
        &format!(
            "/api/v1/label/seq/values?query={}&from=now-1h",
            enc("{service_name=\"wal\"}")
        ),
        &[],
    );
    assert_eq!(values, serde_json::json!(["0", "2"]));
    let (status, metrics) = server.get("/metrics", &[]);
    assert_eq!(status, 200);
    assert!(
        metrics.contains("ember_wal_records_skipped_total 1\n"),
        "{metrics}"
    );
    server.terminate();
}

/// With the default 30-day retention, a profile from 2021 is refused (it used to be
/// acknowledged, then deleted at the next flush), and `from=1e20` (which saturates to
/// `i64::MAX` nanoseconds, a block end no retention reaches) is refused by the future
/// skew; both with a 400 naming the time and the window. A profile of now is accepted.
#[test]
fn profiles_outside_the_time_window_are_refused() {
    let dir = temp_dir("time-window");
    let dir = dir.path();
    let config = dir.join("config.json");
    std::fs::write(&config, "{}").unwrap();
    let server = Server::start(&dir.join("data"), &["--config", config.to_str().unwrap()]);
    let folded = b"main;work 3\n";
    let (s, body) = server.request("POST", "/ingest?name=w.cpu&from=1619321948", &[], folded);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("1619321948") && body.contains("retention window of 30 days"),
        "{body}"
    );
    let (s, body) = server.request("POST", "/ingest?name=w.cpu&from=1e20", &[], folded);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(s, 400, "{body}");
    assert!(
        body.contains("in the future") && body.contains("max_future_skew_seconds"),
        "{body}"
    );
    let (s, body) = server.request("POST", "/ingest?name=w.cpu", &[], folded);
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    let (_, metrics) = server.get("/metrics", &[]);
    assert!(
        metrics.contains("ember_rejected_total{reason=\"time_out_of_window\"} 2"),
        "{metrics}"
    );
    server.terminate();
}
