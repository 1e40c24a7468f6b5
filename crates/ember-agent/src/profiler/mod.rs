//! Continuous whole-host CPU profiling: one `ember_sampler::Session` on a thread of its own,
//! cut every `upload_interval` into one profile per process, labelled from `/proc`
//! (`__meta_process_*`, `__meta_system_hostname`), filtered by the target rules, relabelled,
//! and handed to the [`Outbox`].
//!
//! The data goes one way: the sampler's `Session` cuts an `ember_samples::Recording`;
//! `ember-samples` symbolizes its timeline for the bucket exporters, merges the cuts, splits
//! the merged recording per process and turns each part into pprof; this module only decides
//! which processes are sent and how they are labelled (the `emit` module), and queues them.
//!
//! With bucket exporters configured the session also keeps raw events: it is then cut every
//! second (at most `upload_interval`), each cut's timeline is symbolized once and handed to the
//! exporters' [`Taps`], and the cuts are merged until
//! `upload_interval` for the server profiles.

mod emit;
mod filter;
mod process;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ember_sampler::{CallGraph, Options, Session, Target};
use ember_samples::{Recording, Symbolizer};

use crate::Outbox;
use crate::config::{ConfigError, ProfilingConfig};
use crate::exporters::{Feeder, Taps};
use crate::metrics::Metrics;
use crate::relabel;
use emit::Emitter;
use filter::Filter;
pub use process::{ProcessMeta, derive_service_name, parse_cgroup};

/// A running profiler thread.
pub struct Handle {
    stop: Arc<AtomicBool>,
    flush: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}

impl Handle {
    /// Stops without a last cut (used when the configuration changes).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // The thread notices within one poll (100 ms).
            let _ = t.join();
        }
    }

    /// Stops after a last cut is queued, waiting at most `within`.
    pub fn stop_and_flush(mut self, within: Duration) {
        self.flush.store(true, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
        if self.done.recv_timeout(within).is_ok()
            && let Some(t) = self.thread.take()
        {
            let _ = t.join();
        }
    }
}

/// Starts the sampler thread. Fails on a configuration the sampler refuses; a sampler that
/// cannot open its events (permissions) is reported in the log and metrics instead, so the
/// rest of the agent keeps running.
pub fn start(
    config: &ProfilingConfig,
    taps: Taps,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
) -> Result<Handle, ConfigError> {
    let filter = Filter::new(&config.targets)?;
    let rules = relabel::compile(&config.relabel_configs).map_err(|e| ConfigError {
        path: "profiling.relabel_configs".into(),
        reason: e.to_string(),
    })?;
    let mut options = Options::new(Target::AllCpus);
    // One sampler serves every consumer: it runs at the highest frequency asked for, and the
    // bucket exporters thin it back to their own (see the exporters module).
    let cpu_hz = config
        .cpu
        .enabled
        .then(|| u32::try_from(config.cpu.sample_rate_hz).unwrap_or(u32::MAX));
    options.frequency = sampler_frequency([cpu_hz, taps.perf_hz(), taps.perfetto_hz()]);
    options.call_graph = CallGraph::Auto;
    options.raw_events = !taps.is_empty();
    // The Perfetto trace needs the scheduler's switches whether or not off-CPU profiles are
    // sent; the minimum duration only shapes the off-CPU profiles.
    options.off_cpu = taps.wants_switches() || config.off_cpu.enabled;
    if config.off_cpu.enabled {
        options.off_cpu_min_ns =
            u64::try_from(config.off_cpu.min_duration.0.as_nanos()).unwrap_or(u64::MAX);
    }
    let feeder = Feeder::new(taps, options.frequency);
    let pipeline = Pipeline {
        sinks: Sinks {
            push: Push {
                cpu: config.cpu.enabled,
                off_cpu: config.off_cpu.enabled,
            },
            feeder,
        },
        emitter: Emitter::new(filter, rules, outbox, metrics.clone()),
        symbolizer: Symbolizer::new(),
        pending: None,
    };
    let interval = config.upload_interval.0;
    let stop = Arc::new(AtomicBool::new(false));
    let flush = Arc::new(AtomicBool::new(false));
    let (done_tx, done) = mpsc::channel();
    let (s, f) = (stop.clone(), flush.clone());
    let thread = std::thread::Builder::new()
        .name("ember-profiler".into())
        .spawn(move || {
            run(options, interval, pipeline, metrics, s, f);
            let _ = done_tx.send(());
        })
        .map_err(|e| ConfigError {
            path: "profiling".into(),
            reason: format!("cannot start the profiler thread: {e}"),
        })?;
    Ok(Handle {
        stop,
        flush,
        done,
        thread: Some(thread),
    })
}

