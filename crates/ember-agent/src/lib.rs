//! Ember's always-on agent: continuous host profiling ([`profiler`]), pull scraping
//! ([`scrape`]), the server exporter (an [`ember_push::Pusher`] behind the [`Outbox`]), the
//! bucket exporters ([`exporters`]: perf_collector, perfetto_daemon), its configuration
//! ([`config`]) with hot reload, and the admin HTTP endpoint ([`admin`]).
//!
//! [`Agent::start`] runs everything on the caller's tokio runtime; [`Agent::apply`] swaps the
//! configuration (restarting only the components whose section changed, so the push queue
//! survives a scrape change); [`Agent::shutdown`] stops the producers and flushes the queue
//! and the bucket exporters.

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
pub mod admin;
pub mod config;
pub mod exporters;
pub mod metrics;
pub mod profiler;
pub mod relabel;
pub mod scrape;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ember_push::{PushProfile, Pusher};

pub use config::{Config, ConfigError, ConfigErrors};
pub use metrics::Metrics;
use relabel::Labels;

/// Where every component hands its profiles: adds the external labels and queues them on
/// the server exporter (when configured). Never blocks.
pub struct Outbox {
    pusher: Mutex<Option<Arc<Pusher>>>,
    external_labels: Mutex<Labels>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").finish_non_exhaustive()
    }
}

impl Outbox {
    fn new() -> Outbox {
        Outbox {
            pusher: Mutex::new(None),
            external_labels: Mutex::new(Labels::new()),
        }
    }

    /// Queues one profile (pprof bytes, gzip'd or raw) with its series labels.
    pub fn send(&self, mut labels: Labels, raw_profile: Vec<u8>) {
        for (k, v) in self
            .external_labels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            labels.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let pusher = self
            .pusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(p) = pusher {
            p.enqueue(PushProfile {
                labels: labels.into_iter().collect(),
                raw_profile,
            });
        }
    }

    /// Counters of the server exporter, if any.
    pub fn push_stats(&self) -> Option<ember_push::PushStats> {
        self.pusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|p| p.stats())
    }

    fn current(&self) -> Option<Arc<Pusher>> {
        self.pusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Errors starting or reconfiguring the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The configuration is invalid.
    #[error("invalid configuration:\n{0}")]
    Config(#[from] ConfigErrors),
    /// A component could not start.
    #[error("{0}")]
    Start(String),
}

struct Running {
    config: Config,
    scrape_tasks: Vec<tokio::task::JoinHandle<()>>,
    profiler: Option<profiler::Handle>,
    buckets: exporters::Running,
}

/// A running agent.
pub struct Agent {
    state: Mutex<Running>,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").finish_non_exhaustive()
    }
}

impl Agent {
    /// Validates `config` and starts every component. Must be called inside a tokio runtime.
    pub fn start(config: Config) -> Result<Arc<Agent>, AgentError> {
        config.validate()?;
        let agent = Arc::new(Agent {
            state: Mutex::new(Running {
                config: config.clone(),
                scrape_tasks: Vec::new(),
                profiler: None,
                buckets: exporters::Running::default(),
            }),
            outbox: Arc::new(Outbox::new()),
            metrics: Arc::new(Metrics::default()),
        });
        agent.reconfigure(config, true)?;
        Ok(agent)
    }

    /// The configuration in force.
    pub fn config(&self) -> Config {
        self.lock().config.clone()
    }

