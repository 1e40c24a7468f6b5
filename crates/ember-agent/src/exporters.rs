//! The bucket exporters as the agent runs them: `exporters.perf_collector` (periodic gzip'd
//! `perf script` dumps) and `exporters.perfetto_daemon` (a ring of recent samples and
//! scheduler switches, snapshotted into Perfetto traces on a trigger).
//!
//! This module owns their lifecycle (start, replace on reload, final flush on shutdown), the
//! [`Taps`] through which the profiler thread feeds them, the per-CPU thinning that brings the
//! sampler's frequency down to each exporter's own, and their figures for `/metrics`.
//!
//! Frequencies: the agent runs one sampler per host. It samples at the highest frequency any
//! enabled consumer asks for (`profiling.cpu.sample_rate_hz`, `perf_polling_frequency_hz`,
//! the `linux.perf` frequency of the Perfetto `config_text`). Each bucket exporter then keeps,
//! per CPU, at most its own frequency's worth of samples ([`Thinner`]); the server profiles
//! keep every sample (their pprof period says how much CPU time one sample stands for).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ember_export::{
    Event, PerfCollector, PerfCollectorConfig, PerfettoDaemon, PerfettoDaemonConfig,
    PerfettoTrigger, RunningDaemon,
};

/// Where the profiler thread hands raw events, one handle per configured bucket exporter.
#[derive(Clone, Default)]
pub struct Taps {
    /// The perf_collector, when configured.
    pub perf: Option<Arc<PerfCollector>>,
    /// The perfetto_daemon, when configured.
    pub perfetto: Option<Arc<PerfettoDaemon>>,
}

impl std::fmt::Debug for Taps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Taps").finish_non_exhaustive()
    }
}

impl Taps {
    /// Whether no bucket exporter is configured.
    pub fn is_empty(&self) -> bool {
        self.perf.is_none() && self.perfetto.is_none()
    }

    /// Whether the sampler must time scheduler switches (the Perfetto trace shows them).
    pub fn wants_switches(&self) -> bool {
        self.perfetto.is_some()
    }

    /// The perf_collector's sampling frequency in Hz.
    pub fn perf_hz(&self) -> Option<u32> {
        self.perf
            .as_ref()
            .map(|p| p.config().perf_polling_frequency_hz)
    }

    /// The perfetto_daemon's sampling frequency in Hz: the `linux.perf` timebase frequency of
    /// its config_text, else [`DEFAULT_PERFETTO_HZ`].
    pub fn perfetto_hz(&self) -> Option<u32> {
        self.perfetto.as_ref().map(|d| {
            d.trace_config()
                .sampling_frequency_hz
                .map_or(DEFAULT_PERFETTO_HZ, |hz| {
                    u32::try_from(hz.clamp(1, 10_000)).unwrap_or(DEFAULT_PERFETTO_HZ)
                })
        })
    }
}

/// Sampling frequency of the perfetto_daemon when its config_text names none.
pub const DEFAULT_PERFETTO_HZ: u32 = 99;

/// Keeps `hz` samples per second on each CPU out of a faster stream. Kept samples are
/// phase-locked to a `1/hz` schedule per CPU (a sample up to 5 % of that period early still
/// counts, which absorbs the sampler's jitter), so the long-run rate is `hz` exactly, not
/// rounded up to a whole number of source periods.
#[derive(Debug, Default)]
pub struct Thinner {
    period_ns: u64,
    slack_ns: u64,
    next: HashMap<u32, u64>,
}

impl Thinner {
    /// A thinner from `source_hz` down to `hz`; keeps everything when `hz >= source_hz`.
    pub fn new(hz: u32, source_hz: u32) -> Thinner {
        let period_ns = if hz == 0 || hz >= source_hz {
            0
        } else {
            1_000_000_000 / u64::from(hz)
        };
        Thinner {
            period_ns,
            slack_ns: period_ns / 20,
            next: HashMap::new(),
        }
    }

    /// Whether the sample at `time_ns` on `cpu` is kept.
    pub fn keep(&mut self, cpu: u32, time_ns: u64) -> bool {
        if self.period_ns == 0 {
            return true;
        }
        let (period, slack) = (self.period_ns, self.slack_ns);
        let next = match self.next.get(&cpu).copied() {
            // First sample of this CPU, or a timestamp from well before the schedule (a ring
            // drained late): start the schedule here.
            None => time_ns + period,
            Some(due) if time_ns + period + slack < due => time_ns + period,
            Some(due) if time_ns + slack < due => return false,
            // After a gap (idle CPU) the schedule restarts instead of catching up.
            Some(due) if time_ns >= due + period => time_ns + period,
            Some(due) => due + period,
        };
        self.next.insert(cpu, next);
        true
    }
}

