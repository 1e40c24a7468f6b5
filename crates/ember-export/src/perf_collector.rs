//! The perf_collector exporter: buffers samples for `dump_duration_seconds`,
//! writes each window as gzip'd `perf script` text into a local spool as
//! `YYYYMMDDTHHMMSS-perf-data.gz`, uploads it to
//! `BUCKET_SUBDIRECTORY/NODE_NAME/<file>` and deletes it. While the bucket is
//! unreachable at most `max_dumps_retained` dumps stay on disk (the oldest
//! are dropped and counted); they are uploaded, oldest first, once it is back.

use crate::config::PerfCollectorConfig;
use crate::sink::{ExportError, Spool, Uploader, default_node_name, unix_now};
use ember_samples::perf_script::samples_gzip;
use ember_samples::timeline::Sample;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// File-name suffix of the dumps.
pub const PERF_DUMP_SUFFIX: &str = "perf-data.gz";

/// Samples held for one window at most; beyond this they are counted as
/// dropped so a runaway host cannot exhaust the agent's memory.
const MAX_BUFFERED_SAMPLES: usize = 4 << 20;

/// Counters of the exporter (for `/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerfCollectorStats {
    /// Dumps written to the local spool.
    pub dumps_written: u64,
    /// Dumps uploaded (and deleted locally).
    pub dumps_uploaded: u64,
    /// Failed upload attempts.
    pub upload_errors: u64,
    /// Dumps deleted unuploaded because more than `max_dumps_retained` piled up.
    pub dumps_dropped: u64,
    /// Samples dropped because one window's buffer was full.
    pub samples_dropped: u64,
    /// Dumps waiting in the spool now.
    pub pending: u64,
}

/// What one [`PerfCollector::dump`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpReport {
    /// Name of the dump written (None when the window had no samples).
    pub written: Option<String>,
    /// Samples in it.
    pub samples: usize,
    /// Object keys uploaded in this cycle (older pending dumps included).
    pub uploaded: Vec<String>,
    /// Dumps dropped to respect `max_dumps_retained`.
    pub dropped: Vec<String>,
    /// The upload error that stopped this cycle, if any.
    pub upload_error: Option<String>,
}

/// The perf_collector exporter. Feed it with [`push`](Self::push); run
/// [`spawn`](Self::spawn) on a tokio runtime, or call
/// [`dump`](Self::dump) yourself.
pub struct PerfCollector {
    config: PerfCollectorConfig,
    node_name: String,
    uploader: Uploader,
    spool: Spool,
    buffer: Mutex<Vec<Sample>>,
    // Serializes dump cycles so two uploads of one file never race.
    cycle: tokio::sync::Mutex<()>,
    dumps_written: AtomicU64,
    dumps_uploaded: AtomicU64,
    upload_errors: AtomicU64,
    dumps_dropped: AtomicU64,
    samples_dropped: AtomicU64,
    pending: AtomicU64,
}

impl std::fmt::Debug for PerfCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfCollector")
            .field("config", &self.config)
            .field("node_name", &self.node_name)
            .finish()
    }
}

