//! The perfetto_daemon exporter: a byte-bounded ring buffer of recent
//! samples and scheduler switches (`buffers.size_kb` of config_text); on a
//! trigger (every `interval` ms, or a request to the HTTP endpoint) it waits
//! the trigger's `stop_delay_ms`, drains the ring into a Perfetto trace, keeps
//! it locally as `YYYYMMDDTHHMMSS-perfetto-trace.pb` (at most
//! `max_retained_runs`) and uploads it to `BUCKET_SUBDIRECTORY/NODE_NAME/`.
//! Also holds the small HTTP client behind `ember profiling
//! perfetto-snapshot`.

use crate::config::{PerfettoDaemonConfig, PerfettoTrigger};
use crate::perfetto::{TraceSummary, build_trace};
use crate::sink::{ExportError, Spool, Uploader, default_node_name, unix_now};
use crate::textproto::PerfettoTraceConfig;
use ember_samples::timeline::Event;
use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// File-name suffix of the snapshots.
pub const PERFETTO_TRACE_SUFFIX: &str = "perfetto-trace.pb";

/// Path of the HTTP trigger endpoint.
pub const TRIGGER_PATH: &str = "/trigger";

/// A ring of events bounded by their approximate size in bytes: the oldest
/// are overwritten, as in Perfetto's RING_BUFFER fill policy.
#[derive(Debug)]
pub struct EventRing {
    events: VecDeque<Event>,
    bytes: usize,
    capacity: usize,
    overwritten: u64,
}

impl EventRing {
    /// A ring holding about `capacity_bytes` of events.
    pub fn new(capacity_bytes: usize) -> Self {
        EventRing {
            events: VecDeque::new(),
            bytes: 0,
            capacity: capacity_bytes,
            overwritten: 0,
        }
    }

    /// Appends an event, overwriting the oldest while over capacity.
    pub fn push(&mut self, event: Event) {
        self.bytes += event.approx_bytes();
        self.events.push_back(event);
        while self.bytes > self.capacity {
            match self.events.pop_front() {
                Some(old) => {
                    self.bytes -= old.approx_bytes();
                    self.overwritten += 1;
                }
                None => break,
            }
        }
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the ring is empty.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Events overwritten since creation.
    pub fn overwritten(&self) -> u64 {
        self.overwritten
    }

    /// Takes every event out, oldest first.
    pub fn drain(&mut self) -> Vec<Event> {
        self.bytes = 0;
        self.events.drain(..).collect()
    }
}

/// Counters of the daemon (for `/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerfettoDaemonStats {
    /// Snapshots written.
    pub snapshots: u64,
    /// Snapshots uploaded.
    pub uploaded: u64,
    /// Failed upload attempts.
    pub upload_errors: u64,
    /// Events overwritten in the ring before a snapshot took them.
    pub events_overwritten: u64,
    /// Events in the ring now.
    pub buffered_events: u64,
}

/// What one snapshot did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotReport {
    /// Local file name of the trace.
    pub file: String,
    /// Object key it was (or will be) uploaded to.
    pub key: String,
    /// Trace figures.
    pub summary: TraceSummary,
    /// Size of the trace in bytes.
    pub bytes: usize,
    /// Whether this snapshot reached the bucket.
    pub uploaded: bool,
    /// The upload error, if any.
    pub upload_error: Option<String>,
}

impl SnapshotReport {
    /// A one-line JSON object (the HTTP trigger's response).
    pub fn to_json(&self) -> String {
        let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        format!(
            "{{\"file\":\"{}\",\"key\":\"{}\",\"bytes\":{},\"samples\":{},\"sched_switches\":{},\"callstacks\":{},\"processes\":{},\"uploaded\":{},\"upload_error\":{}}}",
            esc(&self.file),
            esc(&self.key),
            self.bytes,
            self.summary.samples,
            self.summary.sched_switches,
            self.summary.callstacks,
            self.summary.processes,
            self.uploaded,
            self.upload_error
                .as_deref()
                .map_or("null".to_string(), |e| format!("\"{}\"", esc(e)))
        )
    }
}

/// The perfetto_daemon exporter.
pub struct PerfettoDaemon {
    config: PerfettoDaemonConfig,
    trace_config: PerfettoTraceConfig,
    stop_delay: Duration,
    node_name: String,
    uploader: Uploader,
    runs: Spool,
    ring: Mutex<EventRing>,
    cycle: tokio::sync::Mutex<HashSet<String>>,
    snapshots: AtomicU64,
    uploaded: AtomicU64,
    upload_errors: AtomicU64,
}

impl std::fmt::Debug for PerfettoDaemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfettoDaemon")
            .field("config", &self.config)
            .field("node_name", &self.node_name)
            .finish()
    }
}

/// A started daemon: its task and, for the HTTP trigger, the bound address.
#[derive(Debug)]
pub struct RunningDaemon {
    /// The trigger task (abort it to stop).
    pub task: tokio::task::JoinHandle<()>,
    /// Address of the HTTP trigger, when `trigger` is `PERFETTO_TRIGGER_HTTP`.
    pub http_addr: Option<SocketAddr>,
}