/// The profiler thread's side of the taps: thins and hands events over. Every call is a
/// short mutex-protected push; no I/O happens on the sampling thread.
pub struct Feeder {
    taps: Taps,
    perf_thin: Thinner,
    perfetto_thin: Thinner,
}

impl std::fmt::Debug for Feeder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feeder").finish_non_exhaustive()
    }
}

impl Feeder {
    /// A feeder for `taps` whose sampler runs at `sampler_hz`.
    pub fn new(taps: Taps, sampler_hz: u32) -> Feeder {
        let perf_thin = Thinner::new(taps.perf_hz().unwrap_or(sampler_hz), sampler_hz);
        let perfetto_thin = Thinner::new(taps.perfetto_hz().unwrap_or(sampler_hz), sampler_hz);
        Feeder {
            taps,
            perf_thin,
            perfetto_thin,
        }
    }

    /// Whether there is anything to feed.
    pub fn is_empty(&self) -> bool {
        self.taps.is_empty()
    }

    /// Hands symbolized events (time-ordered) to the exporters: samples to both (thinned),
    /// scheduler switches to the Perfetto ring only.
    pub fn feed(&mut self, events: Vec<Event>) {
        for event in events {
            match event {
                Event::Sample(s) => {
                    let to_perfetto =
                        self.taps.perfetto.is_some() && self.perfetto_thin.keep(s.cpu, s.time_ns);
                    if let Some(p) = &self.taps.perf
                        && self.perf_thin.keep(s.cpu, s.time_ns)
                    {
                        if to_perfetto {
                            p.push(s.clone());
                        } else {
                            p.push(s);
                            continue;
                        }
                    }
                    if to_perfetto && let Some(d) = &self.taps.perfetto {
                        d.push(Event::Sample(s));
                    }
                }
                Event::Switch(sw) => {
                    if let Some(d) = &self.taps.perfetto {
                        d.push(Event::Switch(sw));
                    }
                }
            }
        }
    }
}

/// The running bucket exporters of an agent.
#[derive(Default)]
pub struct Running {
    perf: Option<(Arc<PerfCollector>, tokio::task::JoinHandle<()>)>,
    perfetto: Option<(Arc<PerfettoDaemon>, RunningDaemon)>,
    /// The HTTP trigger's socket and the `http_listen` it is bound to: kept across reloads
    /// so `ember profiling perfetto-snapshot` never meets a closed port while one daemon
    /// replaces another.
    trigger_socket: Option<(String, std::net::TcpListener)>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").finish_non_exhaustive()
    }
}

/// Exporters built from a new configuration, not started yet (so a failure leaves the
/// running ones untouched).
pub struct Prepared {
    perf: Option<Option<Arc<PerfCollector>>>,
    perfetto: Option<Option<Arc<PerfettoDaemon>>>,
    trigger_socket: Option<Option<(String, std::net::TcpListener)>>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").finish_non_exhaustive()
    }
}

/// Builds the exporters whose configuration changed (`None` in a field = unchanged).
pub fn prepare(
    running: &Running,
    perf: Option<&Option<PerfCollectorConfig>>,
    perfetto: Option<&Option<PerfettoDaemonConfig>>,
) -> Result<Prepared, String> {
    let perf = perf
        .map(|c| {
            c.clone()
                .map(PerfCollector::new)
                .transpose()
                .map_err(|e| format!("exporters.perf_collector: {e}"))
        })
        .transpose()?;
    let mut trigger_socket = None;
    let perfetto = match perfetto {
        None => None,
        Some(c) => {
            let daemon = c
                .clone()
                .map(PerfettoDaemon::new)
                .transpose()
                .map_err(|e| format!("exporters.perfetto_daemon: {e}"))?;
            let wanted = daemon
                .as_ref()
                .filter(|d| d.config().trigger == PerfettoTrigger::Http)
                .map(|d| d.config().http_listen.clone());
            let kept = running.trigger_socket.as_ref().map(|(a, _)| a);
            if wanted.as_ref() != kept {
                trigger_socket = Some(match wanted {
                    Some(addr) => {
                        let socket = ember_export::bind_trigger(&addr)
                            .map_err(|e| format!("exporters.perfetto_daemon.http_listen: {e}"))?;
                        Some((addr, socket))
                    }
                    None => None,
                });
            }
            Some(daemon)
        }
    };
    Ok(Prepared {
        perf,
        perfetto,
        trigger_socket,
    })
}