impl PerfCollector {
    /// Validates `config` and sets up the spool and the store client.
    pub fn new(config: PerfCollectorConfig) -> Result<Arc<Self>, ExportError> {
        config.validate()?;
        let uploader = Uploader::new(&config.export_to)?;
        let dir = config
            .local_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("ember-perf-collector"));
        let spool = Spool::open(dir, PERF_DUMP_SUFFIX)?;
        let node_name = config.node_name.clone().unwrap_or_else(default_node_name);
        let pending = spool.files()?.len() as u64;
        Ok(Arc::new(PerfCollector {
            config,
            node_name,
            uploader,
            spool,
            buffer: Mutex::new(Vec::new()),
            cycle: tokio::sync::Mutex::new(()),
            dumps_written: AtomicU64::new(0),
            dumps_uploaded: AtomicU64::new(0),
            upload_errors: AtomicU64::new(0),
            dumps_dropped: AtomicU64::new(0),
            samples_dropped: AtomicU64::new(0),
            pending: AtomicU64::new(pending),
        }))
    }

    /// The configuration in force.
    pub fn config(&self) -> &PerfCollectorConfig {
        &self.config
    }

    /// The node name used in object keys.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The local spool folder.
    pub fn local_dir(&self) -> &std::path::Path {
        self.spool.dir()
    }

    /// Adds a sample to the current window (never blocks on I/O). With
    /// `call_graph: false` only the leaf frame is kept.
    pub fn push(&self, mut sample: Sample) {
        if !self.config.call_graph {
            sample.frames.truncate(1);
        }
        let mut buf = self.buffer.lock().unwrap_or_else(|e| e.into_inner());
        if buf.len() >= MAX_BUFFERED_SAMPLES {
            self.samples_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        buf.push(sample);
    }

    /// Current counters.
    pub fn stats(&self) -> PerfCollectorStats {
        PerfCollectorStats {
            dumps_written: self.dumps_written.load(Ordering::Relaxed),
            dumps_uploaded: self.dumps_uploaded.load(Ordering::Relaxed),
            upload_errors: self.upload_errors.load(Ordering::Relaxed),
            dumps_dropped: self.dumps_dropped.load(Ordering::Relaxed),
            samples_dropped: self.samples_dropped.load(Ordering::Relaxed),
            pending: self.pending.load(Ordering::Relaxed),
        }
    }

    /// Ends the current window: writes its dump (if it has samples), trims
    /// the spool to `max_dumps_retained`, then uploads pending dumps oldest
    /// first, stopping at the first failure. Local I/O errors are returned;
    /// upload errors are reported in [`DumpReport::upload_error`].
    pub async fn dump(&self) -> Result<DumpReport, ExportError> {
        let _cycle = self.cycle.lock().await;
        let samples = std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|e| e.into_inner()));
        let mut report = DumpReport {
            samples: samples.len(),
            ..Default::default()
        };
        if !samples.is_empty() {
            let bytes = samples_gzip(&samples).map_err(|source| ExportError::Io {
                what: "cannot compress a dump in",
                path: self.spool.dir().to_path_buf(),
                source,
            })?;
            drop(samples);
            let name = self.spool.write(unix_now(), &bytes)?;
            self.dumps_written.fetch_add(1, Ordering::Relaxed);
            report.written = Some(name);
            report.dropped = self.spool.trim(self.config.max_dumps_retained)?;
            if !report.dropped.is_empty() {
                self.dumps_dropped
                    .fetch_add(report.dropped.len() as u64, Ordering::Relaxed);
                tracing::warn!(
                    dropped = report.dropped.len(),
                    max_dumps_retained = self.config.max_dumps_retained,
                    files = %report.dropped.join(","),
                    "perf_collector dropped unuploaded dumps"
                );
            }
        }
        self.upload_pending(&mut report).await?;
        Ok(report)
    }

    async fn upload_pending(&self, report: &mut DumpReport) -> Result<(), ExportError> {
        let files = self.spool.files()?;
        let mut left = files.len();
        for name in files {
            let key = self.uploader.target().key(
                &self.config.bucket_subdirectory,
                &self.node_name,
                &name,
            );
            let bytes = self.spool.read(&name)?;
            match self.uploader.put(&key, bytes).await {
                Ok(()) => {
                    self.spool.remove(&name)?;
                    left -= 1;
                    self.dumps_uploaded.fetch_add(1, Ordering::Relaxed);
                    report.uploaded.push(key);
                }
                Err(e) => {
                    self.upload_errors.fetch_add(1, Ordering::Relaxed);
                    report.upload_error = Some(e.to_string());
                    break;
                }
            }
        }
        self.pending.store(left as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Runs the dump cycle every `dump_duration_seconds` on the current tokio
    /// runtime until the task is aborted. Errors are logged, never fatal.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let period = Duration::from_secs(this.config.dump_duration_seconds);
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match this.dump().await {
                    Ok(r) => {
                        if let Some(e) = r.upload_error {
                            tracing::warn!(
                                pending_dumps = this.pending.load(Ordering::Relaxed),
                                error = ?e,
                                "perf_collector upload failed"
                            );
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "perf_collector dump failed"),
                }
            }
        })
    }
}
