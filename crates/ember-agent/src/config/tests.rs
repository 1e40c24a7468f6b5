//! Tests of the configuration module: defaults, parsing, validation messages, diff.

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
    let err = parse("profiling:\n  relabel_configs:\n    - action: replace\n      regex: '('\n")
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
    let err = parse("exporters:\n  perf_collector:\n    dump_duration_seconds: 5\n").unwrap_err();
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
