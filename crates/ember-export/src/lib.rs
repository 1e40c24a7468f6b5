//! Ember's bucket exporters for the agent (`exporters.perf_collector` and
//! `exporters.perfetto_daemon`): configuration and validation
//! ([`config`]), the exporters' input events ([`events`]), `perf script` text
//! ([`perf_script`]), Perfetto traces ([`perfetto`], config_text in
//! [`textproto`]), object storage and the local spool ([`sink`]), and the two
//! exporters ([`perf_collector`], [`perfetto_daemon`]).

#![warn(missing_docs)]
pub mod config;
pub mod events;
pub mod perf_collector;
pub mod perf_script;
pub mod perfetto;
pub mod perfetto_daemon;
pub mod sampler;
pub mod sink;
pub mod textproto;

pub use config::{
    ConfigError, DEFAULT_PERFETTO_CONFIG_TEXT, PerfCollectorConfig, PerfettoDaemonConfig,
    PerfettoTrigger,
};
pub use events::{Event, Frame, Sample, SchedSwitch};
pub use perf_collector::{DumpReport, PerfCollector, PerfCollectorStats};
pub use perf_script::{perf_script_gzip, write_perf_script};
pub use perfetto::{TraceSummary, build_trace};
pub use perfetto_daemon::{
    DEFAULT_TRIGGER_URL, EventRing, PerfettoDaemon, PerfettoDaemonStats, RunningDaemon,
    SnapshotReport, bind_trigger, request_snapshot,
};
pub use sampler::events_from_recording;
pub use sink::{ExportError, ExportTarget, Scheme, Uploader, default_node_name, timestamp_utc};
pub use textproto::{PerfettoTraceConfig, TextProtoError, TriggerSpec, parse_trace_config};
