//! The agent's self-observability: counters shared by its components, per-target scrape
//! state, and their rendering as Prometheus text for `/metrics`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ember_telemetry::{Exposition, MetricType};

/// Counters of the continuous profiler.
#[derive(Debug, Default)]
pub struct ProfilerCounters {
    /// Samples taken.
    pub samples: AtomicU64,
    /// Samples the kernel reported lost (ring buffer overflow).
    pub lost: AtomicU64,
    /// Profiles produced (one per process per upload interval).
    pub profiles: AtomicU64,
    /// Processes dropped by target filters or relabel rules in the last cut.
    pub filtered_processes: AtomicU64,
    /// 1 while the sampler runs.
    pub running: AtomicU64,
    /// Sampler start failures (permissions, ...).
    pub errors: AtomicU64,
}

/// State of one scrape target and profile type.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ScrapeState {
    /// Job name.
    pub job: String,
    /// `host:port`.
    pub instance: String,
    /// Profile type key (`process_cpu`, `memory`, `custom:NAME`...).
    pub profile_type: String,
    /// Whether the last scrape succeeded.
    pub up: bool,
    /// Successful scrapes.
    pub successes: u64,
    /// Failed scrapes.
    pub failures: u64,
    /// Profiles sent (the first scrape of a delta type only primes it).
    pub profiles_sent: u64,
    /// Error of the last failed scrape (kept until the next success).
    pub last_error: Option<String>,
    /// Duration of the last scrape in seconds.
    pub last_duration_seconds: f64,
    /// Unix time of the last scrape (seconds).
    pub last_scrape_unix: f64,
}

/// All of the agent's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Continuous profiler counters.
    pub profiler: ProfilerCounters,
    /// Scrape states by (job, instance, profile type).
    pub scrapes: Mutex<BTreeMap<(String, String, String), ScrapeState>>,
    /// Successful configuration reloads.
    pub reloads: AtomicU64,
    /// Rejected configuration reloads.
    pub reload_failures: AtomicU64,
}

impl Metrics {
    /// Updates one scrape state.
    pub fn scrape(
        &self,
        job: &str,
        instance: &str,
        profile_type: &str,
        update: impl FnOnce(&mut ScrapeState),
    ) {
        let mut map = self.scrapes.lock().unwrap_or_else(|p| p.into_inner());
        let key = (
            job.to_string(),
            instance.to_string(),
            profile_type.to_string(),
        );
        let entry = map.entry(key).or_insert_with(|| ScrapeState {
            job: job.into(),
            instance: instance.into(),
            profile_type: profile_type.into(),
            ..ScrapeState::default()
        });
        update(entry);
    }

    /// Forgets scrape states of targets no longer configured.
    pub fn retain_scrapes(&self, keep: impl Fn(&str, &str) -> bool) {
        let mut map = self.scrapes.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|(job, instance, _), _| keep(job, instance));
    }

    /// Snapshot of every scrape state.
    pub fn scrape_states(&self) -> Vec<ScrapeState> {
        let map = self.scrapes.lock().unwrap_or_else(|p| p.into_inner());
        map.values().cloned().collect()
    }

    /// Prometheus text exposition (written by the one writer, [`ember_telemetry`]).
    pub fn render(
        &self,
        push: Option<&ember_push::PushStats>,
        buckets: &crate::exporters::BucketStats,
    ) -> String {
        let mut out = Exposition::new();
        self.describe_own(&mut out);
        describe_push(&mut out, push);
        describe_buckets(&mut out, buckets);
        describe_scrapes(&mut out, &self.scrape_states());
        let (cpu, rss) = own_usage();
        out.gauge(
            "ember_agent_cpu_seconds_total",
            "CPU time (user+system) the agent process used.",
            cpu,
        );
        out.gauge(
            "ember_agent_resident_memory_bytes",
            "Resident memory of the agent process.",
            rss,
        );
        out.render()
    }

    /// The profiler's and the configuration's figures.
    fn describe_own(&self, out: &mut Exposition) {
        let p = &self.profiler;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        out.counter(
            "ember_agent_samples_total",
            "CPU samples taken.",
            load(&p.samples),
        );
        out.counter(
            "ember_agent_lost_samples_total",
            "Samples lost in the kernel ring buffers.",
            load(&p.lost),
        );
        out.counter(
            "ember_agent_profiles_total",
            "Profiles produced by continuous profiling.",
            load(&p.profiles),
        );
        out.gauge(
            "ember_agent_profiler_running",
            "1 while the host sampler runs.",
            load(&p.running),
        );
        out.counter(
            "ember_agent_profiler_errors_total",
            "Sampler start failures.",
            load(&p.errors),
        );
        out.counter(
            "ember_agent_config_reloads_total",
            "Configuration reloads applied.",
            load(&self.reloads),
        );
        out.counter(
            "ember_agent_config_reload_failures_total",
            "Configuration reloads rejected.",
            load(&self.reload_failures),
        );
    }
}