    /// The agent's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The outbox (server exporter) of this agent.
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// Prometheus text of every metric.
    pub fn render_metrics(&self) -> String {
        let buckets = self.lock().buckets.stats();
        self.metrics
            .render(self.outbox.push_stats().as_ref(), &buckets)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates and applies a new configuration; on error the running one stays.
    /// `admin.listen` changes take effect at the next start only.
    pub fn apply(&self, new: Config) -> Result<(), AgentError> {
        match new.validate() {
            Ok(()) => {}
            Err(e) => {
                self.metrics
                    .reload_failures
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(e.into());
            }
        }
        self.reconfigure(new, false)?;
        self.metrics
            .reloads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn reconfigure(&self, new: Config, first: bool) -> Result<(), AgentError> {
        let mut running = self.lock();
        let old = running.config.clone();
        let perf_changed = first || old.exporters.perf_collector != new.exporters.perf_collector;
        let perfetto_changed =
            first || old.exporters.perfetto_daemon != new.exporters.perfetto_daemon;
        // Build the bucket exporters before touching anything: a spool folder that cannot be
        // created or a trigger port in use rejects the configuration with the old one running.
        let prepared = exporters::prepare(
            &running.buckets,
            perf_changed.then_some(&new.exporters.perf_collector),
            perfetto_changed.then_some(&new.exporters.perfetto_daemon),
        )
        .map_err(AgentError::Start)?;
        // The exporter first, so the restarted producers find it.
        if first || old.exporters.server != new.exporters.server {
            let pusher = match &new.exporters.server {
                Some(server) => {
                    let push_config = server
                        .push_config()
                        .map_err(|e| AgentError::Config(ConfigErrors(vec![e])))?;
                    Some(Arc::new(
                        Pusher::start(push_config).map_err(|e| AgentError::Start(e.to_string()))?,
                    ))
                }
                None => None,
            };
            let previous = std::mem::replace(
                &mut *self.outbox.pusher.lock().unwrap_or_else(|p| p.into_inner()),
                pusher,
            );
            // Give what the old exporter still holds a short chance to go out.
            if let Some(p) = previous {
                tokio::spawn(async move {
                    p.flush(Duration::from_secs(5)).await;
                });
            }
        }
        *self
            .outbox
            .external_labels
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = new.external_labels.clone();
        if first || old.scrape_configs != new.scrape_configs {
            for t in running.scrape_tasks.drain(..) {
                t.abort();
            }
            let mut live = Vec::new();
            for job in &new.scrape_configs {
                for target in scrape::targets(job) {
                    live.push((target.job.clone(), target.instance.clone()));
                    running.scrape_tasks.extend(scrape::spawn(
                        &target,
                        self.outbox.clone(),
                        self.metrics.clone(),
                    ));
                }
            }
            self.metrics.retain_scrapes(|job, instance| {
                live.iter().any(|(j, i)| j == job && i == instance)
            });
        }
        // The profiler feeds the bucket exporters and its sampler's settings follow them, so
        // it restarts when either changes.
        if first || old.profiling != new.profiling || perf_changed || perfetto_changed {
            if let Some(p) = running.profiler.take() {
                p.stop();
            }
            running
                .buckets
                .install(prepared)
                .map_err(AgentError::Start)?;
            let taps = running.buckets.taps();
            let wanted = new.profiling.cpu.enabled || new.profiling.off_cpu.enabled;
            if new.profiling.enabled && (wanted || !taps.is_empty()) {
                running.profiler = Some(
                    profiler::start(
                        &new.profiling,
                        taps,
                        self.outbox.clone(),
                        self.metrics.clone(),
                    )
                    .map_err(|e| AgentError::Config(ConfigErrors(vec![e])))?,
                );
            }
        }
        running.config = new;
        Ok(())
    }

    /// Stops producing, cuts a last profile, and flushes the push queue and the bucket
    /// exporters (last dump, last time-interval snapshot) within `within`. Returns whether
    /// everything was sent.
    pub async fn shutdown(&self, within: Duration) -> bool {
        let (tasks, profiler, taps) = {
            let mut r = self.lock();
            (
                std::mem::take(&mut r.scrape_tasks),
                r.profiler.take(),
                r.buckets.stop(),
            )
        };
        for t in tasks {
            t.abort();
        }
        let deadline = tokio::time::Instant::now() + within;
        if let Some(p) = profiler {
            // The last cut is symbolized on the profiler thread; allow it most of the budget.
            let budget = within.mul_f64(0.6);
            let _ = tokio::task::spawn_blocking(move || p.stop_and_flush(budget)).await;
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let push = async {
            match self.outbox.current() {
                Some(p) => p.flush(left).await,
                None => true,
            }
        };
        let (pushed, exported) = tokio::join!(push, exporters::flush(taps, left));
        pushed && exported
    }
}
