//! Ember's bucket exporters for the agent (`exporters.perf_collector` and
//! `exporters.perfetto_daemon`): configuration and validation
//! ([`config`]), Perfetto traces ([`perfetto`], config_text in
//! [`textproto`]), object storage and the local spool ([`sink`]), and the two
//! exporters ([`perf_collector`], [`perfetto_daemon`]).

//!
//! Their input is the symbolized timeline of `ember-samples` ([`Event`]); this crate never
//! sees how samples were captured.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
pub mod config;
pub mod perf_collector;
pub mod perfetto;
pub mod perfetto_daemon;
pub mod sink;
pub mod textproto;

pub use config::{
    ConfigError, DEFAULT_PERFETTO_CONFIG_TEXT, PerfCollectorConfig, PerfettoDaemonConfig,
    PerfettoTrigger,
};
pub use ember_samples::timeline::{Event, Frame, Sample, SchedSwitch};
pub use perf_collector::{DumpReport, PerfCollector, PerfCollectorStats};
pub use perfetto::{TraceSummary, build_trace};
pub use perfetto_daemon::{
    DEFAULT_TRIGGER_URL, EventRing, PerfettoDaemon, PerfettoDaemonStats, RunningDaemon,
    SnapshotReport, bind_trigger, request_snapshot,
};
pub use sink::{ExportError, ExportTarget, Scheme, Uploader, default_node_name, timestamp_utc};
pub use textproto::{PerfettoTraceConfig, TextProtoError, TriggerSpec, parse_trace_config};