impl Running {
    /// Swaps in what `prepared` holds: stops replaced exporters (a replaced perf_collector
    /// still writes and uploads the window it holds, in the background) and starts the new
    /// ones. Must run inside a tokio runtime.
    pub fn install(&mut self, prepared: Prepared) -> Result<(), String> {
        if let Some(perf) = prepared.perf {
            if let Some((old, task)) = self.perf.take() {
                task.abort();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(30), old.dump()).await;
                });
            }
            self.perf = perf.map(|p| {
                let task = p.spawn();
                (p, task)
            });
        }
        if let Some(socket) = prepared.trigger_socket {
            self.trigger_socket = socket;
        }
        if let Some(perfetto) = prepared.perfetto {
            if let Some((_, old)) = self.perfetto.take() {
                old.task.abort();
            }
            if let Some(d) = perfetto {
                let socket = match &self.trigger_socket {
                    Some((_, s)) if d.config().trigger == PerfettoTrigger::Http => Some(
                        s.try_clone()
                            .map_err(|e| format!("exporters.perfetto_daemon.http_listen: {e}"))?,
                    ),
                    _ => None,
                };
                let started = d
                    .spawn(socket)
                    .map_err(|e| format!("exporters.perfetto_daemon: {e}"))?;
                if let Some(addr) = started.http_addr {
                    tracing::info!(
                        url = %format_args!("http://{addr}{}", ember_export::perfetto_daemon::TRIGGER_PATH),
                        "perfetto_daemon HTTP trigger"
                    );
                }
                self.perfetto = Some((d, started));
            }
        }
        Ok(())
    }

    /// What the profiler thread should feed.
    pub fn taps(&self) -> Taps {
        Taps {
            perf: self.perf.as_ref().map(|(p, _)| p.clone()),
            perfetto: self.perfetto.as_ref().map(|(d, _)| d.clone()),
        }
    }

    /// Figures for `/metrics`.
    pub fn stats(&self) -> BucketStats {
        BucketStats {
            perf: self.perf.as_ref().map(|(p, _)| p.stats()),
            perfetto: self.perfetto.as_ref().map(|(d, _)| d.stats()),
        }
    }

    /// Stops the triggers and timers; returns the exporters for a final flush.
    pub fn stop(&mut self) -> Taps {
        let taps = self.taps();
        if let Some((_, task)) = self.perf.take() {
            task.abort();
        }
        if let Some((_, d)) = self.perfetto.take() {
            d.task.abort();
        }
        self.trigger_socket = None;
        taps
    }
}

/// Final flush at shutdown, within `within`: the perf_collector writes the window it holds
/// and uploads what is pending; a perfetto_daemon on the time-interval trigger takes a last
/// snapshot (an HTTP-triggered one only snapshots on request). Returns whether both
/// finished in time.
pub async fn flush(taps: Taps, within: Duration) -> bool {
    let perf = async {
        match &taps.perf {
            Some(p) => {
                let dump = finished(within, p.dump(), "perf_collector final dump").await;
                dump.is_some_and(|r| r.upload_error.is_none())
            }
            None => true,
        }
    };
    let perfetto = async {
        match &taps.perfetto {
            Some(d) if d.config().trigger == PerfettoTrigger::TimeInterval => {
                let snapshot =
                    finished(within, d.snapshot(), "perfetto_daemon final snapshot").await;
                snapshot.is_some_and(|r| r.upload_error.is_none())
            }
            _ => true,
        }
    };
    let (a, b) = tokio::join!(perf, perfetto);
    a && b
}

/// The result of `work` if it succeeded within `within`; an error is logged as `what`.
async fn finished<R, E: std::fmt::Display>(
    within: Duration,
    work: impl std::future::Future<Output = Result<R, E>>,
    what: &str,
) -> Option<R> {
    match tokio::time::timeout(within, work).await {
        Ok(Ok(r)) => Some(r),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "{what}");
            None
        }
        Err(_) => None,
    }
}

/// Counters of the bucket exporters, `None` where one is not configured.
#[derive(Debug, Clone, Copy, Default)]
pub struct BucketStats {
    /// perf_collector counters.
    pub perf: Option<ember_export::PerfCollectorStats>,
    /// perfetto_daemon counters.
    pub perfetto: Option<ember_export::PerfettoDaemonStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinner_keeps_the_target_rate_per_cpu() {
        // 99 Hz source (10.1 ms apart) on two CPUs for 10 s, thinned to 19 Hz.
        let mut t = Thinner::new(19, 99);
        let mut kept = [0u32; 2];
        for i in 0..990u64 {
            for cpu in 0..2u32 {
                let time = 1_000_000_000 + i * 10_101_010 + u64::from(cpu) * 3_000_000;
                if t.keep(cpu, time) {
                    kept[cpu as usize] += 1;
                }
            }
        }
        for k in kept {
            // 19 Hz over 10 s.
            assert!((189..=191).contains(&k), "kept {k}");
        }
        let mut all = Thinner::new(99, 99);
        assert!((0..100u64).all(|i| all.keep(0, i * 10_000_000)));
        let mut faster = Thinner::new(200, 99);
        assert!((0..100u64).all(|i| faster.keep(0, i * 10_000_000)));
    }

