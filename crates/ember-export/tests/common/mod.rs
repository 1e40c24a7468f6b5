//! Shared test helpers: real perf-script corpora parsed into exporter events,
//! scheduler switches derived from them, python tool detection, and real
//! storage servers (`moto_server`, emulators) on free loopback ports.
#![allow(dead_code)]

use ember_export::{Event, Frame, PerfCollector, PerfCollectorConfig, Sample, SchedSwitch};
use futures_util::StreamExt;
use object_store::{ObjectStore, ObjectStoreExt};
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Root of the shared corpora.
pub fn corpora() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.join("../../tests/data/corpora")
}

/// Parses `perf script` text (header `comm pid/tid [cpu] secs.frac: ...`,
/// tab-indented frames `addr sym[+off] (module)`) into samples.
pub fn parse_perf_script(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    let mut cur: Option<Sample> = None;
    let mut names: HashMap<String, Arc<str>> = HashMap::new();
    let mut intern = |s: &str| -> Arc<str> {
        names
            .entry(s.to_string())
            .or_insert_with(|| Arc::from(s))
            .clone()
    };
    for line in text.lines() {
        if line.trim().is_empty() {
            if let Some(s) = cur.take() {
                out.push(s);
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            let Some(s) = cur.as_mut() else { continue };
            let t = line.trim();
            let (addr, rest) = t.split_once(' ').unwrap_or((t, ""));
            let address = u64::from_str_radix(addr, 16).unwrap_or(0);
            let (sym, module) = match rest.rfind(" (") {
                Some(i) => (&rest[..i], rest[i + 2..].trim_end_matches(')')),
                None => (rest, "[unknown]"),
            };
            let frame = if sym == "[unknown]" || sym.is_empty() {
                Frame::unknown(address, module)
            } else {
                match sym.rsplit_once("+0x") {
                    Some((name, off)) if u64::from_str_radix(off, 16).is_ok() => Frame::known(
                        address,
                        name,
                        u64::from_str_radix(off, 16).unwrap_or(0),
                        module,
                    ),
                    _ => Frame {
                        address,
                        function: intern(sym),
                        offset: None,
                        module: intern(module),
                    },
                }
            };
            s.frames.push(frame);
            continue;
        }
        // Header: comm may contain spaces; the pid/tid token is followed by
        // "[cpu]" and then the time.
        let toks: Vec<&str> = line.split_whitespace().collect();
        let Some(i) = toks.iter().position(|t| {
            let mut parts = t.split('/');
            parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        }) else {
            continue;
        };
        let (pid, tid) = match toks[i].split_once('/') {
            Some((p, t)) => (p.parse().unwrap_or(0), t.parse().unwrap_or(0)),
            None => {
                let t = toks[i].parse().unwrap_or(0);
                (t, t)
            }
        };
        let mut cpu = 0;
        let mut time_ns = 0;
        for t in &toks[i + 1..] {
            if let Some(c) = t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                cpu = c.parse().unwrap_or(0);
            } else if let Some(ts) = t.strip_suffix(':')
                && let Some((s, f)) = ts.split_once('.')
                && let (Ok(s), Ok(_)) = (s.parse::<u64>(), f.parse::<u64>())
            {
                let frac = format!("{f:0<9}");
                time_ns = s * 1_000_000_000 + frac[..9].parse::<u64>().unwrap_or(0);
                break;
            }
        }
        if let Some(s) = cur.take() {
            out.push(s);
        }
        cur = Some(Sample {
            time_ns,
            cpu,
            pid,
            tid,
            comm: intern(&toks[..i].join(" ")),
            frames: Vec::new(),
        });
    }
    if let Some(s) = cur.take() {
        out.push(s);
    }
    out
}

