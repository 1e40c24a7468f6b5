//! Configuration of the two bucket exporters, `exporters.perf_collector` and
//! `exporters.perfetto_daemon` of the agent config, with Chalk's field names
//! and defaults, plus validation that names the field path and the reason.

use crate::sink::ExportTarget;
use crate::textproto::{PerfettoTraceConfig, parse_trace_config};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use thiserror::Error;

/// An invalid field: `path` is the dotted path from the config root (e.g.
/// `exporters.perf_collector.export_to`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{path}: {reason}")]
pub struct ConfigError {
    /// Dotted field path.
    pub path: String,
    /// What is wrong and what is expected.
    pub reason: String,
}

fn bad(prefix: &str, field: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        path: format!("{prefix}.{field}"),
        reason: reason.into(),
    }
}

/// Where `exporters.perf_collector` sits in the agent config.
pub const PERF_COLLECTOR_PATH: &str = "exporters.perf_collector";
/// Where `exporters.perfetto_daemon` sits in the agent config.
pub const PERFETTO_DAEMON_PATH: &str = "exporters.perfetto_daemon";

/// `exporters.perf_collector`: periodic gzip'd `perf script` dumps uploaded to
/// a bucket (the shape of Chalk's perf collector).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerfCollectorConfig {
    /// Sampling frequency of the dumps' samples in Hz (default 99).
    pub perf_polling_frequency_hz: u32,
    /// Record call graphs (default true); false keeps only the leaf frame.
    pub call_graph: bool,
    /// Length of one dump in seconds (default 60).
    pub dump_duration_seconds: u64,
    /// Dumps kept on local disk while uploads fail (default 3); older ones are
    /// dropped and counted.
    pub max_dumps_retained: usize,
    /// Folder inside the bucket (may be empty).
    pub bucket_subdirectory: String,
    /// Destination: `s3://bucket/prefix`, `gs://..`, `az://..` or
    /// `file:///dir` (required).
    pub export_to: String,
    /// Node name in object keys; default: `$NODE_NAME`, else the hostname.
    pub node_name: Option<String>,
    /// Local folder for dumps not yet uploaded; default:
    /// `$TMPDIR/ember-perf-collector`.
    pub local_dir: Option<PathBuf>,
}

impl Default for PerfCollectorConfig {
    fn default() -> Self {
        PerfCollectorConfig {
            perf_polling_frequency_hz: 99,
            call_graph: true,
            dump_duration_seconds: 60,
            max_dumps_retained: 3,
            bucket_subdirectory: String::new(),
            export_to: String::new(),
            node_name: None,
            local_dir: None,
        }
    }
}

fn validate_common(
    prefix: &str,
    export_to: &str,
    bucket_subdirectory: &str,
    node_name: Option<&str>,
) -> Result<(), ConfigError> {
    if export_to.is_empty() {
        return Err(bad(
            prefix,
            "export_to",
            "required: s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///dir",
        ));
    }
    ExportTarget::parse(export_to).map_err(|e| bad(prefix, "export_to", e.to_string()))?;
    if bucket_subdirectory
        .split('/')
        .any(|seg| seg == ".." || seg == ".")
    {
        return Err(bad(
            prefix,
            "bucket_subdirectory",
            "must not contain '.' or '..' path segments",
        ));
    }
    if let Some(n) = node_name
        && (n.is_empty() || n.contains('/') || n == "." || n == "..")
    {
        return Err(bad(
            prefix,
            "node_name",
            "must be a non-empty name without '/'",
        ));
    }
    Ok(())
}

impl PerfCollectorConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let p = PERF_COLLECTOR_PATH;
        if !(1..=10_000).contains(&self.perf_polling_frequency_hz) {
            return Err(bad(
                p,
                "perf_polling_frequency_hz",
                format!(
                    "{} is out of range: 1 to 10000 Hz",
                    self.perf_polling_frequency_hz
                ),
            ));
        }
        if !(1..=86_400).contains(&self.dump_duration_seconds) {
            return Err(bad(
                p,
                "dump_duration_seconds",
                format!(
                    "{} is out of range: 1 to 86400 seconds",
                    self.dump_duration_seconds
                ),
            ));
        }
        if self.max_dumps_retained == 0 {
            return Err(bad(
                p,
                "max_dumps_retained",
                "must be at least 1 (the dump being uploaded)",
            ));
        }
        validate_common(
            p,
            &self.export_to,
            &self.bucket_subdirectory,
            self.node_name.as_deref(),
        )
    }
}

