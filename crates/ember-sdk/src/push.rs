//! Push mode: continuous CPU and heap profiles sent to Ember or any Pyroscope-compatible
//! server over `push.v1`, through `ember-push`'s [`Pusher`] (bounded queue that drops the
//! oldest profile when full, retries with backoff and `Retry-After`, never blocks).
//!
//! Every `interval` (60 s) a CPU profile of `cpu_duration` (59 s) at `frequency` (19 Hz) and,
//! when the [`crate::SamplingAllocator`] is the global allocator, a heap profile (`inuse_*`
//! as they are, `alloc_*` since the previous push, like Go's delta heap profiles) are queued
//! with the series labels `service_name`, `__name__` (`process_cpu` or `memory`) and the
//! configured labels. Profiles are built on tokio's blocking pool, so the service's own tasks
//! never wait for symbolization; a server that is down only fills (and then cycles) the
//! queue. An ad hoc `/profile/cpu` request, forced or not, records alongside: the sampling
//! engine serves both (see [`crate::cpu`]).

use std::time::Duration;

use ember_push::{PushConfig, PushProfile, PushStats, Pusher};

use crate::SdkError;
use crate::cpu::CpuRecording;
use crate::heap;

/// Settings of push mode.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// The `service_name` label (required, non-empty).
    pub service_name: String,
    /// More series labels (e.g. `env`, `region`); `service_name` and `__name__` are set
    /// by the SDK and ignored here.
    pub labels: Vec<(String, String)>,
    /// CPU sampling frequency in Hz (19).
    pub frequency: u32,
    /// Length of each CPU profile (59 s).
    pub cpu_duration: Duration,
    /// One CPU and one heap profile per interval (60 s).
    pub interval: Duration,
    /// Send heap profiles when heap profiling is on (true).
    pub heap: bool,
    /// Server URL, tenant, token, queue size, backoff: `ember_push::PushConfig` (queue 64 MiB).
    pub push: PushConfig,
}

impl PushOptions {
    /// Defaults for `service_name` pushing to `url` (e.g. `http://ember:4040`).
    pub fn new(service_name: impl Into<String>, url: impl Into<String>) -> PushOptions {
        PushOptions {
            service_name: service_name.into(),
            labels: Vec::new(),
            frequency: 19,
            cpu_duration: Duration::from_secs(59),
            interval: Duration::from_secs(60),
            heap: true,
            push: PushConfig {
                url: url.into(),
                ..PushConfig::default()
            },
        }
    }
}

/// Running push mode; dropping it stops recording and sending (queued profiles are lost:
/// call [`PushMode::flush`] first).
#[derive(Debug)]
pub struct PushMode {
    pusher: std::sync::Arc<Pusher>,
    task: tokio::task::JoinHandle<()>,
}

impl PushMode {
    /// Starts push mode on the current tokio runtime.
    pub fn start(options: PushOptions) -> Result<PushMode, SdkError> {
        if options.service_name.trim().is_empty() {
            return Err(SdkError::BadParameter(
                "service_name must not be empty".into(),
            ));
        }
        if !(1..=crate::MAX_FREQUENCY).contains(&options.frequency) {
            return Err(SdkError::BadParameter(format!(
                "frequency must be 1..={} Hz, got {}",
                crate::MAX_FREQUENCY,
                options.frequency
            )));
        }
        if options.interval.is_zero() || options.cpu_duration > options.interval {
            return Err(SdkError::BadParameter(
                "cpu_duration must not exceed interval, and interval must be positive".into(),
            ));
        }
        let pusher = std::sync::Arc::new(
            Pusher::start(options.push.clone()).map_err(|e| SdkError::Push(e.to_string()))?,
        );
        let task = tokio::spawn(run(options, pusher.clone()));
        Ok(PushMode { pusher, task })
    }

    /// The push queue's counters.
    pub fn stats(&self) -> PushStats {
        self.pusher.stats()
    }

    /// Sends what is queued now; true when the queue drained within `within`.
    pub async fn flush(&self, within: Duration) -> bool {
        self.pusher.flush(within).await
    }
}

impl Drop for PushMode {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn series(options: &PushOptions, name: &str) -> Vec<(String, String)> {
    let mut labels = vec![
        ("service_name".to_string(), options.service_name.clone()),
        ("__name__".to_string(), name.to_string()),
    ];
    labels.extend(
        options
            .labels
            .iter()
            .filter(|(k, _)| k != "service_name" && k != "__name__")
            .cloned(),
    );
    labels
}

async fn run(options: PushOptions, pusher: std::sync::Arc<Pusher>) {
    let mut tick = tokio::time::interval(options.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The last heap profile sent: `alloc_*` go out as the difference since it, like Go's
    // delta heap profiles, so that a server adding profiles up over time counts each
    // allocation once (`inuse_*` are sent as they are).
    let mut previous_heap: Option<ember_pprof::Profile> = None;
    loop {
        tick.tick().await;
        let recording = match CpuRecording::start(options.frequency) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("ember-sdk push: cannot record a CPU profile: {e}");
                return;
            }
        };
        tokio::time::sleep(options.cpu_duration).await;
        let want_heap = options.heap;
        let previous = previous_heap.take();
        let built = tokio::task::spawn_blocking(move || {
            let cpu = ember_pprof::encode_gzip(&recording.finish());
            let current = want_heap.then(heap::heap_profile).flatten();
            let heap = current.as_ref().map(|now| {
                let sent = previous
                    .as_ref()
                    .and_then(|prev| ember_pprof::delta(prev, now).ok());
                ember_pprof::encode_gzip(sent.as_ref().unwrap_or(now))
            });
            (cpu, heap, current)
        })
        .await;
        let Ok((cpu, heap, current)) = built else {
            tracing::warn!("ember-sdk push: building the profiles failed");
            continue;
        };
        previous_heap = current;
        pusher.enqueue(PushProfile {
            labels: series(&options, "process_cpu"),
            raw_profile: cpu,
        });
        if let Some(heap) = heap {
            pusher.enqueue(PushProfile {
                labels: series(&options, "memory"),
                raw_profile: heap,
            });
        }
    }
}