/// The sampler's rate: the highest one asked for by the CPU profiles and the bucket
/// exporters (19 Hz when nothing asks), within the sampler's 1..=10000 Hz.
fn sampler_frequency(wanted: [Option<u32>; 3]) -> u32 {
    wanted
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(19)
        .clamp(1, 10_000)
}

/// Which per-process profiles go to the server.
#[derive(Debug, Clone, Copy)]
struct Push {
    /// On-CPU samples (`process_cpu:cpu:nanoseconds:...`).
    cpu: bool,
    /// Off-CPU time (`process_cpu:off_cpu:nanoseconds:...`).
    off_cpu: bool,
}

/// Who consumes the cuts.
struct Sinks {
    /// The server profiles' filter/relabel pipeline.
    push: Push,
    /// The bucket exporters.
    feeder: Feeder,
}

/// What the profiler thread owns besides the session: where cuts go, and the symbolizer
/// whose caches live as long as the thread.
struct Pipeline {
    sinks: Sinks,
    emitter: Emitter,
    symbolizer: Symbolizer,
    /// Cuts merged since the last upload.
    pending: Option<Recording>,
}

impl Pipeline {
    /// One cut's way into the pending profile: its timeline to the bucket exporters, then its
    /// aggregates (less what no server profile carries) merged into `pending`.
    fn absorb(&mut self, mut rec: Recording) {
        if !self.sinks.feeder.is_empty() && !rec.raw_events().is_empty() {
            let events = ember_samples::timeline::timeline(&rec, &mut self.symbolizer);
            self.sinks.feeder.feed(events);
        }
        // The aggregates are all the server profiles need; the sampler times switches for the
        // Perfetto trace even when off-CPU profiles are off.
        rec.drop_timeline();
        rec.retain_views(self.sinks.push.cpu, self.sinks.push.off_cpu);
        match &mut self.pending {
            Some(acc) => acc.merge(rec),
            None => self.pending = Some(rec),
        }
    }

    /// Sends what was merged since the last upload.
    fn emit(&mut self) {
        if let Some(rec) = self.pending.take() {
            self.emitter
                .emit(rec, self.sinks.push, &mut self.symbolizer);
        }
    }
}

fn run(
    options: Options,
    interval: Duration,
    mut pipeline: Pipeline,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    flush: Arc<AtomicBool>,
) {
    let mut session = match Session::start(&options) {
        Ok(s) => s,
        Err(e) => {
            metrics.profiler.errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!(error = %e, "host profiling disabled");
            return;
        }
    };
    metrics.profiler.running.store(1, Ordering::Relaxed);
    tracing::info!(
        sample_rate_hz = options.frequency,
        upload_interval = ?interval,
        "host profiling started"
    );
    // A pass over /proc/kallsyms per cut was most of the agent's own CPU; the table costs a few MB once.
    pipeline.symbolizer.keep_kernel_table();
    // The exporters get events every second so their dumps and snapshots are not lumpy.
    let step = if pipeline.sinks.feeder.is_empty() {
        interval
    } else {
        interval.min(FEED_INTERVAL)
    };
    let mut last_cut = Instant::now();
    let mut last_emit = Instant::now();
    loop {
        session.poll(Duration::from_millis(100));
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if last_cut.elapsed() >= step {
            last_cut = Instant::now();
            pipeline.absorb(session.cut());
            if last_emit.elapsed() >= interval {
                last_emit = Instant::now();
                pipeline.emit();
            }
        }
    }
    let last = session.finish();
    if flush.load(Ordering::SeqCst) {
        pipeline.absorb(last);
        pipeline.emit();
    }
    metrics.profiler.running.store(0, Ordering::Relaxed);
}

/// How often the session is cut to feed the bucket exporters.
const FEED_INTERVAL: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configured_rate_drives_the_sampler() {
        // profiling.cpu.sample_rate_hz alone, at its default and configured.
        let cpu = |hz: u64| {
            let c: ProfilingConfig =
                serde_norway::from_str(&format!("cpu: {{sample_rate_hz: {hz}}}")).unwrap();
            c.cpu
                .enabled
                .then(|| u32::try_from(c.cpu.sample_rate_hz).unwrap())
        };
        assert_eq!(
            sampler_frequency([
                cpu(ProfilingConfig::default().cpu.sample_rate_hz),
                None,
                None
            ]),
            19
        );
        assert_eq!(sampler_frequency([cpu(49), None, None]), 49);
        // A bucket exporter at 99 Hz raises it; the exporters thin back to their own rate.
        assert_eq!(sampler_frequency([cpu(19), Some(99), None]), 99);
        assert_eq!(sampler_frequency([cpu(199), Some(99), Some(49)]), 199);
        assert_eq!(sampler_frequency([None, None, Some(49)]), 49);
        assert_eq!(sampler_frequency([None, None, None]), 19);
        assert_eq!(sampler_frequency([Some(50_000), None, None]), 10_000);
    }
}
