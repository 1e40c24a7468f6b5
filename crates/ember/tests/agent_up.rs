//! `ember up`: embedded server plus host agent; profiles of this host arrive (a CPU-burning
//! workload's service and stacks), the printed URL shows them in a real browser (chromium,
//! `tests/browser/ui_up.mjs`), and Ctrl-C (SIGINT) stops both cleanly within 5 s (the
//! shutdown flush itself: agent_flush.rs).

mod agent_util;
mod browser_util;
mod server_util;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn up_profiles_this_host_and_stops_cleanly() {
    if !agent_util::host_perf_allowed() {
        return;
    }
    let dir = server_util::temp_dir("agent-up");
    let dir = dir.path();
    // An idle host gives a 19 Hz sampler almost nothing to see (CI once waited 30 s for a first
    // sample), so something on this host burns CPU the whole time.
    let _workload = agent_util::Workload::start(dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args([
            "up",
            "--listen",
            "127.0.0.1:0",
            "--agent-listen",
            "127.0.0.1:0",
            "--upload-interval",
            "2",
            "--data-dir",
        ])
        .arg(dir.join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Keep what `ember up` logs, so that a failure says why.
    let log = Arc::new(Mutex::new(String::new()));
    let mut stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("UI/API: http://")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let started = Instant::now();
    let mut services = String::new();
    while started.elapsed() < Duration::from_secs(30) {
        let (s, b) = server_util::http(&addr, "GET", "/api/v1/label/service_name/values", &[], b"");
        services = String::from_utf8_lossy(&b).into_owned();
        if s == 200 && services.contains("\"three_paths\"") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // Whole-host profiling: the workload is a service named after its executable, with its
    // stacks symbolized.
    assert!(
        services.contains("\"three_paths\""),
        "the workload's service did not arrive: {services}\nember up logged:\n{}",
        log.lock().unwrap()
    );
    let folded = agent_util::query_folded(
        &addr,
        r#"{service_name="three_paths"}"#,
        "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
    );
    assert!(folded.contains("path_a"), "{folded}");
    // What a user does next: open the printed URL.
    if browser_util::browser_available() {
        let args = serde_json::json!({
            "url": format!("http://{addr}"),
            "service": "three_paths",
            "function": "path_a",
            "screenshots": browser_util::screenshots(),
        });
        browser_util::run_script("ui_up.mjs", &args, 5);
    }
    let t = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
}
