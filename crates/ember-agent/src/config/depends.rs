//! Settings that act only through another one. A value that differs from its default while
//! the setting it depends on is off would be silently ignored, so it is an error naming both
//! fields by their YAML paths and saying which way to resolve it.
//!
//! The dependencies, one check each below:
//!
//! | setting (when not its default) | does nothing while |
//! |---|---|
//! | `exporters.perf_collector`, `exporters.perfetto_daemon` | `profiling.enabled` is false (they read the host sampler) |
//! | `profiling.off_cpu.enabled: true` | `profiling.enabled` is false; `exporters.server` is null |
//! | `profiling.cpu.sample_rate_hz` | `profiling.enabled` or `profiling.cpu.enabled` is false; `exporters.server` is null |
//! | `profiling.off_cpu.min_duration` | `profiling.enabled` or `profiling.off_cpu.enabled` is false; `exporters.server` is null |
//! | `profiling.upload_interval`, `profiling.targets.*`, `profiling.relabel_configs` (they shape only the per-process profiles sent to the server) | `profiling.enabled` is false; both `profiling.cpu.enabled` and `profiling.off_cpu.enabled` are false; `exporters.server` is null |
//! | `profiling.targets.comm`, `exe`, `pids`, `cgroup` | `profiling.targets.all` is true |
//! | `profiling.targets.all: false` with no filter | (profiles no process at all) |
//! | `profiling.enabled: true` | `exporters.server` is null and no bucket exporter is set (the profiles go nowhere) |
//! | `scrape_configs`, `external_labels` | `exporters.server` is null (only server profiles carry them) |
//! | `exporters.server.tls.ca_file` | `exporters.server.url` is `http://` |
//! | `exporters.perfetto_daemon.interval` | `exporters.perfetto_daemon.trigger` is `PERFETTO_TRIGGER_HTTP` |
//! | `exporters.perfetto_daemon.http_listen` | `exporters.perfetto_daemon.trigger` is `PERFETTO_TRIGGER_TIME_INTERVAL` |
//! | `scrape_configs[i]` | it has no targets, or every profile type is disabled |

use ember_export::{PerfettoDaemonConfig, PerfettoTrigger};

use super::{Config, ConfigError, OffCpuConfig, ProfilingConfig, ScrapeConfig, TargetsConfig};

/// A setting that is off, as the error names it: its path(s) and state.
struct Off {
    /// `profiling.enabled is false`.
    what: &'static str,
    /// How to turn it on: `set profiling.enabled: true`.
    fix: &'static str,
}

const PROFILING_OFF: Off = Off {
    what: "profiling.enabled is false",
    fix: "set profiling.enabled: true",
};
const CPU_OFF: Off = Off {
    what: "profiling.cpu.enabled is false",
    fix: "set profiling.cpu.enabled: true",
};
const OFF_CPU_OFF: Off = Off {
    what: "profiling.off_cpu.enabled is false",
    fix: "set profiling.off_cpu.enabled: true",
};
const NO_KIND: Off = Off {
    what: "profiling.cpu.enabled and profiling.off_cpu.enabled are both false (no per-process \
           profile is made)",
    fix: "enable one of them",
};
const NO_SERVER: Off = Off {
    what: "exporters.server is null (only the server receives it)",
    fix: "configure exporters.server",
};

fn inert(errors: &mut Vec<ConfigError>, path: impl Into<String>, off: &Off) {
    errors.push(ConfigError::new(
        path,
        format!(
            "has no effect while {}: {}, or remove this setting",
            off.what, off.fix
        ),
    ));
}

