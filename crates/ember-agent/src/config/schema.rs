//! The configuration's schema: one type per section, each with its documented defaults
//! (`default-config.yaml` spells them out), and the few derived values the agent needs.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Dur};

/// The whole agent configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The agent's own HTTP endpoint (metrics, config).
    pub admin: AdminConfig,
    /// Labels added to every profile the agent sends.
    pub external_labels: BTreeMap<String, String>,
    /// Continuous whole-host profiling.
    pub profiling: ProfilingConfig,
    /// Pull scraping of pprof endpoints.
    pub scrape_configs: Vec<ScrapeConfig>,
    /// Where profiles go.
    pub exporters: ExportersConfig,
}

/// `admin`: the agent's HTTP endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// `host:port` of `/metrics`, `/ready` and `/api/v1/config` (default `127.0.0.1:4041`;
    /// port 0 picks a free port). Who may use it is not configured here but on the command
    /// line (`--admin-token-file`), so a configuration change cannot lift its own guard.
    pub listen: String,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: "127.0.0.1:4041".into(),
        }
    }
}

/// `profiling`: continuous sampling of this host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfilingConfig {
    /// Whether the host is sampled at all (default true).
    pub enabled: bool,
    /// CPU sampling.
    pub cpu: CpuConfig,
    /// Off-CPU (blocked) time.
    pub off_cpu: OffCpuConfig,
    /// How often a profile per process is cut and sent (default 15s).
    pub upload_interval: Dur,
    /// Which processes are profiled.
    pub targets: TargetsConfig,
    /// Prometheus relabel rules over the process meta labels (default none).
    pub relabel_configs: Vec<RelabelConfig>,
}

impl Default for ProfilingConfig {
    fn default() -> Self {
        ProfilingConfig {
            enabled: true,
            cpu: CpuConfig::default(),
            off_cpu: OffCpuConfig::default(),
            upload_interval: Dur::secs(15),
            targets: TargetsConfig::default(),
            relabel_configs: Vec::new(),
        }
    }
}

/// `profiling.cpu`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuConfig {
    /// Sample CPU stacks (default true).
    pub enabled: bool,
    /// Samples per second per CPU (default 19; 1..=10000).
    pub sample_rate_hz: u64,
}

impl Default for CpuConfig {
    fn default() -> Self {
        CpuConfig {
            enabled: true,
            sample_rate_hz: 19,
        }
    }
}

/// `profiling.off_cpu`: time threads spend blocked (sleeping, waiting on I/O or locks),
/// measured from the scheduler's context switches and sent per process as the
/// `process_cpu:off_cpu:nanoseconds:cpu:nanoseconds` profile type (the name `ember record
/// --off-cpu` profiles get on the server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OffCpuConfig {
    /// Record off-CPU time (default false: every context switch of the host is then sampled
    /// with its stack, which costs CPU on busy hosts).
    pub enabled: bool,
    /// Blocking episodes shorter than this are not counted (default 1ms; 0s counts all).
    pub min_duration: Dur,
}

impl Default for OffCpuConfig {
    fn default() -> Self {
        OffCpuConfig {
            enabled: false,
            min_duration: Dur::millis(1),
        }
    }
}

/// `profiling.targets`: a process is profiled when `all` is true, or when it matches any of
/// the given filters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TargetsConfig {
    /// Every process on the host (default true).
    pub all: bool,
    /// Regex over the command name (`/proc/PID/comm`), anchored.
    pub comm: Option<String>,
    /// Regex over the executable path (`/proc/PID/exe`), anchored.
    pub exe: Option<String>,
    /// These pids.
    pub pids: Vec<u32>,
    /// Regex over the cgroup path (`/proc/PID/cgroup`, e.g. `/system.slice/nginx.service`), unanchored.
    pub cgroup: Option<String>,
}

impl Default for TargetsConfig {
    fn default() -> Self {
        TargetsConfig {
            all: true,
            comm: None,
            exe: None,
            pids: Vec::new(),
            cgroup: None,
        }
    }
}

