//! Load figures for `ember server` (ignored by default; run with
//! `cargo test -p ember --release --test server_bench -- --ignored --nocapture`):
//! ingest rate and latency pushing the corpus's Go CPU profiles with 100 label sets, merge
//! latency for one service's day at 10 s resolution (8,640 profiles) and for one hour, and
//! bytes on disk after the flush versus the input bytes.

mod server_util;

use std::time::Instant;

use server_util::{Server, corpus, enc, push_request, temp_dir};

const GO_CPU: [&str; 4] = [
    "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
    "pyroscope/pkg/og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof",
    "pprof/internal/report/testdata/sample.cpu",
];

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
#[ignore]
fn bench_ingest_and_query() {
    let dir = temp_dir("bench");
    let dir = dir.path();
    let data = dir.join("data");
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"retention_days": 0, "flush_interval_seconds": 0}"#,
    )
    .unwrap();
    let server = Server::start(&data, &["--config", config.to_str().unwrap()]);
    let profiles: Vec<Vec<u8>> = GO_CPU
        .iter()
        .map(|f| std::fs::read(corpus(f)).unwrap())
        .collect();

    // Ingest: EMBER_BENCH_CLIENTS (default 32) concurrent clients, 100 distinct label sets.
    let total = 8000usize;
    let threads: usize = std::env::var("EMBER_BENCH_CLIENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let started = Instant::now();
    let mut handles = Vec::new();
    for t in 0..threads {
        let addr = server.addr.clone();
        let profiles = profiles.clone();
        handles.push(std::thread::spawn(move || {
            let mut lat = Vec::new();
            let mut bytes = 0usize;
            for i in (t..total).step_by(threads) {
                let p = &profiles[i % profiles.len()];
                let pod = format!("pod-{}", i % 100);
                let body = push_request(&[("service_name", "bench"), ("pod", &pod)], p);
                let s = Instant::now();
                let (status, _) = server_util::http(
                    &addr,
                    "POST",
                    "/push.v1.PusherService/Push",
                    &[("Content-Type", "application/proto")],
                    &body,
                );
                assert_eq!(status, 200);
                lat.push(s.elapsed().as_secs_f64());
                bytes += p.len();
            }
            (lat, bytes)
        }));
    }
    let mut lat = Vec::new();
    let mut bytes = 0usize;
    let mut peak_rss = 0;
    for h in handles {
        let (l, b) = h.join().unwrap();
        lat.extend(l);
        bytes += b;
        peak_rss = peak_rss.max(rss_kib(server.child.id()));
    }
    let secs = started.elapsed().as_secs_f64();
    lat.sort_by(|a, b| a.total_cmp(b));
    let p99 = lat[lat.len() * 99 / 100];
    eprintln!(
        "ingest: {total} profiles in {secs:.2}s = {:.0} profiles/s, {:.2} MB/s of pprof; p50 {:.2} ms, p99 {:.2} ms; server RSS after {} KiB",
        total as f64 / secs,
        bytes as f64 / secs / 1e6,
        lat[lat.len() / 2] * 1e3,
        p99 * 1e3,
        peak_rss
    );
    let (_, metrics) = server.get("/metrics", &[]);
    for l in metrics.lines().filter(|l| {
        l.starts_with("ember_wal_fsyncs_total") || l.starts_with("ember_wal_records_total")
    }) {
        eprintln!("  {l}");
    }

    // Query: one service's day at 10 s resolution.
    let day_start: i64 = 1_700_000_000;
    let p = &profiles[0];
    let started = Instant::now();
    for i in 0..8640i64 {
        let from = day_start + i * 10;
        let (s, _) = server.request(
            "POST",
            &format!(
                "/ingest?name=day.cpu&format=pprof&from={from}&until={}",
                from + 10
            ),
            &[],
            p,
        );
        assert_eq!(s, 200);
    }
    eprintln!(
        "loaded 8640 profiles of one service in {:.2}s",
        started.elapsed().as_secs_f64()
    );
    let q = |from: i64, until: i64| {
        let path = format!(
            "/pyroscope/render?query={}&from={from}&until={until}&maxNodes=1024",
            enc("day.cpu{}")
        );
        let mut best = f64::MAX;
        for _ in 0..5 {
            let s = Instant::now();
            let v = server.get_json(&path, &[]);
            best = best.min(s.elapsed().as_secs_f64());
            assert!(v["flamebearer"]["numTicks"].as_i64().unwrap() > 0);
        }
        best
    };
    let day = q(day_start, day_start + 86_400);
    let hour = q(day_start, day_start + 3_600);
    eprintln!(
        "render: day (8640 profiles) {:.1} ms, hour (360 profiles) {:.1} ms (best of 5, incl. HTTP)",
        day * 1e3,
        hour * 1e3
    );

    let input: u64 = (total / profiles.len()) as u64
        * profiles.iter().map(|p| p.len() as u64).sum::<u64>()
        + 8640 * p.len() as u64;
    server.terminate();
    let blocks: u64 = std::fs::read_dir(data.join("blocks"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    eprintln!(
        "storage: {blocks} bytes of blocks for {input} input pprof bytes = {:.2}%",
        blocks as f64 * 100.0 / input as f64
    );
}
