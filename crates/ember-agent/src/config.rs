//! The agent's configuration: the schema (every field has a default, see
//! [`DEFAULT_CONFIG_YAML`] for the documented reference), YAML/JSON parsing, semantic
//! validation with field paths, and a line diff used by `ember agent apply`.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The documented default configuration, printed by `ember agent --print-default-config`.
/// A test checks that it parses to exactly [`Config::default`].
pub const DEFAULT_CONFIG_YAML: &str = include_str!("default-config.yaml");

/// A configuration problem: the field path (`scrape_configs[0].scrape_interval`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfigError {
    /// Dotted path of the offending field (`""` for the whole document).
    pub path: String,
    /// What is wrong and what is expected.
    pub reason: String,
}

impl ConfigError {
    fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Every problem found in a configuration, one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// A duration written as `"15s"`, `"500ms"`, `"2m"`, `"1h"` or `"1m30s"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// Whole seconds.
    pub const fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }
    /// Milliseconds.
    pub const fn millis(ms: u64) -> Dur {
        Dur(Duration::from_millis(ms))
    }
    /// Parses the duration syntax above.
    pub fn parse(text: &str) -> Result<Dur, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty duration".into());
        }
        if t == "0" {
            return Ok(Dur(Duration::ZERO));
        }
        let mut total = Duration::ZERO;
        let mut rest = t;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| format!("{text:?}: missing unit (ms, s, m, h)"))?;
            if digits == 0 {
                return Err(format!("{text:?}: expected a number"));
            }
            let value: f64 = rest[..digits]
                .parse()
                .map_err(|_| format!("{text:?}: bad number"))?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let scale = match &rest[..unit_len] {
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                "us" | "µs" => 1e-6,
                u => return Err(format!("{text:?}: unknown unit {u:?} (use ms, s, m, h)")),
            };
            rest = &rest[unit_len..];
            let secs = value * scale;
            if !secs.is_finite() || secs > 1e9 {
                return Err(format!("{text:?}: out of range"));
            }
            total += Duration::from_secs_f64(secs);
        }
        Ok(Dur(total))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms == 0 && !self.0.is_zero() {
            write!(f, "{}us", self.0.as_micros())
        } else if ms.is_multiple_of(3_600_000) && ms > 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms.is_multiple_of(60_000) && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"15s\", \"500ms\" or \"2m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                Dur::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur(Duration::ZERO))
                } else {
                    Err(E::custom(format!(
                        "{v}: a duration needs a unit, e.g. \"{v}s\""
                    )))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
                self.visit_u64(v.max(0) as u64)
            }
        }
        d.deserialize_any(V)
    }
}

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
    /// port 0 picks a free port).
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
    /// Ember SDK heap endpoint (off; `/profile/heap`).
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
            ember_heap: ProfileTypeConfig::new(false, "/profile/heap", false),
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
        ServerExporterConfig {
            url: "http://127.0.0.1:4040".into(),
            tenant_id: None,
            bearer_token: None,
            bearer_token_file: None,
            queue_bytes: 64 << 20,
            timeout: Dur::secs(10),
            min_backoff: Dur::millis(500),
            max_backoff: Dur::secs(30),
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

/// Parses YAML (or JSON) text and validates it.
pub fn parse(text: &str) -> Result<Config, ConfigErrors> {
    let config: Config = if text.trim().is_empty() {
        Config::default()
    } else {
        serde_norway::from_str(text).map_err(|e| {
            let message = e.to_string();
            // serde_norway prefixes the field path ("a.b[0].c: ..."); keep it as the path.
            let (path, reason) = match message.split_once(": ") {
                Some((p, r)) if !p.contains(' ') => (p.to_string(), r.to_string()),
                _ => (String::new(), message),
            };
            ConfigErrors(vec![ConfigError::new(path, reason)])
        })?
    };
    config.validate()?;
    Ok(config)
}

/// Reads and parses a configuration file.
pub fn load(path: &std::path::Path) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigErrors(vec![ConfigError::new(
            "",
            format!("reading {}: {e}", path.display()),
        )])
    })?;
    parse(&text)
}

fn label_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .enumerate()
            .all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()))
}