/// The iperf corpus: 1 process, several threads, with cpu and timestamps.
pub fn iperf_samples() -> Vec<Sample> {
    let path = corpora().join("FlameGraph/test/perf-iperf-stacks-pidtid-01.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let samples = parse_perf_script(&text);
    assert!(
        samples.len() > 100,
        "corpus parsed into {} samples",
        samples.len()
    );
    samples
}

/// Scheduler switches implied by the samples: whenever consecutive samples
/// on one CPU come from different threads, one switched to the other.
pub fn switches_from(samples: &[Sample]) -> Vec<SchedSwitch> {
    let mut sorted: Vec<&Sample> = samples.iter().collect();
    sorted.sort_by_key(|s| s.time_ns);
    let mut last: HashMap<u32, &Sample> = HashMap::new();
    let mut out = Vec::new();
    for s in sorted {
        if let Some(prev) = last.get(&s.cpu)
            && prev.tid != s.tid
        {
            out.push(SchedSwitch {
                time_ns: s.time_ns.saturating_sub(1),
                cpu: s.cpu,
                prev_pid: prev.tid as i32,
                prev_comm: prev.comm.clone(),
                prev_prio: Some(120),
                prev_state: Some(1),
                next_pid: s.tid as i32,
                next_comm: s.comm.clone(),
                next_prio: Some(120),
            });
        }
        last.insert(s.cpu, s);
    }
    out
}

/// All events (samples and their switches).
pub fn events_of(samples: &[Sample]) -> Vec<Event> {
    let mut ev: Vec<Event> = samples.iter().cloned().map(Event::Sample).collect();
    ev.extend(switches_from(samples).into_iter().map(Event::Switch));
    ev
}

/// Folded stacks of samples: `comm;root;...;leaf` → count, the way
/// `stackcollapse-perf.pl` names frames (function, or `[unknown]`).
pub fn fold(samples: &[Sample], with_comm: bool) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for s in samples {
        let mut parts: Vec<String> = Vec::new();
        if with_comm {
            parts.push(s.comm.replace(' ', "_"));
        }
        for f in s.frames.iter().rev() {
            parts.push(collapse_name(f));
        }
        *out.entry(parts.join(";")).or_insert(0) += 1;
    }
    out
}

/// How stackcollapse-perf.pl names a frame: the function, or for an
/// unsymbolized one the module's file name in brackets.
pub fn collapse_name(f: &Frame) -> String {
    if !f.function.is_empty() {
        return f.function.to_string();
    }
    let m = f.module.rsplit('/').next().unwrap_or("");
    if m.is_empty() || m == "[unknown]" {
        "[unknown]".to_string()
    } else {
        format!("[{m}]")
    }
}

/// Python import check. Missing modules skip the test locally (with a
/// printed reason) but fail it under CI, which installs them.
pub fn python_has(module_check: &str, pip_hint: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", module_check])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    require(
        ok,
        &format!("the python module ({module_check})"),
        &format!("pip install {pip_hint}"),
    )
}

/// Whether a test's external tool is `present`: if not, the test is skipped
/// locally with a printed reason, but fails under CI, whose `.ci/setup`
/// installs it.
pub fn require(present: bool, what: &str, install_hint: &str) -> bool {
    if !present {
        if std::env::var_os("CI").is_some() {
            panic!("CI must provide {what}: {install_hint} (see .ci/setup)");
        }
        eprintln!("SKIPPED: {what} is missing; install with: {install_hint}");
    }
    present
}

/// Folded stacks of a perf-script dump (gzip'd or not), by ember_collapse.
pub fn folded_dump(bytes: &[u8]) -> BTreeMap<String, u64> {
    let opts = ember_collapse::CollapseOptions {
        threads: 1,
        ..Default::default()
    };
    ember_collapse::collapse(bytes, &opts)
        .expect("collapse")
        .stacks
        .into_iter()
        .collect()
}

/// A server child process on 127.0.0.1:port (an emulator), its output in a
/// log file quoted when it fails to come up; killed on drop.
pub struct Server {
    child: Option<Child>,
    log: PathBuf,
    /// Its port.
    pub port: u16,
}