/// Relabel actions (Prometheus semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RelabelAction {
    /// Write `replacement` (with regex groups) into `target_label` when the regex matches.
    Replace,
    /// Keep the target only when the regex matches.
    Keep,
    /// Drop the target when the regex matches.
    Drop,
    /// Copy labels whose name matches the regex to the name given by `replacement`.
    Labelmap,
    /// Remove labels whose name matches.
    Labeldrop,
    /// Remove labels whose name does not match.
    Labelkeep,
}

/// One Prometheus relabel rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RelabelConfig {
    /// Labels whose values are joined with `separator` and matched (default none).
    pub source_labels: Vec<String>,
    /// Joins source label values (default `;`).
    pub separator: String,
    /// Anchored regex (default `(.*)`).
    pub regex: String,
    /// Label written by `replace` (required for it).
    pub target_label: Option<String>,
    /// Replacement with `$1`, `${name}` references (default `$1`).
    pub replacement: String,
    /// What to do (default `replace`).
    pub action: RelabelAction,
}

impl Default for RelabelConfig {
    fn default() -> Self {
        RelabelConfig {
            source_labels: Vec::new(),
            separator: ";".into(),
            regex: "(.*)".into(),
            target_label: None,
            replacement: "$1".into(),
            action: RelabelAction::Replace,
        }
    }
}

/// One scrape job (the Grafana Alloy `pyroscope.scrape` model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScrapeConfig {
    /// Job name, the `job` label (required, unique).
    pub job_name: String,
    /// Targets and their labels.
    pub static_configs: Vec<StaticConfig>,
    /// Time between scrapes of a target (default 15s).
    pub scrape_interval: Dur,
    /// Time limit of one scrape; default (null) = scrape_interval + 3s, so that a CPU profile
    /// of scrape_interval - 1 seconds fits.
    pub scrape_timeout: Option<Dur>,
    /// Profile types scraped from each target.
    pub profiling_config: ProfilingTypes,
    /// Relabel rules over the target labels (`__address__`, `job`, static labels), applied
    /// before scraping (default none).
    pub relabel_configs: Vec<RelabelConfig>,
}

impl Default for ScrapeConfig {
    fn default() -> Self {
        ScrapeConfig {
            job_name: String::new(),
            static_configs: Vec::new(),
            scrape_interval: Dur::secs(15),
            scrape_timeout: None,
            profiling_config: ProfilingTypes::default(),
            relabel_configs: Vec::new(),
        }
    }
}

impl ScrapeConfig {
    /// The effective scrape timeout.
    pub fn timeout(&self) -> Duration {
        self.scrape_timeout
            .map(|d| d.0)
            .unwrap_or(self.scrape_interval.0 + Duration::from_secs(3))
    }
}

/// `static_configs[]`: targets sharing labels.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StaticConfig {
    /// `host:port` (or `http://host:port`) of each target.
    pub targets: Vec<String>,
    /// Labels added to profiles of these targets (`service_name` among them, else the job name is used).
    pub labels: BTreeMap<String, String>,
}

/// One profile type of a scrape job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileTypeConfig {
    /// Whether it is scraped.
    #[serde(default)]
    pub enabled: bool,
    /// URL path (with query) on the target.
    pub path: String,
    /// The target serves cumulative values: the agent sends the difference between two
    /// scrapes (the first scrape of a target only primes it).
    #[serde(default)]
    pub delta: bool,
}

impl ProfileTypeConfig {
    fn new(enabled: bool, path: &str, delta: bool) -> Self {
        ProfileTypeConfig {
            enabled,
            path: path.into(),
            delta,
        }
    }
}

/// A custom profile type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomProfileConfig {
    /// Profile name sent as `__name__` (e.g. `memory`, `process_cpu`, `my_profile`).
    pub name: String,
    /// Whether it is scraped (default true).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// URL path (with query) on the target.
    pub path: String,
    /// Cumulative values: send deltas (default false).
    #[serde(default)]
    pub delta: bool,
}