/// One unlabelled family: (name, kind, help, value).
type Row<'a> = (&'a str, MetricType, &'a str, u64);

/// Adds unlabelled families from a table.
fn describe_rows(out: &mut Exposition, rows: &[Row<'_>]) {
    for &(name, kind, help, value) in rows {
        out.family(name, kind, help).sample(&[], value);
    }
}

/// The server exporter's figures (zeros when none is configured).
fn describe_push(out: &mut Exposition, push: Option<&ember_push::PushStats>) {
    use MetricType::{Counter, Gauge};
    let s = push.cloned().unwrap_or_default();
    describe_rows(
        out,
        &[
            (
                "ember_agent_push_enqueued_profiles_total",
                Counter,
                "Profiles queued for the server.",
                s.enqueued_profiles,
            ),
            (
                "ember_agent_push_sent_profiles_total",
                Counter,
                "Profiles the server acknowledged.",
                s.sent_profiles,
            ),
            (
                "ember_agent_push_sent_bytes_total",
                Counter,
                "pprof bytes the server acknowledged.",
                s.sent_bytes,
            ),
            (
                "ember_agent_push_dropped_profiles_total",
                Counter,
                "Profiles dropped because the queue was full (oldest first).",
                s.dropped_profiles,
            ),
            (
                "ember_agent_push_dropped_bytes_total",
                Counter,
                "Bytes dropped because the queue was full.",
                s.dropped_bytes,
            ),
            (
                "ember_agent_push_rejected_profiles_total",
                Counter,
                "Profiles the server refused (4xx).",
                s.rejected_profiles,
            ),
            (
                "ember_agent_push_errors_total",
                Counter,
                "Failed push requests.",
                s.upload_errors,
            ),
            (
                "ember_agent_push_throttled_total",
                Counter,
                "Push requests the server answered 429 (retried after its Retry-After).",
                s.throttled_requests,
            ),
            (
                "ember_agent_push_retry_after_waits_total",
                Counter,
                "Push retries that waited for the server's Retry-After.",
                s.retry_after_waits,
            ),
            (
                "ember_agent_push_queue_profiles",
                Gauge,
                "Profiles waiting to be sent.",
                s.queue_profiles,
            ),
            (
                "ember_agent_push_queue_bytes",
                Gauge,
                "Bytes waiting to be sent.",
                s.queue_bytes,
            ),
        ],
    );
}

/// Per scrape target and profile type: up, results, last error, profiles sent.
fn describe_scrapes(out: &mut Exposition, states: &[ScrapeState]) {
    use MetricType::{Counter, Gauge};
    // Up per target: every profile type of it succeeded last time.
    let mut up: BTreeMap<(&str, &str), bool> = BTreeMap::new();
    for st in states {
        *up.entry((&st.job, &st.instance)).or_insert(true) &= st.up;
    }
    let family = out.family(
        "ember_agent_scrape_target_up",
        Gauge,
        "1 when the last scrape of every profile type of the target succeeded.",
    );
    for ((job, instance), ok) in &up {
        family.sample(&[("job", job), ("instance", instance)], *ok);
    }
    let family = out.family("ember_agent_scrapes_total", Counter, "Scrapes by result.");
    for st in states {
        for (result, v) in [("success", st.successes), ("error", st.failures)] {
            let [job, instance, profile_type] = labels(st);
            family.sample(&[job, instance, profile_type, ("result", result)], v);
        }
    }
    let family = out.family(
        "ember_agent_scrape_up",
        Gauge,
        "1 when the last scrape of this profile type succeeded.",
    );
    for st in states {
        family.sample(&labels(st), st.up);
    }
    let family = out.family(
        "ember_agent_scrape_last_error",
        Gauge,
        "The last scrape error of a failing target (value 1).",
    );
    for st in states {
        if let (false, Some(e)) = (st.up, &st.last_error) {
            let [job, instance, profile_type] = labels(st);
            family.sample(&[job, instance, profile_type, ("error", e)], 1u64);
        }
    }
    let family = out.family(
        "ember_agent_scrape_profiles_sent_total",
        Counter,
        "Profiles sent from scrapes.",
    );
    for st in states {
        family.sample(&labels(st), st.profiles_sent);
    }
}

/// The labels of one scrape target and profile type.
fn labels(st: &ScrapeState) -> [(&'static str, &str); 3] {
    [
        ("job", &st.job),
        ("instance", &st.instance),
        ("profile_type", &st.profile_type),
    ]
}

/// The bucket exporters' figures; each family is present only while its exporter runs.
fn describe_buckets(out: &mut Exposition, buckets: &crate::exporters::BucketStats) {
    use MetricType::{Counter, Gauge};
    if let Some(p) = &buckets.perf {
        describe_rows(
            out,
            &[
                (
                    "ember_agent_perf_collector_dumps_written_total",
                    Counter,
                    "perf_collector dumps written to the local spool.",
                    p.dumps_written,
                ),
                (
                    "ember_agent_perf_collector_dumps_uploaded_total",
                    Counter,
                    "perf_collector dumps uploaded to the bucket (and deleted locally).",
                    p.dumps_uploaded,
                ),
                (
                    "ember_agent_perf_collector_upload_errors_total",
                    Counter,
                    "perf_collector failed upload attempts.",
                    p.upload_errors,
                ),
                (
                    "ember_agent_perf_collector_dumps_dropped_total",
                    Counter,
                    "perf_collector dumps deleted unuploaded to respect max_dumps_retained.",
                    p.dumps_dropped,
                ),
                (
                    "ember_agent_perf_collector_samples_dropped_total",
                    Counter,
                    "perf_collector samples dropped because a window's buffer was full.",
                    p.samples_dropped,
                ),
                (
                    "ember_agent_perf_collector_dumps_pending",
                    Gauge,
                    "perf_collector dumps waiting in the local spool.",
                    p.pending,
                ),
            ],
        );
    }
    if let Some(d) = &buckets.perfetto {
        describe_rows(
            out,
            &[
                (
                    "ember_agent_perfetto_snapshots_total",
                    Counter,
                    "perfetto_daemon snapshots written.",
                    d.snapshots,
                ),
                (
                    "ember_agent_perfetto_snapshots_uploaded_total",
                    Counter,
                    "perfetto_daemon snapshots uploaded to the bucket.",
                    d.uploaded,
                ),
                (
                    "ember_agent_perfetto_upload_errors_total",
                    Counter,
                    "perfetto_daemon failed upload attempts.",
                    d.upload_errors,
                ),
                (
                    "ember_agent_perfetto_events_overwritten_total",
                    Counter,
                    "Events overwritten in the perfetto_daemon ring before a snapshot took them.",
                    d.events_overwritten,
                ),
                (
                    "ember_agent_perfetto_ring_events",
                    Gauge,
                    "Events in the perfetto_daemon ring now.",
                    d.buffered_events,
                ),
            ],
        );
    }
}

/// (CPU seconds user+system, resident bytes) of this process, from /proc/self.
#[allow(unsafe_code)]
pub fn own_usage() -> (f64, u64) {
    let ticks = {
        // SAFETY: sysconf has no preconditions.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 { t as f64 } else { 100.0 }
    };
    let cpu = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the parenthesised comm; utime and stime are fields 14 and 15.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let u: f64 = f.get(11)?.parse().ok()?;
            let st: f64 = f.get(12)?.parse().ok()?;
            Some((u + st) / ticks)
        })
        .unwrap_or(0.0);
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb * 1024)
        })
        .unwrap_or(0);
    (cpu, rss)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exposition the agent wrote by hand before it used the one writer: same families,
    /// labels, escaping and values.
    #[test]
    fn exposition_keeps_the_agents_text() {
        let metrics = Metrics::default();
        metrics.profiler.samples.store(12, Ordering::Relaxed);
        metrics.scrape("app", "h:1", "process_cpu", |s| {
            s.up = false;
            s.failures = 2;
            s.last_error = Some("bad \"gzip\"\nbody".into());
        });
        metrics.scrape("app", "h:1", "memory", |s| {
            s.up = true;
            s.successes = 3;
            s.profiles_sent = 1;
        });
        let text = metrics.render(None, &crate::exporters::BucketStats::default());
        for expected in [
            "# HELP ember_agent_samples_total CPU samples taken.\n\
             # TYPE ember_agent_samples_total counter\nember_agent_samples_total 12\n",
            "# TYPE ember_agent_profiler_running gauge\nember_agent_profiler_running 0\n",
            "# TYPE ember_agent_push_queue_bytes gauge\nember_agent_push_queue_bytes 0\n",
            "# TYPE ember_agent_scrape_target_up gauge\n\
             ember_agent_scrape_target_up{job=\"app\",instance=\"h:1\"} 0\n",
            "ember_agent_scrapes_total{job=\"app\",instance=\"h:1\",profile_type=\"memory\",\
             result=\"success\"} 3\n",
            "ember_agent_scrape_up{job=\"app\",instance=\"h:1\",profile_type=\"memory\"} 1\n",
            "ember_agent_scrape_last_error{job=\"app\",instance=\"h:1\",\
             profile_type=\"process_cpu\",error=\"bad \\\"gzip\\\"\\nbody\"} 1\n",
            "ember_agent_scrape_profiles_sent_total{job=\"app\",instance=\"h:1\",\
             profile_type=\"memory\"} 1\n",
            "# TYPE ember_agent_resident_memory_bytes gauge\nember_agent_resident_memory_bytes ",
        ] {
            assert!(text.contains(expected), "{expected:?} not in\n{text}");
        }
        assert!(!text.contains("perf_collector"), "{text}");
        assert_eq!(
            text.matches("# HELP ").count(),
            text.matches("# TYPE ").count()
        );
    }
}
