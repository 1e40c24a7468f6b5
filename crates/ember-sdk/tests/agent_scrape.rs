//! `ember agent` scrapes the example service with its `ember_cpu` and `ember_heap` presets
//! into a real server, and the profiles are queried back. Uses the `ember` binary and the
//! `service` example from this target directory (built by `cargo build -p ember` and by
//! `cargo test`); skipped, saying so, when the `ember` binary has not been built.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Kills the child (that this test started) when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_agent_scrapes_the_example_service() {
    // target/debug/deps/agent_scrape-HASH → target/debug
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(|d| d.parent()).unwrap();
    let (ember, example) = (debug.join("ember"), debug.join("examples/service"));
    if !ember.exists() || !example.exists() {
        eprintln!(
            "skipped: build the ember binary (cargo build -p ember) and the example first: {} {}",
            ember.display(),
            example.display()
        );
        return;
    }
    let dir = temp_dir("agent-scrape");
    let dir = dir.path();
    let server = start_server(&dir.join("data"));
    let service_addr = format!("127.0.0.1:{}", free_port());
    let _service = Running(
        Command::new(&example)
            .arg(&service_addr)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let up = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&service_addr).is_err() {
        assert!(Instant::now() < up, "the example service did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let config = dir.join("agent.yaml");
    std::fs::write(
        &config,
        format!(
            "admin: {{listen: '127.0.0.1:0'}}\n\
             profiling: {{enabled: false}}\n\
             exporters:\n  server: {{url: 'http://{server}', min_backoff: 100ms, max_backoff: 1s}}\n\
             scrape_configs:\n\
             \x20 - job_name: sdk-example\n\
             \x20   scrape_interval: 3s\n\
             \x20   static_configs: [{{targets: ['{service_addr}']}}]\n\
             \x20   profiling_config:\n\
             \x20     process_cpu: {{enabled: false, path: '/debug/pprof/profile?seconds={{seconds}}', delta: false}}\n\
             \x20     memory: {{enabled: false, path: /debug/pprof/allocs, delta: true}}\n\
             \x20     block: {{enabled: false, path: /debug/pprof/block, delta: true}}\n\
             \x20     mutex: {{enabled: false, path: /debug/pprof/mutex, delta: true}}\n\
             \x20     goroutine: {{enabled: false, path: /debug/pprof/goroutine, delta: false}}\n\
             \x20     ember_cpu: {{enabled: true, path: '/profile/cpu?seconds={{seconds}}', delta: false}}\n\
             \x20     ember_heap: {{enabled: true, path: /profile/heap, delta: true}}\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("agent.log")).unwrap();
    let _agent = Running(
        Command::new(&ember)
            .args(["agent", "--config"])
            .arg(&config)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"sdk-example\"}";
    let heap = "memory:alloc_space:bytes:space:bytes{service_name=\"sdk-example\"}";
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut cpu_folded, mut heap_folded) = (String::new(), String::new());
    while Instant::now() < deadline {
        cpu_folded = query_folded(&server, cpu);
        heap_folded = query_folded(&server, heap);
        if cpu_folded.contains("checksum") && heap_folded.contains("handle_request") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let agent_log = std::fs::read_to_string(dir.join("agent.log")).unwrap_or_default();
    assert!(
        cpu_folded.contains("checksum"),
        "the example's hot function in the scraped CPU profiles:\n{cpu_folded}\nagent log:\n{agent_log}"
    );
    // The example allocates 256 KiB per request: its allocation site in alloc_space.
    assert!(
        heap_folded.contains("handle_request"),
        "scraped heap profiles:\n{heap_folded}\nagent log:\n{agent_log}"
    );
}
