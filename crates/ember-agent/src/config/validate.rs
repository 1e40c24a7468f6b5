//! Semantic checks of a parsed configuration, beyond what the types enforce: ranges, regexes,
//! URLs, label names and unique job names. Every problem is reported with its field path, in
//! document order, so one run of `ember agent apply` shows them all.

use std::collections::HashSet;
use std::time::Duration;

use super::{
    Config, ConfigError, ConfigErrors, RelabelAction, RelabelConfig, ScrapeConfig,
    ServerExporterConfig,
};

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
        self.check_agent(&mut errors);
        let mut jobs = HashSet::new();
        for (i, job) in self.scrape_configs.iter().enumerate() {
            check_scrape_job(&mut errors, &format!("scrape_configs[{i}]"), job, &mut jobs);
        }
        self.check_exporters(&mut errors);
        // Settings whose switch is off come last: a field's own error reads first.
        super::depends::check(self, &mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// `admin`, `external_labels` and `profiling`.
    fn check_agent(&self, errors: &mut Vec<ConfigError>) {
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
        for (field, value) in [
            ("comm", &p.targets.comm),
            ("exe", &p.targets.exe),
            ("cgroup", &p.targets.cgroup),
        ] {
            if let Some(v) = value {
                check_regex(errors, format!("profiling.targets.{field}"), v);
            }
        }
        check_relabel(errors, "profiling.relabel_configs", &p.relabel_configs);
    }

    /// `exporters.*`.
    fn check_exporters(&self, errors: &mut Vec<ConfigError>) {
        if let Some(s) = &self.exporters.server {
            check_server_exporter(errors, s);
        }
        // ember-export reports full paths from the config root, so they are kept as they are.
        if let Some(pc) = &self.exporters.perf_collector
            && let Err(e) = pc.validate()
        {
            errors.push(ConfigError::new(e.path, e.reason));
        }
        if let Some(pd) = &self.exporters.perfetto_daemon
            && let Err(e) = pd.validate()
        {
            errors.push(ConfigError::new(e.path, e.reason));
        }
    }
}

/// One `scrape_configs[]` entry at `base`; `jobs` holds the job names seen so far.
fn check_scrape_job(
    errors: &mut Vec<ConfigError>,
    base: &str,
    job: &ScrapeConfig,
    jobs: &mut HashSet<String>,
) {
    if job.job_name.is_empty() {
        errors.push(ConfigError::new(format!("{base}.job_name"), "required"));
    } else if !jobs.insert(job.job_name.clone()) {
        errors.push(ConfigError::new(
            format!("{base}.job_name"),
            format!("{:?} is used by an earlier job", job.job_name),
        ));
    }
    if job.scrape_interval.0 < Duration::from_secs(1) {
        errors.push(ConfigError::new(
            format!("{base}.scrape_interval"),
            format!("{} is below 1s", job.scrape_interval),
        ));
    }
    if let Some(t) = job.scrape_timeout
        && t.0.is_zero()
    {
        errors.push(ConfigError::new(
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
                errors.push(ConfigError::new(
                    format!("{base}.static_configs[{j}].targets[{k}]"),
                    err.to_string(),
                ));
            }
        }
        for name in sc.labels.keys() {
            if !label_name_ok(name) {
                errors.push(ConfigError::new(
                    format!("{base}.static_configs[{j}].labels.{name}"),
                    "label names must match [a-zA-Z_][a-zA-Z0-9_]*",
                ));
            }
        }
    }
    for (j, c) in job.profiling_config.custom.iter().enumerate() {
        if !label_name_ok(&c.name) {
            errors.push(ConfigError::new(
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
            errors.push(ConfigError::new(
                format!("{base}.profiling_config.{key}.path"),
                "must start with /",
            ));
        }
    }
    check_relabel(
        errors,
        &format!("{base}.relabel_configs"),
        &job.relabel_configs,
    );
}

/// `exporters.server`.
fn check_server_exporter(errors: &mut Vec<ConfigError>, s: &ServerExporterConfig) {
    let base = "exporters.server";
    if let Err(err) = ember_http::parse_url(&s.url) {
        errors.push(ConfigError::new(format!("{base}.url"), err.to_string()));
    }
    if s.queue_bytes < 1024 {
        errors.push(ConfigError::new(
            format!("{base}.queue_bytes"),
            format!("{} is below 1024", s.queue_bytes),
        ));
    }
    if s.timeout.0.is_zero() {
        errors.push(ConfigError::new(format!("{base}.timeout"), "must be > 0"));
    }
    if s.min_backoff.0.is_zero() || s.min_backoff > s.max_backoff {
        errors.push(ConfigError::new(
            format!("{base}.min_backoff"),
            "must be > 0 and at most max_backoff",
        ));
    }
    if let Some(ca) = &s.tls.ca_file
        && let Err(e) = ember_http::load_ca_file(std::path::Path::new(ca))
    {
        errors.push(ConfigError::new(
            format!("{base}.tls.ca_file"),
            e.to_string(),
        ));
    }
    if s.bearer_token.is_some() && s.bearer_token_file.is_some() {
        errors.push(ConfigError::new(
            format!("{base}.bearer_token_file"),
            "give bearer_token or bearer_token_file, not both",
        ));
    }
}