impl Server {
    /// Spawns `cmd` (which must listen on `port`) and waits until it answers
    /// an HTTP request, whatever the status (up to 120 s: node loading
    /// Azurite's 450 packages from a cold disk on a busy 2-core machine is
    /// slow). Panics, with the server's output, if it exits or does not
    /// answer in time.
    pub fn start(name: &'static str, mut cmd: Command, port: u16, log: PathBuf) -> Server {
        let out = std::fs::File::create(&log).expect("server log file");
        let err = out.try_clone().expect("server log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let mut server = Server {
            child: Some(child),
            log,
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok((status, _)) = http(port, "GET", "/")
                && status != 0
            {
                return server;
            }
            let exited = server
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                panic!(
                    "{name} exited ({status}) before answering on port {port}:\n{}",
                    server.output()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "{name} did not answer on port {port} within 120 s:\n{}",
                    server.output()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What the server printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills the server and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A plain HTTP/1.1 request to 127.0.0.1:port; returns (status, body).
pub fn http(port: u16, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|b| b.1.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// A `moto_server` child process on 127.0.0.1:port (a [`Server`], so a start
/// that fails shows moto's own output).
pub struct Moto {
    server: Server,
    /// Its port.
    pub port: u16,
    /// Where its log is written; removed after the server (declared after it).
    _logs: tempfile::TempDir,
}

impl Moto {
    /// Starts moto_server and waits until it answers.
    pub fn start(port: u16) -> Moto {
        let mut cmd = Command::new("moto_server");
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]);
        let logs = scratch(&format!("moto-{port}"));
        Moto {
            server: Server::start("moto_server", cmd, port, logs.path().join("moto.log")),
            port,
            _logs: logs,
        }
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        let (status, body) = http(self.port, "PUT", &format!("/{bucket}")).expect("PUT bucket");
        assert_eq!(status, 200, "create bucket {bucket}: {body}");
    }

    /// Stops the server and waits for it to exit.
    pub fn stop(&mut self) {
        self.server.stop();
    }
}

/// A fresh empty folder under the target dir.
/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
pub fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-export-test-{name}-"))
        .tempdir()
        .expect("temp dir")
}

/// Every key in `store`, sorted.
pub async fn keys(store: &dyn ObjectStore) -> Vec<String> {
    let mut keys = Vec::new();
    let mut it = store.list(None);
    while let Some(meta) = it.next().await {
        keys.push(meta.unwrap().location.to_string());
    }
    keys.sort();
    keys
}

/// The bytes of `key` in `store`.
pub async fn object(store: &dyn ObjectStore, key: &str) -> Vec<u8> {
    store
        .get(&object_store::path::Path::from(key))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

/// The perf collector of the bucket-outage tests: dumps to `export_to` under
/// `perf/node-1`, spooled in `spool`, at most two kept while uploads fail.
pub fn outage_collector(export_to: &str, spool: &Path) -> Arc<PerfCollector> {
    PerfCollector::new(PerfCollectorConfig {
        export_to: export_to.to_string(),
        bucket_subdirectory: "perf".into(),
        node_name: Some("node-1".into()),
        local_dir: Some(spool.to_path_buf()),
        max_dumps_retained: 2,
        ..Default::default()
    })
    .unwrap()
}

/// Hands `samples` to the collector.
pub fn push_all(pc: &PerfCollector, samples: &[Sample]) {
    for s in samples {
        pc.push(s.clone());
    }
}

/// Outage test, step 1, the bucket up: a dump of `chunk` is uploaded to
/// `cluster-a/perf/node-1/` and deleted locally. Returns its file name.
pub async fn dump_while_up(
    pc: &PerfCollector,
    chunk: &[Sample],
    spool: &Path,
    bucket: &dyn ObjectStore,
) -> String {
    push_all(pc, chunk);
    let r = pc.dump().await.unwrap();
    assert_eq!(r.upload_error, None);
    let first = r.written.clone().unwrap();
    let first_key = format!("cluster-a/perf/node-1/{first}");
    assert_eq!(keys(bucket).await, vec![first_key.clone()]);
    assert!(
        first.ends_with("-perf-data.gz") && first.len() == "YYYYMMDDTHHMMSS-perf-data.gz".len()
    );
    assert_eq!(
        folded_dump(&object(bucket, &first_key).await),
        fold(chunk, true)
    );
    assert_eq!(std::fs::read_dir(spool).unwrap().count(), 0);
    first
}

/// Outage test, step 2, the bucket unreachable: a dump per chunk stays
/// local, at most two, the oldest dropped and counted. Returns the names of
/// all the dumps written.
pub async fn dumps_while_down(
    pc: &PerfCollector,
    chunks: &[&[Sample]],
    spool: &Path,
) -> Vec<String> {
    let mut kept = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        // Dump names have a one-second resolution.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        push_all(pc, chunk);
        let r = pc.dump().await.unwrap();
        assert!(
            r.upload_error.is_some(),
            "upload should fail while the bucket is down"
        );
        assert!(r.uploaded.is_empty());
        kept.push(r.written.unwrap());
        let local = std::fs::read_dir(spool).unwrap().count();
        assert_eq!(
            local,
            (i + 1).min(2),
            "local dumps after outage dump {}",
            i + 1
        );
    }
    let stats = pc.stats();
    assert_eq!(stats.dumps_dropped, 1, "{stats:?}");
    assert_eq!(stats.pending, 2);
    assert!(stats.upload_errors >= 3);
    kept
}

/// Outage test, step 3, the bucket back (empty): the two dumps retained of
/// `written` (made of `chunks`) are uploaded, oldest first, and deleted.
pub async fn dump_after_outage(
    pc: &PerfCollector,
    written: &[String],
    chunks: &[&[Sample]],
    spool: &Path,
    bucket: &dyn ObjectStore,
) {
    let r = pc.dump().await.unwrap();
    assert_eq!(r.upload_error, None);
    assert_eq!(r.written, None);
    let want: Vec<String> = written[written.len() - 2..]
        .iter()
        .map(|n| format!("cluster-a/perf/node-1/{n}"))
        .collect();
    assert_eq!(r.uploaded, want);
    assert_eq!(keys(bucket).await, want);
    for (key, chunk) in want.iter().zip(&chunks[chunks.len() - 2..]) {
        assert_eq!(folded_dump(&object(bucket, key).await), fold(chunk, true));
    }
    assert_eq!(std::fs::read_dir(spool).unwrap().count(), 0);
    assert_eq!(pc.stats().pending, 0);
}