fn yes() -> bool {
    true
}

/// `profiling_config`: the profile types and their paths. In `process_cpu`'s path,
/// `{seconds}` is replaced by scrape_interval - 1 (at least 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProfilingTypes {
    /// Go CPU profile (on; `/debug/pprof/profile?seconds={seconds}`).
    pub process_cpu: ProfileTypeConfig,
    /// Go heap allocations (on; `/debug/pprof/allocs`, delta).
    pub memory: ProfileTypeConfig,
    /// Go blocking (on; `/debug/pprof/block`, delta).
    pub block: ProfileTypeConfig,
    /// Go mutex contention (on; `/debug/pprof/mutex`, delta).
    pub mutex: ProfileTypeConfig,
    /// Go goroutines (on; `/debug/pprof/goroutine`).
    pub goroutine: ProfileTypeConfig,
    /// godeltaprof heap (off; `/debug/pprof/delta_heap`, already a delta).
    pub godeltaprof_memory: ProfileTypeConfig,
    /// godeltaprof mutex (off; `/debug/pprof/delta_mutex`).
    pub godeltaprof_mutex: ProfileTypeConfig,
    /// godeltaprof block (off; `/debug/pprof/delta_block`).
    pub godeltaprof_block: ProfileTypeConfig,
    /// Ember SDK CPU endpoint (off; `/profile/cpu?seconds={seconds}`).
    pub ember_cpu: ProfileTypeConfig,
    /// Ember SDK heap endpoint (off; `/profile/heap`; delta: its `alloc_*` are cumulative
    /// since the service started, like Go's `/debug/pprof/allocs`).
    pub ember_heap: ProfileTypeConfig,
    /// More endpoints (default none).
    pub custom: Vec<CustomProfileConfig>,
}

impl Default for ProfilingTypes {
    fn default() -> Self {
        ProfilingTypes {
            process_cpu: ProfileTypeConfig::new(
                true,
                "/debug/pprof/profile?seconds={seconds}",
                false,
            ),
            memory: ProfileTypeConfig::new(true, "/debug/pprof/allocs", true),
            block: ProfileTypeConfig::new(true, "/debug/pprof/block", true),
            mutex: ProfileTypeConfig::new(true, "/debug/pprof/mutex", true),
            goroutine: ProfileTypeConfig::new(true, "/debug/pprof/goroutine", false),
            godeltaprof_memory: ProfileTypeConfig::new(false, "/debug/pprof/delta_heap", false),
            godeltaprof_mutex: ProfileTypeConfig::new(false, "/debug/pprof/delta_mutex", false),
            godeltaprof_block: ProfileTypeConfig::new(false, "/debug/pprof/delta_block", false),
            ember_cpu: ProfileTypeConfig::new(false, "/profile/cpu?seconds={seconds}", false),
            ember_heap: ProfileTypeConfig::new(false, "/profile/heap", true),
            custom: Vec::new(),
        }
    }
}

impl ProfilingTypes {
    /// Enabled types as (profile name sent as `__name__`, config key, path, delta).
    pub fn enabled(&self) -> Vec<(String, String, String, bool)> {
        let named = [
            ("process_cpu", "process_cpu", &self.process_cpu),
            ("memory", "memory", &self.memory),
            ("block", "block", &self.block),
            ("mutex", "mutex", &self.mutex),
            ("goroutine", "goroutine", &self.goroutine),
            ("memory", "godeltaprof_memory", &self.godeltaprof_memory),
            ("mutex", "godeltaprof_mutex", &self.godeltaprof_mutex),
            ("block", "godeltaprof_block", &self.godeltaprof_block),
            ("process_cpu", "ember_cpu", &self.ember_cpu),
            ("memory", "ember_heap", &self.ember_heap),
        ];
        let mut out: Vec<_> = named
            .into_iter()
            .filter(|(_, _, t)| t.enabled)
            .map(|(name, key, t)| (name.to_string(), key.to_string(), t.path.clone(), t.delta))
            .collect();
        out.extend(self.custom.iter().filter(|c| c.enabled).map(|c| {
            (
                c.name.clone(),
                format!("custom:{}", c.name),
                c.path.clone(),
                c.delta,
            )
        }));
        out
    }
}