/// Pushes an error for every setting whose switch is off.
pub(super) fn check(config: &Config, errors: &mut Vec<ConfigError>) {
    let p = &config.profiling;
    let server = config.exporters.server.is_some();
    check_profiling(p, server, errors);
    let buckets = [
        (
            "exporters.perf_collector",
            config.exporters.perf_collector.is_some(),
        ),
        (
            "exporters.perfetto_daemon",
            config.exporters.perfetto_daemon.is_some(),
        ),
    ];
    for (path, present) in buckets {
        if present && !p.enabled {
            errors.push(ConfigError::new(
                path,
                "needs profiling.enabled: true (it samples through the host profiler, and \
                 profiling.enabled is false): set profiling.enabled: true, or remove this \
                 exporter",
            ));
        }
    }
    if p.enabled && !server && !buckets.iter().any(|(_, present)| *present) {
        errors.push(ConfigError::new(
            "profiling.enabled",
            "is true but exporters.server is null and no bucket exporter \
             (exporters.perf_collector, exporters.perfetto_daemon) is set: the host would be \
             sampled for nothing; set profiling.enabled: false, or configure an exporter",
        ));
    }
    if !server {
        if !config.external_labels.is_empty() {
            inert(errors, "external_labels", &NO_SERVER);
        }
        if !config.scrape_configs.is_empty() {
            inert(errors, "scrape_configs", &NO_SERVER);
        }
    }
    if let Some(s) = &config.exporters.server
        && s.tls.ca_file.is_some()
        && s.url.starts_with("http://")
    {
        errors.push(ConfigError::new(
            "exporters.server.tls.ca_file",
            format!(
                "has no effect while exporters.server.url is plain http ({}): use an https:// \
                 url, or remove this setting",
                s.url
            ),
        ));
    }
    if let Some(d) = &config.exporters.perfetto_daemon {
        check_perfetto(d, errors);
    }
    for (i, job) in config.scrape_configs.iter().enumerate() {
        check_scrape(&format!("scrape_configs[{i}]"), job, errors);
    }
}

/// `profiling.*`: each setting against the nearest switch that is off.
fn check_profiling(p: &ProfilingConfig, server: bool, errors: &mut Vec<ConfigError>) {
    let defaults = ProfilingConfig::default();
    // What stands between a per-process profile setting and the server, outermost first.
    let sent = if !p.enabled {
        Some(&PROFILING_OFF)
    } else if !p.cpu.enabled && !p.off_cpu.enabled {
        Some(&NO_KIND)
    } else if !server {
        Some(&NO_SERVER)
    } else {
        None
    };
    if p.cpu.sample_rate_hz != defaults.cpu.sample_rate_hz {
        let off = if !p.enabled {
            Some(&PROFILING_OFF)
        } else if !p.cpu.enabled {
            Some(&CPU_OFF)
        } else {
            sent
        };
        if let Some(off) = off {
            inert(errors, "profiling.cpu.sample_rate_hz", off);
        }
    }
    if p.off_cpu.enabled {
        let off = if !p.enabled {
            Some(&PROFILING_OFF)
        } else {
            sent
        };
        if let Some(off) = off {
            inert(errors, "profiling.off_cpu.enabled", off);
        }
    } else if p.off_cpu.min_duration != OffCpuConfig::default().min_duration {
        let off = if p.enabled {
            &OFF_CPU_OFF
        } else {
            &PROFILING_OFF
        };
        inert(errors, "profiling.off_cpu.min_duration", off);
    }
    if let Some(off) = sent {
        if p.upload_interval != defaults.upload_interval {
            inert(errors, "profiling.upload_interval", off);
        }
        for field in targets_set(&p.targets) {
            inert(errors, format!("profiling.targets.{field}"), off);
        }
        if !p.relabel_configs.is_empty() {
            inert(errors, "profiling.relabel_configs", off);
        }
    } else {
        check_targets(&p.targets, errors);
    }
}

/// The `profiling.targets` fields that differ from their defaults.
fn targets_set(t: &TargetsConfig) -> Vec<&'static str> {
    [
        ("all", !t.all),
        ("comm", t.comm.is_some()),
        ("exe", t.exe.is_some()),
        ("pids", !t.pids.is_empty()),
        ("cgroup", t.cgroup.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, set)| set.then_some(field))
    .collect()
}

/// `profiling.targets`: the filters only act when `all` is false, and `all: false` needs one.
fn check_targets(t: &TargetsConfig, errors: &mut Vec<ConfigError>) {
    let filters = [
        ("comm", t.comm.is_some()),
        ("exe", t.exe.is_some()),
        ("pids", !t.pids.is_empty()),
        ("cgroup", t.cgroup.is_some()),
    ];
    if t.all {
        for (field, set) in filters {
            if set {
                errors.push(ConfigError::new(
                    format!("profiling.targets.{field}"),
                    "has no effect while profiling.targets.all is true (every process is \
                     profiled): set profiling.targets.all: false to profile only the matching \
                     processes, or remove this filter",
                ));
            }
        }
    } else if !filters.iter().any(|(_, set)| *set) {
        errors.push(ConfigError::new(
            "profiling.targets.all",
            "is false and no filter is set (profiling.targets.comm, exe, pids, cgroup): no \
             process would be profiled; set profiling.targets.all: true or give a filter",
        ));
    }
}

