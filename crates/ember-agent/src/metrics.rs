//! The agent's self-observability: counters shared by its components, per-target scrape
//! state, and their rendering as Prometheus text for `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

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

    /// Prometheus text exposition.
    pub fn render(
        &self,
        push: Option<&ember_push::PushStats>,
        buckets: &crate::exporters::BucketStats,
    ) -> String {
        let mut out = String::new();
        self.render_own(&mut out);
        render_push(&mut out, push);
        render_buckets(&mut out, buckets);
        render_scrapes(&mut out, &self.scrape_states());
        let (cpu, rss) = own_usage();
        gauge(
            &mut out,
            "ember_agent_cpu_seconds_total",
            "CPU time (user+system) the agent process used.",
            cpu,
        );
        gauge(
            &mut out,
            "ember_agent_resident_memory_bytes",
            "Resident memory of the agent process.",
            rss as f64,
        );
        out
    }

    /// The profiler's and the configuration's figures.
    fn render_own(&self, out: &mut String) {
        let p = &self.profiler;
        counter(
            out,
            "ember_agent_samples_total",
            "CPU samples taken.",
            p.samples.load(Ordering::Relaxed),
        );
        counter(
            out,
            "ember_agent_lost_samples_total",
            "Samples lost in the kernel ring buffers.",
            p.lost.load(Ordering::Relaxed),
        );
        counter(
            out,
            "ember_agent_profiles_total",
            "Profiles produced by continuous profiling.",
            p.profiles.load(Ordering::Relaxed),
        );
        gauge(
            out,
            "ember_agent_profiler_running",
            "1 while the host sampler runs.",
            p.running.load(Ordering::Relaxed) as f64,
        );
        counter(
            out,
            "ember_agent_profiler_errors_total",
            "Sampler start failures.",
            p.errors.load(Ordering::Relaxed),
        );
        counter(
            out,
            "ember_agent_config_reloads_total",
            "Configuration reloads applied.",
            self.reloads.load(Ordering::Relaxed),
        );
        counter(
            out,
            "ember_agent_config_reload_failures_total",
            "Configuration reloads rejected.",
            self.reload_failures.load(Ordering::Relaxed),
        );
    }
}

/// One counter family without labels.
fn counter(out: &mut String, name: &str, help: &str, v: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
    );
}

/// One gauge family without labels.
fn gauge(out: &mut String, name: &str, help: &str, v: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
}

/// The server exporter's figures (zeros when none is configured).
fn render_push(out: &mut String, push: Option<&ember_push::PushStats>) {
    let s = push.cloned().unwrap_or_default();
    counter(
        out,
        "ember_agent_push_enqueued_profiles_total",
        "Profiles queued for the server.",
        s.enqueued_profiles,
    );
    counter(
        out,
        "ember_agent_push_sent_profiles_total",
        "Profiles the server acknowledged.",
        s.sent_profiles,
    );
    counter(
        out,
        "ember_agent_push_sent_bytes_total",
        "pprof bytes the server acknowledged.",
        s.sent_bytes,
    );
    counter(
        out,
        "ember_agent_push_dropped_profiles_total",
        "Profiles dropped because the queue was full (oldest first).",
        s.dropped_profiles,
    );
    counter(
        out,
        "ember_agent_push_dropped_bytes_total",
        "Bytes dropped because the queue was full.",
        s.dropped_bytes,
    );
    counter(
        out,
        "ember_agent_push_rejected_profiles_total",
        "Profiles the server refused (4xx).",
        s.rejected_profiles,
    );
    counter(
        out,
        "ember_agent_push_errors_total",
        "Failed push requests.",
        s.upload_errors,
    );
    counter(
        out,
        "ember_agent_push_throttled_total",
        "Push requests the server answered 429 (retried after its Retry-After).",
        s.throttled_requests,
    );
    counter(
        out,
        "ember_agent_push_retry_after_waits_total",
        "Push retries that waited for the server's Retry-After.",
        s.retry_after_waits,
    );
    gauge(
        out,
        "ember_agent_push_queue_profiles",
        "Profiles waiting to be sent.",
        s.queue_profiles as f64,
    );
    gauge(
        out,
        "ember_agent_push_queue_bytes",
        "Bytes waiting to be sent.",
        s.queue_bytes as f64,
    );
}

