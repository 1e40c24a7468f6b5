//! `ember agent` configuration: defaults, describe, apply (diff, confirmation, rejection with
//! field path), SIGHUP reload, clean SIGTERM.

mod agent_util;
mod server_util;

use agent_util::{AgentProc, metric, wait_for};
use server_util::temp_dir;
use std::process::{Command, Stdio};
use std::time::Duration;

fn ember(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An agent that samples nothing and pushes to a port where nothing listens (the pushes only
/// queue), so `external_labels` have an exporter to act on.
const BASE: &str = "admin: {listen: '127.0.0.1:0'}\nprofiling: {enabled: false}\n\
    exporters: {server: {url: 'http://127.0.0.1:9'}}\n";

/// An admin token file in `dir`, mode 600 as the docs ask.
fn token_file(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("admin-token");
    std::fs::write(&path, "cli-admin-token-42\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Started without `--admin-token-file`, the agent shows its configuration with the
/// exporter's token redacted and refuses `ember agent apply`, saying how to enable changes;
/// with the token file on both sides, `apply` works and a file taken from `describe` (with
/// the placeholder) keeps the running token.
#[test]
fn apply_needs_the_admin_token_and_describe_hides_secrets() {
    let dir = temp_dir("agent-admin-token");
    let dir = dir.path();
    let file = dir.join("agent.yaml");
    let config = "admin: {listen: '127.0.0.1:0'}\nprofiling: {enabled: false}\n\
        exporters: {server: {url: 'http://127.0.0.1:9', bearer_token: cli-push-secret}}\n";
    std::fs::write(&file, config).unwrap();
    let edited = dir.join("edited.yaml");

    let agent = AgentProc::start(&file);
    let admin = agent.url();
    let (ok, shown, err) = ember(&["agent", "describe", "--admin", &admin]);
    assert!(ok, "{err}");
    assert!(
        !shown.contains("cli-push-secret") && shown.contains("***redacted***"),
        "{shown}"
    );
    std::fs::write(
        &edited,
        shown.replace("external_labels: {}", "external_labels: {a: b}"),
    )
    .unwrap();
    let (ok, out, err) = ember(&[
        "agent",
        "apply",
        "-f",
        edited.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
    ]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("--admin-token-file") && err.contains("unchanged"),
        "{err}"
    );
    drop(agent);

    let token_file = token_file(dir);
    let token = token_file.to_str().unwrap();
    let agent = AgentProc::start_with(&file, &["--admin-token-file", token]);
    let admin = agent.url();
    let (ok, _, err) = ember(&["agent", "describe", "--admin", &admin]);
    assert!(!ok && err.contains("401"), "{err}");
    let (ok, out, err) = ember(&[
        "agent",
        "apply",
        "-f",
        edited.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(ok && out.contains("applied"), "{out}{err}");
    assert!(!out.contains("cli-push-secret"), "{out}");
    // The running token is still the real one: a new token is "changed", the old one is not.
    std::fs::write(&edited, config.replace("cli-push-secret", "rotated-secret")).unwrap();
    let (ok, out, err) = ember(&[
        "agent",
        "apply",
        "-f",
        edited.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("exporters.server.bearer_token: secret changed"),
        "{out}"
    );
    assert!(!out.contains("rotated-secret"), "{out}");
    std::fs::write(&edited, config.replace("cli-push-secret", "rotated-secret")).unwrap();
    let (ok, out, _) = ember(&[
        "agent",
        "apply",
        "-f",
        edited.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(ok && out.contains("no changes"), "{out}");
    let (ok, _) = agent.terminate();
    assert!(ok);
}

#[test]
fn default_config_is_documented_and_valid() {
    let (ok, out, _) = ember(&["agent", "--print-default-config"]);
    assert!(ok);
    let parsed = ember_agent::config::parse(&out).unwrap();
    assert_eq!(parsed, ember_agent::config::Config::default());
    for field in [
        "sample_rate_hz: 19",
        "upload_interval: 15s",
        "queue_bytes: 67108864",
        "relabel_configs",
    ] {
        assert!(out.contains(field), "{field}");
    }
    // Every line holding a key is preceded somewhere by comments: at least one comment per section.
    assert!(
        out.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
            > 40
    );
}

#[test]
fn invalid_config_file_names_the_field() {
    let dir = temp_dir("agent-badconfig");
    let dir = dir.path();
    let file = dir.join("bad.yaml");
    std::fs::write(
        &file,
        "profiling:\n  upload_interval: 0s\nscrape_configs:\n  - job_name: ''\n",
    )
    .unwrap();
    let (ok, _, err) = ember(&["agent", "--config", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("profiling.upload_interval"), "{err}");
    assert!(
        err.contains("scrape_configs[0].job_name: required"),
        "{err}"
    );
}

#[test]
fn describe_apply_and_sighup() {
    let dir = temp_dir("agent-config");
    let dir = dir.path();
    let file = dir.join("agent.yaml");
    std::fs::write(&file, BASE).unwrap();
    let token_file = token_file(dir);
    let token = token_file.to_str().unwrap();
    let agent = AgentProc::start_with(&file, &["--admin-token-file", token]);
    let admin = agent.url();

    let describe = || {
        let (ok, out, err) = ember(&[
            "agent",
            "describe",
            "--json",
            "--admin",
            &admin,
            "--admin-token-file",
            token,
        ]);
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let d = describe();
    assert_eq!(d["profiling"]["enabled"], false);
    assert_eq!(d["profiling"]["cpu"]["sample_rate_hz"], 19);
    assert_eq!(d["exporters"]["server"]["url"], "http://127.0.0.1:9");

    // Invalid: rejected with the path, nothing changes.
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, format!("{BASE}external_labels: {{'1x': y}}\n")).unwrap();
    let (ok, _, err) = ember(&[
        "agent",
        "apply",
        "-f",
        bad.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(!ok);
    assert!(
        err.contains("external_labels.1x") && err.contains("unchanged"),
        "{err}"
    );
    assert_eq!(describe(), d);

    // Valid: diff shown; without --yes and no terminal it refuses; with --yes it applies.
    let good = dir.join("good.yaml");
    std::fs::write(&good, format!("{BASE}external_labels: {{env: test}}\n")).unwrap();
    let (ok, out, err) = ember(&[
        "agent",
        "apply",
        "-f",
        good.to_str().unwrap(),
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(!ok && err.contains("--yes"), "{out}{err}");
    assert!(out.contains("+   env: test"), "{out}");
    assert_eq!(describe(), d);
    let (ok, out, err) = ember(&[
        "agent",
        "apply",
        "-f",
        good.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("applied"), "{out}");
    assert_eq!(describe()["external_labels"]["env"], "test");
    let (ok, out, _) = ember(&[
        "agent",
        "apply",
        "-f",
        good.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(ok && out.contains("no changes"), "{out}");

    // On a terminal (util-linux `script` gives the command a pty) the diff is followed by a
    // question: "n" leaves the agent as it is, "y" applies.
    let asked = dir.join("asked.yaml");
    std::fs::write(&asked, format!("{BASE}external_labels: {{env: asked}}\n")).unwrap();
    let on_a_terminal = |answer: &str| {
        let command = format!(
            "{} agent apply -f {} --admin {admin} --admin-token-file {token}",
            env!("CARGO_BIN_EXE_ember"),
            asked.display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("util-linux script");
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), answer.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, out) = on_a_terminal("n\n");
    assert!(ok, "{out}");
    assert!(
        out.contains("+   env: asked") && out.contains("apply these changes? [y/N]"),
        "{out}"
    );
    assert!(out.contains("not applied"), "{out}");
    assert_eq!(describe()["external_labels"]["env"], "test");
    let (ok, out) = on_a_terminal("y\n");
    assert!(
        ok && out.contains("applied") && !out.contains("not applied"),
        "{out}"
    );
    assert_eq!(describe()["external_labels"]["env"], "asked");

    // SIGHUP with a broken file: rejected, the running config (env: asked) stays.
    std::fs::write(
        &file,
        format!("{BASE}profiling:\n  cpu: {{sample_rate_hz: 0}}\n"),
    )
    .unwrap();
    agent.signal("-HUP");
    // The counter goes up just before the error is logged: wait for both.
    assert!(
        wait_for(Duration::from_secs(10), || {
            metric(&agent.metrics(), "ember_agent_config_reload_failures_total") >= Some(1.0)
                && agent.log().contains("profiling")
        }),
        "{}",
        agent.log()
    );
    assert_eq!(describe()["external_labels"]["env"], "asked");
    // SIGHUP with a good file: applied.
    std::fs::write(&file, format!("{BASE}external_labels: {{env: hup}}\n")).unwrap();
    agent.signal("-HUP");
    assert!(
        wait_for(
            Duration::from_secs(10),
            || describe()["external_labels"]["env"] == "hup"
        ),
        "{}",
        agent.log()
    );
    let metrics = agent.metrics();
    // The families issue 5 asks for: samples, lost samples, profiles and bytes sent, queue
    // depth, upload errors, own CPU and RSS (scrape results: agent_scrape.rs).
    for name in [
        "ember_agent_samples_total",
        "ember_agent_lost_samples_total",
        "ember_agent_push_sent_profiles_total",
        "ember_agent_push_sent_bytes_total",
        "ember_agent_push_queue_bytes",
        "ember_agent_push_queue_profiles",
        "ember_agent_push_errors_total",
        "ember_agent_cpu_seconds_total",
    ] {
        assert!(
            metric(&metrics, name).is_some(),
            "{name} missing:\n{metrics}"
        );
    }
    assert!(metric(&metrics, "ember_agent_resident_memory_bytes").unwrap() > 1e6);
    // The log check run by terminate() can fail: free text is refused.
    assert!(!agent_util::is_tracing_line(
        "ember agent: admin on http://x (/metrics)"
    ));
    assert!(agent_util::is_tracing_line(
        "2026-11-27T12:01:11.705559Z  INFO ember::cmd::agent: stopped flushed=true"
    ));
    // The failure is counted before the caller logs it: wait for the line.
    let rejected = "reload rejected, running configuration kept";
    assert!(
        wait_for(Duration::from_secs(5), || agent.log().contains(rejected)),
        "{}",
        agent.log()
    );
    let (ok, secs) = agent.terminate();
    assert!(ok && secs < 5.0, "exit ok={ok} after {secs}s");
}

/// A setting that does nothing because the one it depends on is off (here a bucket exporter
/// with host profiling disabled) is refused with both fields named, wherever a configuration
/// comes in: at start, by `ember agent apply`, and on SIGHUP (where the running configuration
/// stays and the log says why).
#[test]
fn a_setting_whose_switch_is_off_is_refused_at_start_apply_and_reload() {
    let dir = temp_dir("agent-depends");
    let dir = dir.path();
    let inert = dir.join("inert.yaml");
    std::fs::write(
        &inert,
        format!(
            "{BASE}  perf_collector: {{export_to: 'file://{}'}}\n",
            dir.join("bucket").display()
        )
        .replace(
            "exporters: {server: {url: 'http://127.0.0.1:9'}}\n",
            "exporters:\n  server: {url: 'http://127.0.0.1:9'}\n",
        ),
    )
    .unwrap();
    let both = |text: &str| {
        text.contains("exporters.perf_collector: needs profiling.enabled: true")
            && text.contains("profiling.enabled is false")
    };

    // At start: refused, nothing runs.
    let (ok, _, err) = ember(&["agent", "--config", inert.to_str().unwrap()]);
    assert!(!ok, "{err}");
    assert!(both(&err), "{err}");

    let file = dir.join("agent.yaml");
    std::fs::write(&file, BASE).unwrap();
    let token_file = token_file(dir);
    let token = token_file.to_str().unwrap();
    let agent = AgentProc::start_with(&file, &["--admin-token-file", token]);
    let admin = agent.url();

    // `ember agent apply`: refused, the running configuration unchanged.
    let (ok, out, err) = ember(&[
        "agent",
        "apply",
        "-f",
        inert.to_str().unwrap(),
        "--yes",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(!ok, "{out}{err}");
    assert!(both(&err) && err.contains("unchanged"), "{err}");
    // The agent's own endpoint refuses it too (a client that skips the local check).
    let body = std::fs::read(&inert).unwrap();
    let (status, answer) = server_util::http(
        admin.trim_start_matches("http://"),
        "POST",
        "/api/v1/config",
        &[
            ("Content-Type", "application/yaml"),
            ("Authorization", "Bearer cli-admin-token-42"),
        ],
        &body,
    );
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("exporters.perf_collector") && answer.contains("profiling.enabled"),
        "{answer}"
    );

    // SIGHUP: rejected with the reason in the log, the running configuration kept.
    let failures = || metric(&agent.metrics(), "ember_agent_config_reload_failures_total");
    let before = failures().unwrap_or(0.0);
    std::fs::copy(&inert, &file).unwrap();
    agent.signal("-HUP");
    let rejected = "reload rejected, running configuration kept";
    assert!(
        wait_for(Duration::from_secs(10), || {
            let log = agent.log();
            log.lines().any(|l| l.contains(rejected) && both(l))
        }),
        "{}",
        agent.log()
    );
    assert_eq!(failures(), Some(before + 1.0), "counted once");
    let (ok, shown, err) = ember(&[
        "agent",
        "describe",
        "--admin",
        &admin,
        "--admin-token-file",
        token,
    ]);
    assert!(ok, "{err}");
    assert!(shown.contains("perf_collector: null"), "{shown}");
    let (ok, secs) = agent.terminate();
    assert!(ok && secs < 5.0, "exit ok={ok} after {secs}s");
}