fn check_regex(errors: &mut Vec<ConfigError>, path: String, pattern: &str) {
    if let Err(e) = regex::Regex::new(pattern) {
        errors.push(ConfigError::new(path, format!("invalid regex: {e}")));
    }
}

fn check_relabel(errors: &mut Vec<ConfigError>, base: &str, rules: &[RelabelConfig]) {
    for (i, r) in rules.iter().enumerate() {
        let p = format!("{base}[{i}]");
        check_regex(errors, format!("{p}.regex"), &r.regex);
        for (j, s) in r.source_labels.iter().enumerate() {
            if !label_name_ok(s) {
                errors.push(ConfigError::new(
                    format!("{p}.source_labels[{j}]"),
                    format!("{s:?} is not a label name"),
                ));
            }
        }
        match r.action {
            RelabelAction::Replace => match &r.target_label {
                None => errors.push(ConfigError::new(
                    format!("{p}.target_label"),
                    "required for action replace",
                )),
                Some(t) if t.is_empty() => errors.push(ConfigError::new(
                    format!("{p}.target_label"),
                    "must not be empty",
                )),
                _ => {}
            },
            RelabelAction::Keep | RelabelAction::Drop if r.source_labels.is_empty() => errors.push(
                ConfigError::new(format!("{p}.source_labels"), "required for keep/drop"),
            ),
            _ => {}
        }
    }
}