/// How the perfetto_daemon decides to take a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PerfettoTrigger {
    /// Every `interval` milliseconds.
    #[serde(rename = "PERFETTO_TRIGGER_TIME_INTERVAL")]
    TimeInterval,
    /// On a request to the HTTP trigger endpoint.
    #[serde(rename = "PERFETTO_TRIGGER_HTTP")]
    Http,
}

/// Default `config_text`: a 16 MiB ring buffer, 99 Hz `linux.perf` sampling,
/// and one trigger named `ember-snapshot`.
pub const DEFAULT_PERFETTO_CONFIG_TEXT: &str = r#"buffers {
  size_kb: 16384
  fill_policy: RING_BUFFER
}
data_sources {
  config {
    name: "linux.perf"
    perf_event_config {
      timebase { frequency: 99 }
      callstack_sampling { kernel_frames: true }
    }
  }
}
data_sources {
  config {
    name: "linux.ftrace"
    ftrace_config { ftrace_events: "sched/sched_switch" }
  }
}
trigger_config {
  trigger_mode: STOP_TRACING
  triggers {
    name: "ember-snapshot"
    stop_delay_ms: 0
  }
}
"#;

/// `exporters.perfetto_daemon`: a ring buffer of recent samples and scheduler
/// switches, snapshotted into Perfetto traces on a trigger (the shape of
/// Chalk's Perfetto daemon).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PerfettoDaemonConfig {
    /// Perfetto text-format TraceConfig (subset: buffers.size_kb, linux.perf
    /// sampling frequency, trigger_config).
    pub config_text: String,
    /// `PERFETTO_TRIGGER_TIME_INTERVAL` (default) or `PERFETTO_TRIGGER_HTTP`.
    pub trigger: PerfettoTrigger,
    /// Snapshot period in milliseconds for the time-interval trigger
    /// (default 60000).
    pub interval: u64,
    /// Trigger name; must be one of config_text's trigger_config.triggers
    /// (default `ember-snapshot`).
    pub trigger_name: String,
    /// Snapshot files kept on local disk (default 3).
    pub max_retained_runs: usize,
    /// Listen address of the HTTP trigger (default `127.0.0.1:3565`).
    pub http_listen: String,
    /// Folder inside the bucket (may be empty).
    pub bucket_subdirectory: String,
    /// Destination, as for perf_collector (required).
    pub export_to: String,
    /// Node name in object keys; default: `$NODE_NAME`, else the hostname.
    pub node_name: Option<String>,
    /// Local folder of the retained runs; default:
    /// `$TMPDIR/ember-perfetto-daemon`.
    pub local_dir: Option<PathBuf>,
}

impl Default for PerfettoDaemonConfig {
    fn default() -> Self {
        PerfettoDaemonConfig {
            config_text: DEFAULT_PERFETTO_CONFIG_TEXT.to_string(),
            trigger: PerfettoTrigger::TimeInterval,
            interval: 60_000,
            trigger_name: "ember-snapshot".to_string(),
            max_retained_runs: 3,
            http_listen: "127.0.0.1:3565".to_string(),
            bucket_subdirectory: String::new(),
            export_to: String::new(),
            node_name: None,
            local_dir: None,
        }
    }
}

