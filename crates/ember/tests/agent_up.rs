//! `ember up`: embedded server plus host agent; profiles of this host arrive, and Ctrl-C
//! (SIGINT) stops both cleanly within 5 s (the shutdown flush itself: agent_flush.rs).

mod agent_util;
mod server_util;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn up_profiles_this_host_and_stops_cleanly() {
    if !agent_util::host_perf_allowed() {
        return;
    }
    let dir = server_util::temp_dir("agent-up");
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
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
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
        if s == 200 && services.len() > 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // Whole-host profiling: any process that ran on a CPU (ember up itself at least) is a service.
    assert!(services.len() > 4, "no services arrived: {services}");
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