/// Per scrape target and profile type: up, results, last error, profiles sent.
fn render_scrapes(out: &mut String, states: &[ScrapeState]) {
    let esc = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    // Up per target: every profile type of it succeeded last time.
    let mut up: BTreeMap<(String, String), bool> = BTreeMap::new();
    for st in states {
        let e = up
            .entry((st.job.clone(), st.instance.clone()))
            .or_insert(true);
        *e &= st.up;
    }
    out.push_str("# HELP ember_agent_scrape_target_up 1 when the last scrape of every profile type of the target succeeded.\n# TYPE ember_agent_scrape_target_up gauge\n");
    for ((job, instance), ok) in &up {
        let _ = writeln!(
            out,
            "ember_agent_scrape_target_up{{job=\"{}\",instance=\"{}\"}} {}",
            esc(job),
            esc(instance),
            u8::from(*ok)
        );
    }
    out.push_str("# HELP ember_agent_scrapes_total Scrapes by result.\n# TYPE ember_agent_scrapes_total counter\n");
    for st in states {
        for (result, v) in [("success", st.successes), ("error", st.failures)] {
            let _ = writeln!(
                out,
                "ember_agent_scrapes_total{{job=\"{}\",instance=\"{}\",profile_type=\"{}\",result=\"{result}\"}} {v}",
                esc(&st.job),
                esc(&st.instance),
                esc(&st.profile_type)
            );
        }
    }
    out.push_str("# HELP ember_agent_scrape_up 1 when the last scrape of this profile type succeeded.\n# TYPE ember_agent_scrape_up gauge\n");
    for st in states {
        let _ = writeln!(
            out,
            "ember_agent_scrape_up{{job=\"{}\",instance=\"{}\",profile_type=\"{}\"}} {}",
            esc(&st.job),
            esc(&st.instance),
            esc(&st.profile_type),
            u8::from(st.up)
        );
    }
    out.push_str("# HELP ember_agent_scrape_last_error The last scrape error of a failing target (value 1).\n# TYPE ember_agent_scrape_last_error gauge\n");
    for st in states {
        if let (false, Some(e)) = (st.up, &st.last_error) {
            let _ = writeln!(
                out,
                "ember_agent_scrape_last_error{{job=\"{}\",instance=\"{}\",profile_type=\"{}\",error=\"{}\"}} 1",
                esc(&st.job),
                esc(&st.instance),
                esc(&st.profile_type),
                esc(e)
            );
        }
    }
    out.push_str("# HELP ember_agent_scrape_profiles_sent_total Profiles sent from scrapes.\n# TYPE ember_agent_scrape_profiles_sent_total counter\n");
    for st in states {
        let _ = writeln!(
            out,
            "ember_agent_scrape_profiles_sent_total{{job=\"{}\",instance=\"{}\",profile_type=\"{}\"}} {}",
            esc(&st.job),
            esc(&st.instance),
            esc(&st.profile_type),
            st.profiles_sent
        );
    }
}

/// The bucket exporters' figures; each family is present only while its exporter runs.
fn render_buckets(out: &mut String, buckets: &crate::exporters::BucketStats) {
    let mut one = |name: &str, kind: &str, help: &str, v: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    };
    if let Some(p) = &buckets.perf {
        one(
            "ember_agent_perf_collector_dumps_written_total",
            "counter",
            "perf_collector dumps written to the local spool.",
            p.dumps_written,
        );
        one(
            "ember_agent_perf_collector_dumps_uploaded_total",
            "counter",
            "perf_collector dumps uploaded to the bucket (and deleted locally).",
            p.dumps_uploaded,
        );
        one(
            "ember_agent_perf_collector_upload_errors_total",
            "counter",
            "perf_collector failed upload attempts.",
            p.upload_errors,
        );
        one(
            "ember_agent_perf_collector_dumps_dropped_total",
            "counter",
            "perf_collector dumps deleted unuploaded to respect max_dumps_retained.",
            p.dumps_dropped,
        );
        one(
            "ember_agent_perf_collector_samples_dropped_total",
            "counter",
            "perf_collector samples dropped because a window's buffer was full.",
            p.samples_dropped,
        );
        one(
            "ember_agent_perf_collector_dumps_pending",
            "gauge",
            "perf_collector dumps waiting in the local spool.",
            p.pending,
        );
    }
    if let Some(d) = &buckets.perfetto {
        one(
            "ember_agent_perfetto_snapshots_total",
            "counter",
            "perfetto_daemon snapshots written.",
            d.snapshots,
        );
        one(
            "ember_agent_perfetto_snapshots_uploaded_total",
            "counter",
            "perfetto_daemon snapshots uploaded to the bucket.",
            d.uploaded,
        );
        one(
            "ember_agent_perfetto_upload_errors_total",
            "counter",
            "perfetto_daemon failed upload attempts.",
            d.upload_errors,
        );
        one(
            "ember_agent_perfetto_events_overwritten_total",
            "counter",
            "Events overwritten in the perfetto_daemon ring before a snapshot took them.",
            d.events_overwritten,
        );
        one(
            "ember_agent_perfetto_ring_events",
            "gauge",
            "Events in the perfetto_daemon ring now.",
            d.buffered_events,
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