impl PerfettoDaemonConfig {
    /// Checks every field (parsing config_text); the error names the first
    /// bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.trace_config().map(|_| ())
    }

    /// Validates and returns the parsed config_text.
    pub fn trace_config(&self) -> Result<PerfettoTraceConfig, ConfigError> {
        let p = PERFETTO_DAEMON_PATH;
        let tc = parse_trace_config(&self.config_text)
            .map_err(|e| bad(p, "config_text", e.to_string()))?;
        if tc.triggers.is_empty() {
            return Err(bad(
                p,
                "config_text",
                format!(
                    "no trigger_config {{ triggers {{ name: \"{}\" }} }} block: trigger_name must \
                     name one of its triggers",
                    self.trigger_name
                ),
            ));
        }
        if !tc.triggers.iter().any(|t| t.name == self.trigger_name) {
            let names: Vec<String> = tc
                .triggers
                .iter()
                .map(|t| format!("\"{}\"", t.name))
                .collect();
            return Err(bad(
                p,
                "trigger_name",
                format!(
                    "\"{}\" does not match config_text's trigger_config (triggers: {})",
                    self.trigger_name,
                    names.join(", ")
                ),
            ));
        }
        if let Some(mode) = &tc.trigger_mode
            && !matches!(
                mode.as_str(),
                "STOP_TRACING" | "CLONE_SNAPSHOT" | "START_TRACING" | "UNSPECIFIED"
            )
        {
            return Err(bad(
                p,
                "config_text",
                format!(
                    "trigger_config.trigger_mode {mode} is not STOP_TRACING, CLONE_SNAPSHOT or \
                     START_TRACING"
                ),
            ));
        }
        // Guards the ring's memory: 4 GiB is far beyond any real node's need.
        if tc.buffer_size_kb > 4 * 1024 * 1024 {
            return Err(bad(
                p,
                "config_text",
                format!(
                    "buffers.size_kb {} is above the 4194304 KiB limit",
                    tc.buffer_size_kb
                ),
            ));
        }
        if self.trigger == PerfettoTrigger::TimeInterval
            && !(100..=86_400_000).contains(&self.interval)
        {
            return Err(bad(
                p,
                "interval",
                format!("{} ms is out of range: 100 to 86400000 ms", self.interval),
            ));
        }
        if self.max_retained_runs == 0 {
            return Err(bad(p, "max_retained_runs", "must be at least 1"));
        }
        if self.trigger == PerfettoTrigger::Http
            && self.http_listen.parse::<std::net::SocketAddr>().is_err()
        {
            return Err(bad(
                p,
                "http_listen",
                format!(
                    "{:?} is not an address:port such as 127.0.0.1:3565",
                    self.http_listen
                ),
            ));
        }
        validate_common(
            p,
            &self.export_to,
            &self.bucket_subdirectory,
            self.node_name.as_deref(),
        )?;
        Ok(tc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_chalks() {
        let c: PerfCollectorConfig =
            serde_json::from_str(r#"{"export_to":"file:///tmp/x"}"#).unwrap();
        assert_eq!(c.perf_polling_frequency_hz, 99);
        assert!(c.call_graph);
        assert_eq!(c.dump_duration_seconds, 60);
        assert_eq!(c.max_dumps_retained, 3);
        c.validate().unwrap();
        let d: PerfettoDaemonConfig = serde_json::from_str(r#"{"export_to":"s3://b/p"}"#).unwrap();
        d.validate().unwrap();
        assert_eq!(d.trace_config().unwrap().buffer_size_kb, 16384);
        assert_eq!(d.trigger, PerfettoTrigger::TimeInterval);
        assert_eq!(d.interval, 60_000);
        assert_eq!(d.max_retained_runs, 3);
        assert_eq!(d.http_listen, "127.0.0.1:3565");
        assert_eq!(d.trigger_name, "ember-snapshot");
        // Chalk's trigger names are the configuration's spelling.
        let h: PerfettoDaemonConfig = serde_json::from_str(
            r#"{"export_to":"gs://b","trigger":"PERFETTO_TRIGGER_HTTP","interval":5000}"#,
        )
        .unwrap();
        assert_eq!((h.trigger, h.interval), (PerfettoTrigger::Http, 5000));
        h.validate().unwrap();
        assert!(serde_json::from_str::<PerfettoDaemonConfig>(r#"{"trigger":"HTTP"}"#).is_err());
    }

    #[test]
    fn errors_name_the_field() {
        let c = PerfCollectorConfig::default();
        assert_eq!(
            c.validate().unwrap_err().path,
            "exporters.perf_collector.export_to"
        );
        let c = PerfCollectorConfig {
            export_to: "ftp://x".into(),
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err().path,
            "exporters.perf_collector.export_to"
        );
        let c = PerfCollectorConfig {
            export_to: "s3://b".into(),
            max_dumps_retained: 0,
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err().path,
            "exporters.perf_collector.max_dumps_retained"
        );
        let d = PerfettoDaemonConfig {
            export_to: "s3://b".into(),
            trigger_name: "nope".into(),
            ..Default::default()
        };
        let e = d.validate().unwrap_err();
        assert_eq!(e.path, "exporters.perfetto_daemon.trigger_name");
        assert!(e.reason.contains("\"ember-snapshot\""), "{e}");
        let d = PerfettoDaemonConfig {
            export_to: "s3://b".into(),
            config_text: "buffers { size_kb: 8 }".into(),
            ..Default::default()
        };
        assert_eq!(
            d.validate().unwrap_err().path,
            "exporters.perfetto_daemon.config_text"
        );
        let e = serde_json::from_str::<PerfettoDaemonConfig>(r#"{"trigger":"SOMETIMES"}"#);
        assert!(e.is_err());
        let e = serde_json::from_str::<PerfCollectorConfig>(r#"{"dump_duration":5}"#);
        assert!(e.is_err(), "unknown fields are rejected");
    }
}
