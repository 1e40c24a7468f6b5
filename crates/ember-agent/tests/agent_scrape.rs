//! The agent (in-process) end to end against real programs: scraping a real Go
//! `net/http/pprof` program into a real server (with an unreachable target beside it), the
//! server going away and coming back (buffered data arrives, overflow counted), and continuous
//! host profiling of a process that exits mid-profile.

mod support;

use std::time::Duration;
use support::{
    RunningAgent, Server, enc, events, free_port, go_app, host_perf_allowed, metric, query_folded,
    temp_dir, wait_for,
};

fn label_values(server: &Server, name: &str, selector: &str) -> Vec<String> {
    let path = if selector == "{}" {
        format!("/api/v1/label/{name}/values?from=now-1h&until=now")
    } else {
        format!(
            "/api/v1/label/{name}/values?query={}&from=now-1h&until=now",
            enc(selector)
        )
    };
    let v = server.get_json(&path, &[]);
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn scrapes_a_real_go_program_and_reports_an_unreachable_target() {
    let dir = temp_dir("agent-scrape");
    let dir = dir.path();
    let Some(app) = go_app(dir, "emberburn") else {
        return;
    };
    let server = Server::start(&dir.join("data"), &[]);
    let dead = format!("127.0.0.1:{}", free_port());
    let agent = RunningAgent::start(&format!(
        "admin: {{listen: '127.0.0.1:0'}}\n\
             profiling: {{enabled: false}}\n\
             external_labels: {{cluster: test}}\n\
             exporters:\n  server: {{url: 'http://{}', min_backoff: 100ms, max_backoff: 1s}}\n\
             scrape_configs:\n\
             \x20 - job_name: go-app\n\
             \x20   scrape_interval: 2s\n\
             \x20   static_configs: [{{targets: ['{}'], labels: {{team: core}}}}]\n\
             \x20 - job_name: gone\n\
             \x20   scrape_interval: 1s\n\
             \x20   static_configs: [{{targets: ['{dead}']}}]\n",
        server.addr, app.addr
    ));
    let cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    let selector = "{service_name=\"go-app\",team=\"core\",cluster=\"test\",job=\"go-app\"}";
    let arrived = wait_for(Duration::from_secs(40), || {
        let names = label_values(&server, "__name__", "{service_name=\"go-app\"}");
        ["process_cpu", "memory", "goroutine", "mutex", "block"]
            .iter()
            .all(|n| names.iter().any(|x| x == n))
            && query_folded(&server.addr, selector, cpu).contains("main.emberBurn")
    });
    assert!(
        arrived,
        "names: {:?}\nmetrics:\n{}\nlog:\n{}",
        label_values(&server, "__name__", "{service_name=\"go-app\"}"),
        agent.metrics(),
        agent.log()
    );
    // Memory is a delta of cumulative allocs: the burner allocates 64 KiB per loop.
    let alloc = query_folded(
        &server.addr,
        "{service_name=\"go-app\"}",
        "memory:alloc_space:bytes:space:bytes",
    );
    assert!(alloc.contains("main.main.func1"), "{alloc}");
    let instances = label_values(&server, "instance", "{service_name=\"go-app\"}");
    assert_eq!(instances, vec![app.addr.clone()]);

    let m = agent.metrics();
    let up = |job: &str, addr: &str| {
        metric(
            &m,
            &format!("ember_agent_scrape_target_up{{job=\"{job}\",instance=\"{addr}\"}}"),
        )
    };
    assert_eq!(up("go-app", &app.addr), Some(1.0), "{m}");
    assert_eq!(up("gone", &dead), Some(0.0), "{m}");
    let scrapes = |job: &str, addr: &str, result: &str| {
        metric(
            &m,
            &format!(
                "ember_agent_scrapes_total{{job=\"{job}\",instance=\"{addr}\",profile_type=\"process_cpu\",result=\"{result}\"}}"
            ),
        )
    };
    assert!(scrapes("go-app", &app.addr, "success") >= Some(1.0), "{m}");
    assert_eq!(scrapes("go-app", &app.addr, "error"), Some(0.0), "{m}");
    assert!(scrapes("gone", &dead, "error") >= Some(1.0), "{m}");
    assert_eq!(scrapes("gone", &dead, "success"), Some(0.0), "{m}");
    assert!(
        m.lines().any(
            |l| l.starts_with("ember_agent_scrape_last_error{job=\"gone\"")
                && l.contains("cannot connect")
        ),
        "{m}"
    );
    assert!(
        metric(&m, "ember_agent_push_sent_profiles_total").unwrap() >= 5.0,
        "{m}"
    );
    assert_eq!(
        metric(&m, "ember_agent_push_dropped_profiles_total"),
        Some(0.0)
    );
    let stopped = agent.terminate();
    assert!(stopped.flushed && stopped.secs < 5.0, "{stopped:?}");
}

#[test]
fn server_down_then_back_delivers_the_buffer_and_counts_overflow() {
    let dir = temp_dir("agent-outage");
    let dir = dir.path();
    let Some(app) = go_app(dir, "emberburn") else {
        return;
    };
    let server_addr = format!("127.0.0.1:{}", free_port());
    // goroutine profiles are a few KB: a 24 KB queue holds a handful and must drop the rest.
    let agent = RunningAgent::start(&format!(
        "admin: {{listen: '127.0.0.1:0'}}\n\
             profiling: {{enabled: false}}\n\
             exporters:\n  server: {{url: 'http://{server_addr}', queue_bytes: 24000, min_backoff: 100ms, max_backoff: 500ms}}\n\
             scrape_configs:\n\
             \x20 - job_name: outage\n\
             \x20   scrape_interval: 1s\n\
             \x20   static_configs: [{{targets: ['{}']}}]\n\
             \x20   profiling_config:\n\
             \x20     process_cpu: {{enabled: false, path: /debug/pprof/profile}}\n\
             \x20     memory: {{enabled: false, path: /debug/pprof/allocs}}\n\
             \x20     block: {{enabled: false, path: /debug/pprof/block}}\n\
             \x20     mutex: {{enabled: false, path: /debug/pprof/mutex}}\n",
        app.addr
    ));
    // Server away: profiles pile up, the queue stays bounded and drops the oldest.
    assert!(
        wait_for(Duration::from_secs(30), || {
            let m = agent.metrics();
            metric(&m, "ember_agent_push_dropped_profiles_total") > Some(0.0)
                && metric(&m, "ember_agent_push_errors_total") > Some(0.0)
        }),
        "{}",
        agent.metrics()
    );
    let m = agent.metrics();
    assert!(
        metric(&m, "ember_agent_push_queue_bytes").unwrap() <= 24000.0,
        "{m}"
    );
    let queued = metric(&m, "ember_agent_push_queue_profiles").unwrap();
    assert!(queued >= 1.0, "{m}");
    assert_eq!(
        metric(&m, "ember_agent_push_sent_profiles_total"),
        Some(0.0)
    );

    // Server back on the same address: the buffered profiles arrive.
    let server = Server::start_on(&server_addr, &dir.join("data"), &[]);
    let delivered = wait_for(Duration::from_secs(20), || {
        metric(&agent.metrics(), "ember_agent_push_sent_profiles_total") >= Some(queued)
    });
    let m = agent.metrics();
    assert!(delivered, "{m}\n{}", agent.log());
    let (s, body) = server.get(
        &format!(
            "/api/v1/series?query={}&from=now-1h&until=now",
            enc("{service_name=\"outage\"}")
        ),
        &[],
    );
    assert_eq!(s, 200, "{body}");
    assert!(body.contains("goroutine"), "{body}");
    // The push client logs the outage and the recovery through `tracing`, naming this
    // server's URL (the other tests of this binary push elsewhere).
    let url = format!("http://{server_addr}");
    for message in ["push failed", "push recovered"] {
        assert!(
            events(message)
                .iter()
                .any(|e| e.field("url").is_some_and(|u| u.starts_with(&url))),
            "no {message:?} event for {url}:\n{}",
            agent.log()
        );
    }
    drop(agent);
    server.terminate();
}

#[test]
fn host_profiling_labels_relabels_and_survives_exiting_targets() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-host");
    let dir = dir.path();
    let Some(mut app) = go_app(dir, "emberhost") else {
        return;
    };
    let server = Server::start(&dir.join("data"), &[]);
    let agent = RunningAgent::start(&format!(
        "admin: {{listen: '127.0.0.1:0'}}\n\
             exporters:\n  server: {{url: 'http://{}'}}\n\
             profiling:\n\
             \x20 upload_interval: 2s\n\
             \x20 cpu: {{sample_rate_hz: 99}}\n\
             \x20 targets: {{all: false, comm: 'emberhost'}}\n\
             \x20 relabel_configs:\n\
             \x20   - source_labels: [__meta_process_comm]\n\
             \x20     target_label: service_name\n\
             \x20     replacement: 'svc-$1'\n\
             \x20   - source_labels: [__meta_process_pid]\n\
             \x20     target_label: pid\n\
             \x20   - source_labels: [__meta_system_hostname]\n\
             \x20     target_label: host\n\
             \x20   - regex: '__meta_process_(exe|cmdline|build_id)'\n\
             \x20     replacement: 'proc_$1'\n\
             \x20     action: labelmap\n\
             \x20   - source_labels: [__meta_process_cgroup]\n\
             \x20     regex: '(/.*)'\n\
             \x20     target_label: cgroup\n",
        server.addr
    ));
    let cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
    let selector = "{service_name=\"svc-emberhost\"}";
    assert!(
        wait_for(Duration::from_secs(30), || query_folded(
            &server.addr,
            selector,
            cpu
        )
        .contains("emberBurn")),
        "{}\n{}",
        agent.metrics(),
        agent.log()
    );
    let pids = label_values(&server, "pid", selector);
    assert_eq!(pids, vec![app.child.id().to_string()]);
    // Only the target was sent: no other service from this busy host.
    let services = label_values(&server, "service_name", "{}");
    assert_eq!(services, vec!["svc-emberhost".to_string()], "{services:?}");
    let hosts = label_values(&server, "host", selector);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(hosts, vec![hostname.trim().to_string()]);
    // The other meta labels, mapped to plain ones: the executable, its command line, its
    // GNU build-id (linked in by the test) and its cgroup, as /proc reports them.
    let exe = std::fs::read_link(format!("/proc/{}/exe", app.child.id()))
        .unwrap()
        .display()
        .to_string();
    assert!(exe.ends_with("/emberhost"), "{exe}");
    assert_eq!(
        label_values(&server, "proc_exe", selector),
        vec![exe.clone()]
    );
    assert_eq!(label_values(&server, "proc_cmdline", selector), vec![exe]);
    assert_eq!(
        label_values(&server, "proc_build_id", selector),
        vec![support::GO_BUILD_ID.to_string()]
    );
    let cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", app.child.id())).unwrap();
    let cgroups = label_values(&server, "cgroup", selector);
    assert_eq!(cgroups.len(), 1, "{cgroups:?}");
    assert!(
        cgroup
            .lines()
            .any(|l| l.ends_with(&format!(":{}", cgroups[0]))),
        "{cgroups:?} not in {cgroup}"
    );

    // The target exits mid-profile: the agent keeps going and still sends what it sampled.
    let before = metric(&agent.metrics(), "ember_agent_profiles_total").unwrap();
    let _ = app.child.kill();
    let _ = app.child.wait();
    assert!(wait_for(Duration::from_secs(10), || {
        metric(&agent.metrics(), "ember_agent_profiles_total") > Some(before)
    }));
    // And it goes on sampling the host after that: a later upload interval's cut is counted
    // (this process's own threads give the whole-host sampler something to see).
    let samples = metric(&agent.metrics(), "ember_agent_samples_total").unwrap();
    assert!(
        wait_for(Duration::from_secs(15), || {
            metric(&agent.metrics(), "ember_agent_samples_total") > Some(samples)
        }),
        "no cut after the target exited: {}",
        agent.metrics()
    );
    let m = agent.metrics();
    assert_eq!(metric(&m, "ember_agent_profiler_running"), Some(1.0), "{m}");
    assert!(metric(&m, "ember_agent_samples_total").unwrap() > 0.0);
    let stopped = agent.terminate();
    assert!(stopped.flushed && stopped.secs < 5.0, "{stopped:?}");
}