impl Config {
    /// Semantic checks beyond the types: ranges, regexes, URLs, unique job names.
    pub fn validate(&self) -> Result<(), ConfigErrors> {
        let mut errors = Vec::new();
        let mut e = |path: &str, reason: String| errors.push(ConfigError::new(path, reason));
        if self.admin.listen.parse::<std::net::SocketAddr>().is_err() {
            e(
                "admin.listen",
                format!(
                    "{:?} is not ip:port (e.g. 127.0.0.1:4041)",
                    self.admin.listen
                ),
            );
        }
        for name in self.external_labels.keys() {
            if !label_name_ok(name) {
                e(
                    &format!("external_labels.{name}"),
                    "label names must match [a-zA-Z_][a-zA-Z0-9_]*".into(),
                );
            }
        }
        let p = &self.profiling;
        if !(1..=10_000).contains(&p.cpu.sample_rate_hz) {
            e(
                "profiling.cpu.sample_rate_hz",
                format!("{} is outside 1..=10000", p.cpu.sample_rate_hz),
            );
        }
        if p.off_cpu.min_duration.0 > Duration::from_secs(3600) {
            e(
                "profiling.off_cpu.min_duration",
                format!("{} is outside 0s..1h", p.off_cpu.min_duration),
            );
        }
        if p.upload_interval.0 < Duration::from_secs(1)
            || p.upload_interval.0 > Duration::from_secs(3600)
        {
            e(
                "profiling.upload_interval",
                format!("{} is outside 1s..1h", p.upload_interval),
            );
        }
        let mut errors_ext = Vec::new();
        for (field, value) in [
            ("comm", &p.targets.comm),
            ("exe", &p.targets.exe),
            ("cgroup", &p.targets.cgroup),
        ] {
            if let Some(v) = value {
                check_regex(&mut errors_ext, format!("profiling.targets.{field}"), v);
            }
        }
        check_relabel(
            &mut errors_ext,
            "profiling.relabel_configs",
            &p.relabel_configs,
        );
        let mut jobs = std::collections::HashSet::new();
        for (i, job) in self.scrape_configs.iter().enumerate() {
            let base = format!("scrape_configs[{i}]");
            if job.job_name.is_empty() {
                errors_ext.push(ConfigError::new(format!("{base}.job_name"), "required"));
            } else if !jobs.insert(job.job_name.clone()) {
                errors_ext.push(ConfigError::new(
                    format!("{base}.job_name"),
                    format!("{:?} is used by an earlier job", job.job_name),
                ));
            }
            if job.scrape_interval.0 < Duration::from_secs(1) {
                errors_ext.push(ConfigError::new(
                    format!("{base}.scrape_interval"),
                    format!("{} is below 1s", job.scrape_interval),
                ));
            }
            if let Some(t) = job.scrape_timeout
                && t.0.is_zero()
            {
                errors_ext.push(ConfigError::new(
                    format!("{base}.scrape_timeout"),
                    "must be > 0",
                ));
            }
            for (j, sc) in job.static_configs.iter().enumerate() {
                for (k, t) in sc.targets.iter().enumerate() {
                    let url = if t.contains("://") {
                        t.clone()
                    } else {
                        format!("http://{t}")
                    };
                    if let Err(err) = ember_http::parse_url(&url) {
                        errors_ext.push(ConfigError::new(
                            format!("{base}.static_configs[{j}].targets[{k}]"),
                            err.to_string(),
                        ));
                    }
                }
                for name in sc.labels.keys() {
                    if !label_name_ok(name) {
                        errors_ext.push(ConfigError::new(
                            format!("{base}.static_configs[{j}].labels.{name}"),
                            "label names must match [a-zA-Z_][a-zA-Z0-9_]*",
                        ));
                    }
                }
            }
            for (j, c) in job.profiling_config.custom.iter().enumerate() {
                if !label_name_ok(&c.name) {
                    errors_ext.push(ConfigError::new(
                        format!("{base}.profiling_config.custom[{j}].name"),
                        format!("{:?} must match [a-zA-Z_][a-zA-Z0-9_]*", c.name),
                    ));
                }
            }
            let types = &job.profiling_config;
            for (key, t) in [
                ("process_cpu", &types.process_cpu),
                ("memory", &types.memory),
                ("block", &types.block),
                ("mutex", &types.mutex),
                ("goroutine", &types.goroutine),
                ("godeltaprof_memory", &types.godeltaprof_memory),
                ("godeltaprof_mutex", &types.godeltaprof_mutex),
                ("godeltaprof_block", &types.godeltaprof_block),
                ("ember_cpu", &types.ember_cpu),
                ("ember_heap", &types.ember_heap),
            ] {
                if !t.path.starts_with('/') {
                    errors_ext.push(ConfigError::new(
                        format!("{base}.profiling_config.{key}.path"),
                        "must start with /",
                    ));
                }
            }
            check_relabel(
                &mut errors_ext,
                &format!("{base}.relabel_configs"),
                &job.relabel_configs,
            );
        }
        if let Some(s) = &self.exporters.server {
            let base = "exporters.server";
            if let Err(err) = ember_http::parse_url(&s.url) {
                errors_ext.push(ConfigError::new(format!("{base}.url"), err.to_string()));
            }
            if s.queue_bytes < 1024 {
                errors_ext.push(ConfigError::new(
                    format!("{base}.queue_bytes"),
                    format!("{} is below 1024", s.queue_bytes),
                ));
            }
            if s.timeout.0.is_zero() {
                errors_ext.push(ConfigError::new(format!("{base}.timeout"), "must be > 0"));
            }
            if s.min_backoff.0.is_zero() || s.min_backoff > s.max_backoff {
                errors_ext.push(ConfigError::new(
                    format!("{base}.min_backoff"),
                    "must be > 0 and at most max_backoff",
                ));
            }
            if let Some(ca) = &s.tls.ca_file
                && let Err(e) = ember_http::load_ca_file(std::path::Path::new(ca))
            {
                errors_ext.push(ConfigError::new(
                    format!("{base}.tls.ca_file"),
                    e.to_string(),
                ));
            }
            if s.bearer_token.is_some() && s.bearer_token_file.is_some() {
                errors_ext.push(ConfigError::new(
                    format!("{base}.bearer_token_file"),
                    "give bearer_token or bearer_token_file, not both",
                ));
            }
        }
        // ember-export reports full paths from the config root, so they are kept as they are.
        if let Some(pc) = &self.exporters.perf_collector
            && let Err(e) = pc.validate()
        {
            errors_ext.push(ConfigError::new(e.path, e.reason));
        }
        if let Some(pd) = &self.exporters.perfetto_daemon
            && let Err(e) = pd.validate()
        {
            errors_ext.push(ConfigError::new(e.path, e.reason));
        }
        errors.extend(errors_ext);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// The configuration as YAML (what `describe` prints, and what `apply` diffs).
    pub fn to_yaml(&self) -> String {
        serde_norway::to_string(self).unwrap_or_else(|e| format!("# cannot serialize: {e}\n"))
    }
}

/// A unified-style line diff (`-` old, `+` new, two lines of context); empty when equal.
pub fn diff_lines(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a == b {
        return String::new();
    }
    // Longest common subsequence table; configurations are small.
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, (c, _))| *c != ' ')
        .map(|(k, _)| k)
        .collect();
    let mut out = String::new();
    let mut last_printed: Option<usize> = None;
    for (k, (c, line)) in ops.iter().enumerate() {
        let near = changed.iter().any(|&x| x.abs_diff(k) <= 2);
        if !near {
            continue;
        }
        if let Some(l) = last_printed
            && k > l + 1
        {
            out.push_str("...\n");
        }
        out.push(*c);
        out.push(' ');
        out.push_str(line);
        out.push('\n');
        last_printed = Some(k);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_document_matches_the_defaults() {
        let parsed = parse(DEFAULT_CONFIG_YAML).unwrap();
        assert_eq!(parsed, Config::default());
        // And the serialized default round-trips.
        assert_eq!(
            parse(&Config::default().to_yaml()).unwrap(),
            Config::default()
        );
    }

    /// Paths of the keys in `doc` missing from `documented` (objects only; a null or a
    /// list in the default has no keys to document).
    fn undocumented(
        doc: &serde_json::Value,
        documented: &serde_json::Value,
        path: &str,
    ) -> Vec<String> {
        let (Some(fields), Some(written)) = (doc.as_object(), documented.as_object()) else {
            return Vec::new();
        };
        let mut missing = Vec::new();
        for (key, value) in fields {
            let here = format!("{path}{key}");
            match written.get(key) {
                None => missing.push(here),
                Some(w) => missing.extend(undocumented(value, w, &format!("{here}."))),
            }
        }
        missing
    }

    #[test]
    fn the_default_document_spells_out_every_field() {
        // Parsing fills absent fields with defaults, so equality alone would not notice a
        // field left out of the document: compare the key trees.
        let written: serde_json::Value = serde_norway::from_str(DEFAULT_CONFIG_YAML).unwrap();
        let all = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(undocumented(&all, &written, ""), Vec::<String>::new());
        // The walk does notice a missing field.
        let mut short = written.clone();
        short["profiling"]["targets"]
            .as_object_mut()
            .unwrap()
            .remove("cgroup");
        assert_eq!(
            undocumented(&all, &short, ""),
            ["profiling.targets.cgroup".to_string()]
        );
    }

    #[test]
    fn json_files_are_accepted_like_yaml() {
        // The whole default configuration written as JSON reads back unchanged.
        let json = serde_json::to_string_pretty(&Config::default()).unwrap();
        assert_eq!(parse(&json).unwrap(), Config::default());
        let cfg = parse(
            r#"{"profiling": {"cpu": {"sample_rate_hz": 49}, "upload_interval": "10s"},
                "scrape_configs": [{"job_name": "api", "scrape_interval": "5s",
                                    "static_configs": [{"targets": ["127.0.0.1:6060"]}]}]}"#,
        )
        .unwrap();
        assert_eq!(cfg.profiling.cpu.sample_rate_hz, 49);
        assert_eq!(cfg.profiling.upload_interval, Dur::secs(10));
        assert_eq!(cfg.scrape_configs[0].scrape_interval, Dur::secs(5));
        // Unset fields keep their defaults.
        assert_eq!(cfg.exporters, Config::default().exporters);
        // Errors name the field as for YAML.
        let err = parse(r#"{"profiling": {"cpu": {"sample_rate_hz": 0}}}"#).unwrap_err();
        assert_eq!(err.0[0].path, "profiling.cpu.sample_rate_hz", "{err}");
    }

    #[test]
    fn durations() {
        assert_eq!(Dur::parse("15s").unwrap(), Dur::secs(15));
        assert_eq!(Dur::parse("1m30s").unwrap(), Dur::secs(90));
        assert_eq!(Dur::parse("250ms").unwrap(), Dur::millis(250));
        assert_eq!(Dur::parse("1.5s").unwrap(), Dur::millis(1500));
        assert!(Dur::parse("15").is_err());
        assert!(Dur::parse("15x").is_err());
        assert_eq!(Dur::secs(90).to_string(), "90s");
        assert_eq!(Dur::secs(120).to_string(), "2m");
        assert_eq!(Dur::millis(500).to_string(), "500ms");
    }

    #[test]
    fn errors_name_the_field() {
        let err = parse("profiling:\n  cpu:\n    sample_rate_hz: 0\n").unwrap_err();
        assert_eq!(err.0[0].path, "profiling.cpu.sample_rate_hz", "{err}");
        let err = parse("scrape_configs:\n  - job_name: a\n    scrape_interval: 10\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("scrape_configs[0].scrape_interval"),
            "{err}"
        );
        let err =
            parse("profiling:\n  off_cpu:\n    enabled: true\n    min_duration: 2h\n").unwrap_err();
        assert_eq!(err.0[0].path, "profiling.off_cpu.min_duration", "{err}");
        let ok = parse("profiling:\n  off_cpu: {enabled: true, min_duration: 0s}\n").unwrap();
        assert!(ok.profiling.off_cpu.enabled);
        assert_eq!(ok.profiling.off_cpu.min_duration, Dur::secs(0));
        let err =
            parse("exporters:\n  server:\n    tls: {ca_file: /nonexistent/ca.pem}\n").unwrap_err();
        assert_eq!(err.0[0].path, "exporters.server.tls.ca_file", "{err}");
        assert!(err.0[0].reason.contains("/nonexistent/ca.pem"), "{err}");
        let err = parse("profiling:\n  bogus: 1\n").unwrap_err();
        assert!(
            err.to_string().contains("profiling") && err.to_string().contains("bogus"),
            "{err}"
        );
        let err = parse(
            "scrape_configs:\n  - job_name: a\n  - job_name: a\n    static_configs:\n      - targets: ['ftp://x:1']\n",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("scrape_configs[1].job_name"), "{text}");
        assert!(
            text.contains("scrape_configs[1].static_configs[0].targets[0]"),
            "{text}"
        );
        let err =
            parse("profiling:\n  relabel_configs:\n    - action: replace\n      regex: '('\n")
                .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("profiling.relabel_configs[0].regex: invalid regex"),
            "{text}"
        );
        assert!(
            text.contains("profiling.relabel_configs[0].target_label: required"),
            "{text}"
        );
    }

    #[test]
    fn exporter_sections_are_typed_and_validated() {
        let cfg = parse(
            "exporters:\n  perf_collector:\n    export_to: file:///tmp/x\n    dump_duration_seconds: 5\n  perfetto_daemon:\n    export_to: file:///tmp/y\n",
        )
        .unwrap();
        let pc = cfg.exporters.perf_collector.as_ref().unwrap();
        assert_eq!(pc.dump_duration_seconds, 5);
        assert_eq!(
            pc.perf_polling_frequency_hz,
            ember_export::PerfCollectorConfig::default().perf_polling_frequency_hz
        );
        assert_eq!(parse(&cfg.to_yaml()).unwrap(), cfg);
        let err =
            parse("exporters:\n  perf_collector:\n    dump_duration_seconds: 5\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("exporters.perf_collector.export_to"),
            "{err}"
        );
        let err = parse(
            "exporters:\n  perfetto_daemon:\n    export_to: file:///tmp/y\n    trigger_name: nope\n",
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("exporters.perfetto_daemon.trigger_name"),
            "{err}"
        );
        let err = parse("exporters:\n  perf_collector:\n    bogus: 1\n").unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn diff_shows_changed_lines() {
        let old = Config::default();
        let mut new = old.clone();
        new.profiling.cpu.sample_rate_hz = 99;
        let d = diff_lines(&old.to_yaml(), &new.to_yaml());
        assert!(
            d.contains("-     sample_rate_hz: 19") && d.contains("+     sample_rate_hz: 99"),
            "{d}"
        );
        assert_eq!(diff_lines(&old.to_yaml(), &old.to_yaml()), "");
    }
}