/// `exporters.perfetto_daemon`: each trigger has its own setting.
fn check_perfetto(d: &PerfettoDaemonConfig, errors: &mut Vec<ConfigError>) {
    let defaults = PerfettoDaemonConfig::default();
    match d.trigger {
        PerfettoTrigger::Http if d.interval != defaults.interval => errors.push(ConfigError::new(
            "exporters.perfetto_daemon.interval",
            "has no effect while exporters.perfetto_daemon.trigger is PERFETTO_TRIGGER_HTTP \
                 (snapshots are taken on request): set the trigger to \
                 PERFETTO_TRIGGER_TIME_INTERVAL, or remove this setting",
        )),
        PerfettoTrigger::TimeInterval if d.http_listen != defaults.http_listen => {
            errors.push(ConfigError::new(
                "exporters.perfetto_daemon.http_listen",
                "has no effect while exporters.perfetto_daemon.trigger is \
                 PERFETTO_TRIGGER_TIME_INTERVAL (nothing listens): set the trigger to \
                 PERFETTO_TRIGGER_HTTP, or remove this setting",
            ))
        }
        _ => {}
    }
}

/// One scrape job: it must have a target and a profile type to scrape.
fn check_scrape(base: &str, job: &ScrapeConfig, errors: &mut Vec<ConfigError>) {
    if job.static_configs.iter().all(|s| s.targets.is_empty()) {
        errors.push(ConfigError::new(
            format!("{base}.static_configs"),
            "has no targets: the job would scrape nothing; list host:port targets, or remove \
             the job",
        ));
    }
    // A disabled type's `path` is required by the schema and its `delta` defaults per type, so
    // they are part of how a type is switched off, not settings that could be dropped.
    let types = &job.profiling_config;
    if types.enabled().is_empty() {
        errors.push(ConfigError::new(
            format!("{base}.profiling_config"),
            "every profile type is disabled: the job would scrape nothing; enable one, or \
             remove the job",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    /// The error paths of `yaml`, each with its reason (empty when the document is valid).
    fn errors(yaml: &str) -> Vec<(String, String)> {
        match parse(yaml) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.into_iter().map(|e| (e.path, e.reason)).collect(),
        }
    }

    /// `yaml` fails with exactly one error at `path` whose reason names `switch`, and `fixed`
    /// (the same setting with its switch on) is valid.
    #[track_caller]
    fn refused(yaml: &str, path: &str, switch: &str, fixed: &str) {
        let found = errors(yaml);
        assert_eq!(
            found.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            [path],
            "{yaml}\n{found:?}"
        );
        assert!(found[0].1.contains(switch), "{yaml}\n{found:?}");
        assert_eq!(errors(fixed), Vec::new(), "{fixed}");
    }

    const FILE_EXPORT: &str = "{export_to: 'file:///tmp/ember-depends'}";

    #[test]
    fn bucket_exporters_need_host_profiling() {
        for exporter in ["perf_collector", "perfetto_daemon"] {
            refused(
                &format!(
                    "profiling: {{enabled: false}}\nexporters: {{{exporter}: {FILE_EXPORT}}}\n"
                ),
                &format!("exporters.{exporter}"),
                "profiling.enabled",
                &format!("exporters: {{{exporter}: {FILE_EXPORT}}}\n"),
            );
        }
        // The message names both fields, as `ember agent` prints it.
        let text = parse(&format!(
            "profiling: {{enabled: false}}\nexporters: {{perf_collector: {FILE_EXPORT}}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(
            text.starts_with("exporters.perf_collector: needs profiling.enabled: true"),
            "{text}"
        );
    }

    #[test]
    fn profiling_settings_need_profiling_enabled() {
        for (setting, path) in [
            ("cpu: {sample_rate_hz: 99}", "profiling.cpu.sample_rate_hz"),
            ("off_cpu: {enabled: true}", "profiling.off_cpu.enabled"),
            (
                "off_cpu: {min_duration: 5ms}",
                "profiling.off_cpu.min_duration",
            ),
            ("upload_interval: 30s", "profiling.upload_interval"),
            (
                "targets: {all: false, comm: nginx}",
                "profiling.targets.all",
            ),
            (
                "relabel_configs: [{action: labeldrop, regex: 'x'}]",
                "profiling.relabel_configs",
            ),
        ] {
            let found = errors(&format!("profiling: {{enabled: false, {setting}}}\n"));
            assert!(
                found.iter().any(|(p, r)| p == path
                    && r.starts_with("has no effect while profiling.enabled is false")),
                "{setting}: {found:?}"
            );
        }
        // Every filter of `targets` is named, not only the section.
        let found =
            errors("profiling: {enabled: false, targets: {all: false, exe: '/x', pids: [1]}}\n");
        let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "profiling.targets.all",
                "profiling.targets.exe",
                "profiling.targets.pids"
            ]
        );
    }

    #[test]
    fn each_kind_needs_its_own_switch() {
        refused(
            "profiling: {cpu: {enabled: false, sample_rate_hz: 99}, off_cpu: {enabled: true}}\n",
            "profiling.cpu.sample_rate_hz",
            "profiling.cpu.enabled is false",
            "profiling: {cpu: {sample_rate_hz: 99}, off_cpu: {enabled: true}}\n",
        );
        refused(
            "profiling: {off_cpu: {min_duration: 5ms}}\n",
            "profiling.off_cpu.min_duration",
            "profiling.off_cpu.enabled is false",
            "profiling: {off_cpu: {enabled: true, min_duration: 5ms}}\n",
        );
        // With neither kind on, nothing per process is made: its shaping settings do nothing.
        refused(
            "profiling: {cpu: {enabled: false}, upload_interval: 30s}\n",
            "profiling.upload_interval",
            "profiling.cpu.enabled and profiling.off_cpu.enabled are both false",
            "profiling: {cpu: {enabled: false}, off_cpu: {enabled: true}, upload_interval: 30s}\n",
        );
    }

    #[test]
    fn server_profile_settings_need_the_server() {
        let bucket = format!("perf_collector: {FILE_EXPORT}");
        for (setting, path) in [
            ("cpu: {sample_rate_hz: 99}", "profiling.cpu.sample_rate_hz"),
            ("off_cpu: {enabled: true}", "profiling.off_cpu.enabled"),
            ("upload_interval: 30s", "profiling.upload_interval"),
            (
                "targets: {all: false, cgroup: 'nginx'}",
                "profiling.targets.all",
            ),
        ] {
            let found = errors(&format!(
                "profiling: {{{setting}}}\nexporters: {{server: null, {bucket}}}\n"
            ));
            assert!(
                found
                    .iter()
                    .any(|(p, r)| p == path && r.contains("exporters.server is null")),
                "{setting}: {found:?}"
            );
            assert_eq!(
                errors(&format!(
                    "profiling: {{{setting}}}\nexporters: {{{bucket}}}\n"
                )),
                Vec::new()
            );
        }
        refused(
            "external_labels: {env: prod}\nexporters: {server: null, perf_collector: \
             {export_to: 'file:///tmp/x'}}\n",
            "external_labels",
            "exporters.server is null",
            "external_labels: {env: prod}\n",
        );
        refused(
            "profiling: {enabled: false}\nexporters: {server: null}\nscrape_configs: \
             [{job_name: go, static_configs: [{targets: ['127.0.0.1:6060']}]}]\n",
            "scrape_configs",
            "exporters.server is null",
            "profiling: {enabled: false}\nscrape_configs: \
             [{job_name: go, static_configs: [{targets: ['127.0.0.1:6060']}]}]\n",
        );
        // Host profiling with nowhere to send it samples for nothing.
        refused(
            "exporters: {server: null}\n",
            "profiling.enabled",
            "exporters.server is null",
            "profiling: {enabled: false}\nexporters: {server: null}\n",
        );
    }

    #[test]
    fn target_filters_need_all_false() {
        for filter in [
            "comm: nginx",
            "exe: /usr/bin/x",
            "pids: [1]",
            "cgroup: nginx",
        ] {
            let field = filter.split(':').next().unwrap();
            refused(
                &format!("profiling: {{targets: {{{filter}}}}}\n"),
                &format!("profiling.targets.{field}"),
                "profiling.targets.all is true",
                &format!("profiling: {{targets: {{all: false, {filter}}}}}\n"),
            );
        }
        refused(
            "profiling: {targets: {all: false}}\n",
            "profiling.targets.all",
            "no filter is set",
            "profiling: {targets: {all: false, pids: [1]}}\n",
        );
    }

    #[test]
    fn server_ca_file_needs_https() {
        // Removed with its content when the guard drops, at the end of the test.
        let dir = tempfile::tempdir().expect("temp dir");
        let dir = dir.path();
        let ca = dir.join("ca.pem");
        // A real certificate, so only the dependency is wrong.
        let made = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=ember-test", "-keyout"])
            .arg(dir.join("ca.key"))
            .arg("-out")
            .arg(&ca)
            .output()
            .expect("openssl");
        assert!(made.status.success(), "{made:?}");
        refused(
            &format!(
                "exporters: {{server: {{url: 'http://127.0.0.1:4040', tls: {{ca_file: '{}'}}}}}}\n",
                ca.display()
            ),
            "exporters.server.tls.ca_file",
            "exporters.server.url is plain http",
            &format!(
                "exporters: {{server: {{url: 'https://127.0.0.1:4040', tls: {{ca_file: '{}'}}}}}}\n",
                ca.display()
            ),
        );
    }

    #[test]
    fn perfetto_trigger_settings_follow_the_trigger() {
        refused(
            "exporters: {perfetto_daemon: {export_to: 'file:///tmp/x', trigger: \
             PERFETTO_TRIGGER_HTTP, interval: 5000}}\n",
            "exporters.perfetto_daemon.interval",
            "exporters.perfetto_daemon.trigger is PERFETTO_TRIGGER_HTTP",
            "exporters: {perfetto_daemon: {export_to: 'file:///tmp/x', interval: 5000}}\n",
        );
        refused(
            "exporters: {perfetto_daemon: {export_to: 'file:///tmp/x', http_listen: \
             '127.0.0.1:9999'}}\n",
            "exporters.perfetto_daemon.http_listen",
            "exporters.perfetto_daemon.trigger is PERFETTO_TRIGGER_TIME_INTERVAL",
            "exporters: {perfetto_daemon: {export_to: 'file:///tmp/x', trigger: \
             PERFETTO_TRIGGER_HTTP, http_listen: '127.0.0.1:9999'}}\n",
        );
    }

    #[test]
    fn scrape_jobs_must_scrape_something() {
        let job = |rest: &str| {
            format!("profiling: {{enabled: false}}\nscrape_configs: [{{job_name: go{rest}}}]\n")
        };
        let target = ", static_configs: [{targets: ['127.0.0.1:6060']}]";
        refused(
            &job(""),
            "scrape_configs[0].static_configs",
            "has no targets",
            &job(target),
        );
        // Switching a type off takes its path (required) and any delta: no error for those.
        assert_eq!(
            errors(&job(&format!(
                "{target}, profiling_config: {{memory: {{enabled: false, path: /heap, delta: true}}}}"
            ))),
            Vec::new()
        );
        let none = "process_cpu: {enabled: false, path: '/debug/pprof/profile?seconds={seconds}'}, \
                    memory: {enabled: false, path: /debug/pprof/allocs, delta: true}, \
                    block: {enabled: false, path: /debug/pprof/block, delta: true}, \
                    mutex: {enabled: false, path: /debug/pprof/mutex, delta: true}, \
                    goroutine: {enabled: false, path: /debug/pprof/goroutine}";
        refused(
            &job(&format!("{target}, profiling_config: {{{none}}}")),
            "scrape_configs[0].profiling_config",
            "every profile type is disabled",
            &job(&format!(
                "{target}, profiling_config: {{{none}, custom: [{{name: app, path: /app}}]}}"
            )),
        );
    }

    #[test]
    fn the_defaults_and_every_switch_off_are_valid() {
        assert_eq!(errors(""), Vec::new());
        // Turning things off alone never needs other edits.
        assert_eq!(errors("profiling: {enabled: false}\n"), Vec::new());
        assert_eq!(
            errors("profiling: {cpu: {enabled: false}, off_cpu: {enabled: false}}\n"),
            Vec::new()
        );
        assert_eq!(
            errors("profiling: {enabled: false}\nexporters: {server: null}\n"),
            Vec::new()
        );
    }
}
