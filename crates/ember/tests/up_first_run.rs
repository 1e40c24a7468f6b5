//! `ember up` as a new user meets it (issue 14, item 7): once profiles arrive it names the
//! services and prints a query that runs exactly as printed; `ember query --list` lists
//! services and types; a status line is drawn on a terminal only; run by a user who may not
//! sample the host it says so once, prominently, and keeps serving, unless host profiling
//! was asked for, when it exits with an error.

mod agent_util;
mod server_util;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const EMBER: &str = env!("CARGO_BIN_EXE_ember");

/// Collects a child's pipe into a shared string.
fn drain(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    text
}

fn wait_until(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    ok()
}

/// SIGINT to `pid`, as Ctrl-C.
fn interrupt(pid: u32) {
    assert!(
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// `ember up` on free ports with `extra` options, stdout and stderr piped.
fn up(dir: &Path, extra: &[&str]) -> (Child, String, Arc<Mutex<String>>, Arc<Mutex<String>>) {
    let port = agent_util::free_port();
    let mut child = Command::new(EMBER)
        .args(["up", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--agent-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.join("data"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    (child, format!("http://127.0.0.1:{port}"), out, err)
}

/// Runs `command` as a POSIX shell would, with `ember` meaning the binary under test.
fn run_as_printed(command: &str) -> (bool, String, String) {
    let bin = Path::new(EMBER).parent().unwrap();
    let out = Command::new("sh")
        .args(["-c", command])
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn up_names_the_services_and_a_query_that_runs_as_printed() {
    if !agent_util::host_perf_allowed() {
        return;
    }
    let dir = server_util::temp_dir("up-first-run");
    let dir = dir.path();
    let _workload = agent_util::Workload::start(dir);
    let (mut child, url, out, err) = up(dir, &["--upload-interval", "2"]);
    let listed = wait_until(Duration::from_secs(40), || {
        out.lock().unwrap().contains("look at one:")
    });
    let printed = out.lock().unwrap().clone();
    assert!(
        listed,
        "stdout:\n{printed}\nstderr:\n{}",
        err.lock().unwrap()
    );
    assert!(
        printed.contains("ember up: profiles are arriving from"),
        "{printed}"
    );
    let command = printed
        .lines()
        .find_map(|l| l.trim().strip_prefix("look at one:"))
        .unwrap()
        .trim()
        .to_string();
    assert!(
        command.starts_with("ember query '{service_name=\"")
            && command.contains(&format!("--server {url}")),
        "{command}"
    );
    // The command runs as printed and answers a top table.
    let (ok, table, stderr) = run_as_printed(&command);
    assert!(ok, "{command}: {stderr}");
    assert!(table.contains("flat%") && table.contains("cum%"), "{table}");
    // `--list` (also printed) shows the workload's service with its CPU profile type.
    let (ok, listing, stderr) = run_as_printed(&format!("ember query --list --server {url}"));
    assert!(ok, "{stderr}");
    let line = listing
        .lines()
        .find(|l| l.trim_start().starts_with("three_paths "))
        .unwrap_or_else(|| panic!("{listing}"));
    assert!(
        line.contains("process_cpu:cpu:nanoseconds:cpu:nanoseconds"),
        "{listing}"
    );
    interrupt(child.id());
    assert!(child.wait().unwrap().success());
    // Piped: the listing once, no status line.
    let printed = out.lock().unwrap().clone();
    assert_eq!(printed.matches("profiles are arriving").count(), 1);
    assert!(
        !err.lock().unwrap().contains("profiles stored"),
        "{}",
        err.lock().unwrap()
    );
}

/// On a terminal (util-linux `script` gives `ember up` a pty) the status line counts what
/// arrives; the same run piped writes none of it.
#[test]
fn the_status_line_is_drawn_on_a_terminal_only() {
    let dir = server_util::temp_dir("up-status");
    let dir = dir.path();
    let port = agent_util::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let command = format!(
        "exec {EMBER} up --host-profiling off --listen 127.0.0.1:{port} --agent-listen \
         127.0.0.1:0 --data-dir {}",
        dir.join("data").display()
    );
    let mut script = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("util-linux script");
    let screen = drain(script.stdout.take().unwrap());
    assert!(
        wait_until(Duration::from_secs(20), || screen
            .lock()
            .unwrap()
            .contains("0 services, 0 profiles stored, no ingest yet")),
        "{}",
        screen.lock().unwrap()
    );
    let profile = server_util::corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let pushed = Command::new(EMBER)
        .arg("push")
        .arg(&profile)
        .args(["--service", "first-run", "--at", "now", "--server", &url])
        .output()
        .unwrap();
    assert!(pushed.status.success(), "{pushed:?}");
    assert!(
        wait_until(Duration::from_secs(20), || {
            let s = screen.lock().unwrap();
            s.contains("1 services, 1 profiles stored, last ingest")
                && s.contains("profiles are arriving from 1 services")
        }),
        "{}",
        screen.lock().unwrap()
    );
    // `script` runs the command as its child: Ctrl-C goes to `ember up` itself.
    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", script.id())).unwrap();
    let up_pid: u32 = children.split_whitespace().next().unwrap().parse().unwrap();
    interrupt(up_pid);
    assert!(script.wait().unwrap().success());

    // Piped: the listing, never the status line.
    let dir = server_util::temp_dir("up-status-piped");
    let dir = dir.path();
    let (mut child, url, out, err) = up(dir, &["--host-profiling", "off"]);
    assert!(wait_until(Duration::from_secs(10), || out
        .lock()
        .unwrap()
        .contains("UI/API")));
    let pushed = Command::new(EMBER)
        .arg("push")
        .arg(&profile)
        .args(["--service", "first-run", "--at", "now", "--server", &url])
        .output()
        .unwrap();
    assert!(pushed.status.success(), "{pushed:?}");
    assert!(wait_until(Duration::from_secs(20), || out
        .lock()
        .unwrap()
        .contains("profiles are arriving from 1 services")));
    std::thread::sleep(Duration::from_secs(3));
    interrupt(child.id());
    assert!(child.wait().unwrap().success());
    let err = err.lock().unwrap();
    assert!(
        !err.contains("profiles stored") && !err.contains('\r') && !err.contains('\x1b'),
        "{err:?}"
    );
}

/// `nobody` may not sample the whole host while `kernel.perf_event_paranoid` is above 0.
/// `None` when this test cannot switch users (not root), or the host allows everyone.
fn as_nobody() -> Option<Vec<String>> {
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse::<i32>()
        .ok()?;
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let wrap: Vec<String> = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ]
    .map(String::from)
    .to_vec();
    // The binary must be reachable by nobody (a target directory under /root is not).
    let reachable = root
        && Command::new(&wrap[0])
            .args(&wrap[1..])
            .args([EMBER, "--version"])
            .output()
            .is_ok_and(|o| o.status.success());
    if paranoid <= 0 || !reachable {
        eprintln!(
            "!!!!!!!! SKIPPING: needs root to run as nobody, an ember binary nobody can run, \
             and kernel.perf_event_paranoid > 0 (it is {paranoid}) !!!!!!!!"
        );
        return None;
    }
    Some(wrap)
}

/// A data directory nobody can write (removed when the guard drops).
fn nobody_dir(name: &str) -> tempfile::TempDir {
    let dir = server_util::temp_dir(name);
    let ok = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(ok.success());
    dir
}

#[test]
fn without_permission_up_says_so_once_and_keeps_serving() {
    let Some(wrap) = as_nobody() else {
        return;
    };
    let dir = nobody_dir("up-nobody");
    let port = agent_util::free_port();
    let mut child = Command::new(&wrap[0])
        .args(&wrap[1..])
        .args([EMBER, "up", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--agent-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = drain(child.stderr.take().unwrap());
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first.trim(), format!("UI/API: http://127.0.0.1:{port}"));
    // It serves: ready, and a pushed profile is stored.
    let addr = format!("127.0.0.1:{port}");
    let (status, _) = server_util::http(&addr, "GET", "/ready", &[], b"");
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_secs(3));
    interrupt(child.id());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let err = err.lock().unwrap().clone();
    assert_eq!(err.matches("HOST PROFILING IS OFF").count(), 1, "{err}");
    // What is missing and the one advice, the README's.
    assert!(
        err.contains("kernel.perf_event_paranoid is ")
            && err.contains("root, CAP_PERFMON, or kernel.perf_event_paranoid <= 0")
            && err.contains("sudo sysctl -w kernel.perf_event_paranoid=0"),
        "{err}"
    );
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    assert!(
        readme.contains("sudo sysctl -w kernel.perf_event_paranoid=0")
            && !readme.contains("perf_event_paranoid=-1"),
        "the README gives other advice"
    );
    // Said once: the profiler never tried (no second error from the agent).
    assert!(!err.contains("host profiling disabled"), "{err}");
}

#[test]
fn without_permission_up_exits_when_host_profiling_was_asked_for() {
    let Some(wrap) = as_nobody() else {
        return;
    };
    let dir = nobody_dir("up-nobody-asked");
    let config = dir.path().join("agent.yaml");
    std::fs::write(&config, "profiling: {enabled: true}\n").unwrap();
    for asked in [
        vec!["--host-profiling", "on"],
        vec!["--sample-rate", "49"],
        vec!["--config", config.to_str().unwrap()],
    ] {
        let started = Instant::now();
        let out = Command::new(&wrap[0])
            .args(&wrap[1..])
            .args([EMBER, "up", "--listen", "127.0.0.1:0"])
            .args(["--agent-listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(&asked)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{asked:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            err.contains("host profiling was asked for")
                && err.contains("sudo sysctl -w kernel.perf_event_paranoid=0"),
            "{asked:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "nothing served: {asked:?}");
    }
}