    /// A fresh, empty directory for one test, removed with its content when dropped (when the
    /// test that holds it ends), so test runs leave nothing behind in the temp directory.
    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("ember-agent-exporters-{name}-"))
            .tempdir()
            .expect("temp dir")
    }

    fn sample(time_ns: u64, cpu: u32) -> ember_export::Sample {
        ember_export::Sample {
            time_ns,
            cpu,
            pid: 42,
            tid: 42,
            comm: Arc::from("worker"),
            frames: vec![
                ember_export::Frame::known(0x1010, "leaf_fn", 0x10, "/bin/worker"),
                ember_export::Frame::known(0x2020, "main", 0x20, "/bin/worker"),
            ],
        }
    }

    fn files(dir: &std::path::Path) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn feeder_thins_and_shutdown_flush_writes_both_exporters() {
        let dir = scratch("flush");
        let dir = dir.path();
        let perf = PerfCollector::new(PerfCollectorConfig {
            perf_polling_frequency_hz: 10,
            export_to: format!("file://{}/bucket", dir.display()),
            node_name: Some("n1".into()),
            local_dir: Some(dir.join("spool")),
            ..Default::default()
        })
        .unwrap();
        let perfetto = PerfettoDaemon::new(PerfettoDaemonConfig {
            export_to: format!("file://{}/bucket", dir.display()),
            bucket_subdirectory: "pf".into(),
            node_name: Some("n1".into()),
            local_dir: Some(dir.join("runs")),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(perfetto.config().trigger, PerfettoTrigger::TimeInterval);
        let taps = Taps {
            perf: Some(perf.clone()),
            perfetto: Some(perfetto.clone()),
        };
        assert_eq!(taps.perf_hz(), Some(10));
        // The default config_text samples at 99 Hz.
        assert_eq!(taps.perfetto_hz(), Some(99));
        // One second of a 100 Hz stream on one CPU plus a scheduler switch.
        let mut feeder = Feeder::new(taps.clone(), 100);
        let mut events: Vec<Event> = (0..100u64)
            .map(|i| Event::Sample(sample(1_000_000_000 + i * 10_000_000, 0)))
            .collect();
        events.push(Event::Switch(ember_export::SchedSwitch {
            time_ns: 1_500_000_000,
            cpu: 0,
            prev_pid: 42,
            prev_comm: Arc::from("worker"),
            prev_prio: None,
            prev_state: Some(1),
            next_pid: 0,
            next_comm: Arc::from("swapper/0"),
            next_prio: None,
        }));
        feeder.feed(events);
        // 10 Hz keeps 10 of the 100 samples, 99 Hz keeps 99; the switch is always kept.
        assert_eq!(perfetto.stats().buffered_events, 100);
        assert!(flush(taps, Duration::from_secs(10)).await);
        let perf_stats = perf.stats();
        assert_eq!(
            (perf_stats.dumps_written, perf_stats.dumps_uploaded),
            (1, 1)
        );
        let dumps = files(&dir.join("bucket/n1"));
        assert_eq!(dumps.len(), 1, "{dumps:?}");
        let text = {
            use std::io::Read;
            let gz = std::fs::read(dir.join("bucket/n1").join(&dumps[0])).unwrap();
            let mut out = String::new();
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_string(&mut out)
                .unwrap();
            out
        };
        assert_eq!(text.matches("leaf_fn").count(), 10, "{text}");
        let p = perfetto.stats();
        assert_eq!((p.snapshots, p.uploaded, p.buffered_events), (1, 1, 0));
        let traces = files(&dir.join("bucket/pf/n1"));
        assert_eq!(traces.len(), 1, "{traces:?}");
        assert!(traces[0].ends_with("-perfetto-trace.pb"), "{traces:?}");
    }

    #[test]
    fn thinner_survives_time_going_backwards() {
        let mut t = Thinner::new(10, 100);
        assert!(t.keep(0, 5_000_000_000));
        assert!(!t.keep(0, 5_010_000_000));
        // 5 % early still counts.
        assert!(t.keep(0, 5_096_000_000));
        // An older timestamp (another ring drained late) is kept and restarts the schedule.
        assert!(t.keep(0, 4_000_000_000));
        assert!(!t.keep(0, 4_050_000_000));
        // After a long idle gap the schedule restarts rather than catching up.
        assert!(t.keep(0, 9_000_000_000));
        assert!(!t.keep(0, 9_010_000_000));
    }
}