impl PerfettoDaemon {
    /// Validates `config` (including config_text and trigger_name) and sets
    /// up the ring, the local runs folder and the store client.
    pub fn new(config: PerfettoDaemonConfig) -> Result<Arc<Self>, ExportError> {
        let trace_config = config.trace_config()?;
        let stop_delay = trace_config
            .triggers
            .iter()
            .find(|t| t.name == config.trigger_name)
            .map_or(0, |t| t.stop_delay_ms);
        let uploader = Uploader::new(&config.export_to)?;
        let dir = config
            .local_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("ember-perfetto-daemon"));
        let runs = Spool::open(dir, PERFETTO_TRACE_SUFFIX)?;
        let node_name = config.node_name.clone().unwrap_or_else(default_node_name);
        let capacity =
            usize::try_from(trace_config.buffer_size_kb.saturating_mul(1024)).unwrap_or(usize::MAX);
        Ok(Arc::new(PerfettoDaemon {
            config,
            stop_delay: Duration::from_millis(stop_delay),
            trace_config,
            node_name,
            uploader,
            runs,
            ring: Mutex::new(EventRing::new(capacity)),
            cycle: tokio::sync::Mutex::new(HashSet::new()),
            snapshots: AtomicU64::new(0),
            uploaded: AtomicU64::new(0),
            upload_errors: AtomicU64::new(0),
        }))
    }

    /// The configuration in force.
    pub fn config(&self) -> &PerfettoDaemonConfig {
        &self.config
    }

    /// The parsed config_text (the agent samples at its
    /// `sampling_frequency_hz` when given).
    pub fn trace_config(&self) -> &PerfettoTraceConfig {
        &self.trace_config
    }

    /// The node name used in object keys.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The local runs folder.
    pub fn local_dir(&self) -> &std::path::Path {
        self.runs.dir()
    }

    /// Adds an event to the ring (never blocks on I/O).
    pub fn push(&self, event: Event) {
        self.ring
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }

    /// Current counters.
    pub fn stats(&self) -> PerfettoDaemonStats {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        PerfettoDaemonStats {
            snapshots: self.snapshots.load(Ordering::Relaxed),
            uploaded: self.uploaded.load(Ordering::Relaxed),
            upload_errors: self.upload_errors.load(Ordering::Relaxed),
            events_overwritten: ring.overwritten(),
            buffered_events: ring.len() as u64,
        }
    }

    /// Takes a snapshot now: waits the trigger's `stop_delay_ms`, drains the
    /// ring into a trace, keeps it locally (trimming to `max_retained_runs`)
    /// and uploads it together with retained runs that failed to upload
    /// before.
    pub async fn snapshot(&self) -> Result<SnapshotReport, ExportError> {
        let mut uploaded_names = self.cycle.lock().await;
        if !self.stop_delay.is_zero() {
            tokio::time::sleep(self.stop_delay).await;
        }
        let events = self.ring.lock().unwrap_or_else(|e| e.into_inner()).drain();
        let (bytes, summary) = build_trace(&events);
        drop(events);
        let file = self.runs.write(unix_now(), &bytes)?;
        self.snapshots.fetch_add(1, Ordering::Relaxed);
        let key_of = |name: &str| {
            self.uploader
                .target()
                .key(&self.config.bucket_subdirectory, &self.node_name, name)
        };
        let mut report = SnapshotReport {
            key: key_of(&file),
            file,
            summary,
            bytes: bytes.len(),
            ..Default::default()
        };
        for old in self.runs.trim(self.config.max_retained_runs)? {
            uploaded_names.remove(&old);
        }
        for name in self.runs.files()? {
            if uploaded_names.contains(&name) {
                continue;
            }
            let data = if name == report.file {
                bytes.clone()
            } else {
                self.runs.read(&name)?
            };
            match self.uploader.put(&key_of(&name), data).await {
                Ok(()) => {
                    self.uploaded.fetch_add(1, Ordering::Relaxed);
                    if name == report.file {
                        report.uploaded = true;
                    }
                    uploaded_names.insert(name);
                }
                Err(e) => {
                    self.upload_errors.fetch_add(1, Ordering::Relaxed);
                    report.upload_error = Some(e.to_string());
                    break;
                }
            }
        }
        Ok(report)
    }

    /// Starts the configured trigger on the current tokio runtime: a timer
    /// every `interval` ms, or the HTTP endpoint (`POST` or `GET`
    /// [`TRIGGER_PATH`], optional `?name=` must equal `trigger_name`) bound to
    /// `http_listen`.
    pub async fn start(self: &Arc<Self>) -> Result<RunningDaemon, ExportError> {
        self.spawn(None)
    }

    /// Like [`start`](Self::start) but callable from synchronous code running
    /// inside a tokio runtime. For the HTTP trigger, `listener` is a socket the
    /// caller already bound to `http_listen` (the agent keeps it across
    /// reloads so the port never closes while one daemon replaces another);
    /// `None` binds `http_listen` here.
    pub fn spawn(
        self: &Arc<Self>,
        listener: Option<std::net::TcpListener>,
    ) -> Result<RunningDaemon, ExportError> {
        let this = Arc::clone(self);
        match self.config.trigger {
            PerfettoTrigger::TimeInterval => {
                let period = Duration::from_millis(self.config.interval);
                let task = tokio::spawn(async move {
                    let mut tick =
                        tokio::time::interval_at(tokio::time::Instant::now() + period, period);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        tick.tick().await;
                        log_snapshot(this.snapshot().await);
                    }
                });
                Ok(RunningDaemon {
                    task,
                    http_addr: None,
                })
            }
            PerfettoTrigger::Http => {
                let listen = &self.config.http_listen;
                let std_listener = match listener {
                    Some(l) => l,
                    None => bind_trigger(listen)?,
                };
                let http = |what: &str, e: std::io::Error| {
                    ExportError::Http(format!(
                        "perfetto_daemon HTTP trigger on {listen}: {what}: {e}"
                    ))
                };
                std_listener
                    .set_nonblocking(true)
                    .map_err(|e| http("non-blocking mode", e))?;
                let addr = std_listener
                    .local_addr()
                    .map_err(|e| http("listener address", e))?;
                let listener = tokio::net::TcpListener::from_std(std_listener)
                    .map_err(|e| http("registering the listener", e))?;
                let app = axum::Router::new()
                    .route(
                        TRIGGER_PATH,
                        axum::routing::post(trigger_handler).get(trigger_handler),
                    )
                    .with_state(this);
                let task = tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, app).await {
                        tracing::error!(error = %e, "perfetto_daemon HTTP trigger stopped");
                    }
                });
                Ok(RunningDaemon {
                    task,
                    http_addr: Some(addr),
                })
            }
        }
    }
}