/// `exporters`: several may be active at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExportersConfig {
    /// Push to an Ember or Pyroscope server (default: `http://127.0.0.1:4040`; null disables).
    pub server: Option<ServerExporterConfig>,
    /// Chalk-style perf collector dumps to a bucket (schema owned by `ember-export`; present =
    /// enabled, default null).
    pub perf_collector: Option<ember_export::PerfCollectorConfig>,
    /// Chalk-style Perfetto daemon snapshots (schema owned by `ember-export`; present = enabled,
    /// default null).
    pub perfetto_daemon: Option<ember_export::PerfettoDaemonConfig>,
}

impl Default for ExportersConfig {
    fn default() -> Self {
        ExportersConfig {
            server: Some(ServerExporterConfig::default()),
            perf_collector: None,
            perfetto_daemon: None,
        }
    }
}

/// `exporters.server`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerExporterConfig {
    /// Server base URL (default `http://127.0.0.1:4040`).
    pub url: String,
    /// Tenant sent as `X-Scope-OrgID` (default none).
    pub tenant_id: Option<String>,
    /// Bearer token (default none).
    pub bearer_token: Option<String>,
    /// File whose first line is the bearer token (default none).
    pub bearer_token_file: Option<String>,
    /// Most bytes buffered while the server is unreachable; the oldest profiles are dropped
    /// beyond (default 67108864 = 64 MiB).
    pub queue_bytes: u64,
    /// Time limit of one push (default 10s).
    pub timeout: Dur,
    /// First retry delay, doubled per failure with jitter (default 500ms).
    pub min_backoff: Dur,
    /// Longest retry delay (default 30s).
    pub max_backoff: Dur,
    /// TLS settings of an `https://` url.
    pub tls: TlsClientConfig,
}

/// `exporters.server.tls`: how an `https://` server is verified.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsClientConfig {
    /// PEM file of the certificates to trust (a private CA, or the server's self-signed
    /// certificate); default none: the system's root certificates.
    pub ca_file: Option<String>,
}

impl Default for ServerExporterConfig {
    fn default() -> Self {
        // The push client's defaults, written once there: the agent and `ember push` cannot
        // drift apart.
        let push = ember_push::PushConfig::default();
        ServerExporterConfig {
            url: push.url,
            tenant_id: push.tenant_id,
            bearer_token: push.bearer_token,
            bearer_token_file: None,
            queue_bytes: push.queue_bytes as u64,
            timeout: Dur(push.timeout),
            min_backoff: Dur(push.min_backoff),
            max_backoff: Dur(push.max_backoff),
            tls: TlsClientConfig::default(),
        }
    }
}

impl ServerExporterConfig {
    /// The push client settings (reads the token file).
    pub fn push_config(&self) -> Result<ember_push::PushConfig, ConfigError> {
        let token = match &self.bearer_token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| {
                        ConfigError::new(
                            "exporters.server.bearer_token_file",
                            format!("{path}: {e}"),
                        )
                    })?
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            ),
            None => self.bearer_token.clone(),
        };
        Ok(ember_push::PushConfig {
            url: self.url.clone(),
            tenant_id: self.tenant_id.clone(),
            bearer_token: token,
            queue_bytes: self.queue_bytes as usize,
            timeout: self.timeout.0,
            min_backoff: self.min_backoff.0,
            max_backoff: self.max_backoff.0,
            tls_ca_file: self.tls.ca_file.as_ref().map(std::path::PathBuf::from),
            ..ember_push::PushConfig::default()
        })
    }
}

impl Config {
    /// The configuration as YAML (what `describe` prints, and what `apply` diffs).
    pub fn to_yaml(&self) -> String {
        serde_norway::to_string(self).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
    }
}