/// Binds the HTTP trigger's listening socket on `listen` (`host:port`).
pub fn bind_trigger(listen: &str) -> Result<std::net::TcpListener, ExportError> {
    std::net::TcpListener::bind(listen)
        .map_err(|e| ExportError::Http(format!("perfetto_daemon cannot listen on {listen}: {e}")))
}

fn log_snapshot(result: Result<SnapshotReport, ExportError>) {
    match result {
        Ok(r) => {
            if let Some(e) = r.upload_error {
                tracing::warn!(error = ?e, "perfetto_daemon upload failed");
            }
        }
        Err(e) => tracing::error!(error = %e, "perfetto_daemon snapshot failed"),
    }
}

async fn trigger_handler(
    axum::extract::State(daemon): axum::extract::State<Arc<PerfettoDaemon>>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> (axum::http::StatusCode, String) {
    use axum::http::StatusCode;
    let requested = query
        .as_deref()
        .unwrap_or("")
        .split('&')
        .find_map(|kv| kv.strip_prefix("name="));
    if let Some(name) = requested
        && name != daemon.config.trigger_name
    {
        return (
            StatusCode::NOT_FOUND,
            format!(
                "{{\"error\":\"unknown trigger name; this daemon's trigger_name is {:?}\"}}\n",
                daemon.config.trigger_name
            ),
        );
    }
    match daemon.snapshot().await {
        Ok(r) => (StatusCode::OK, r.to_json() + "\n"),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "{{\"error\":\"{}\"}}\n",
                e.to_string().replace('\\', "\\\\").replace('"', "\\\"")
            ),
        ),
    }
}

/// Default URL of the HTTP trigger.
pub const DEFAULT_TRIGGER_URL: &str = "http://127.0.0.1:3565/trigger";

/// Calls the HTTP trigger at `url` (`http[s]://host:port/path`; a URL without a path means
/// [`TRIGGER_PATH`]) through Ember's HTTP client and returns the response body (the snapshot
/// report as JSON). Non-2xx answers are errors carrying the body. Proxies from the
/// environment are not used: the trigger is the local agent's.
pub fn request_snapshot(url: &str, timeout: Duration) -> Result<String, ExportError> {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let url = if after_scheme.contains('/') {
        url.to_string()
    } else {
        format!("{}{TRIGGER_PATH}", url.trim_end_matches('/'))
    };
    let config = ember_http::ClientConfig {
        connect_timeout: timeout,
        timeout,
        env_proxy: false,
        ..ember_http::ClientConfig::default()
    };
    let client = ember_http::BlockingClient::new(&config)
        .map_err(|e| ExportError::Http(format!("{url}: {e}")))?;
    let response = client
        .send(ember_http::Request::post(&url, Vec::new()))
        .map_err(|e| match e {
            ember_http::HttpError::Connect { .. } => ExportError::Http(format!(
                "cannot reach the perfetto_daemon trigger at {url}: {e} (is the agent running \
                 with exporters.perfetto_daemon.trigger: PERFETTO_TRIGGER_HTTP?)"
            )),
            e => ExportError::Http(format!("{url}: {e}")),
        })?;
    let body = String::from_utf8_lossy(&response.body).into_owned();
    if !response.is_success() {
        return Err(ExportError::Http(format!(
            "{url}: HTTP {}: {}",
            response.status,
            body.trim()
        )));
    }
    Ok(body)
}
