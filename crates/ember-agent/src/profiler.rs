//! Continuous whole-host CPU profiling: one `ember_sampler::Session` on a thread of its own,
//! cut every `upload_interval` into one profile per process, labelled from `/proc`
//! (`__meta_process_*`, `__meta_system_hostname`), filtered by the target rules, relabelled,
//! and handed to the [`Outbox`].
//!
//! With bucket exporters configured the session also keeps raw events: it is then cut every
//! second (at most `upload_interval`), each cut's events are symbolized once and handed to the
//! exporters' [`Taps`](crate::exporters::Taps), and the cuts are merged until
//! `upload_interval` for the server profiles.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ember_sampler::session::MapInfo;
use ember_sampler::{CallGraph, Frame, Options, Recording, Session, Symbolizer, Target};
use regex::Regex;

use crate::Outbox;
use crate::config::{ConfigError, ProfilingConfig, TargetsConfig};
use crate::exporters::{Feeder, Taps};
use crate::metrics::Metrics;
use crate::relabel::{self, Labels};

/// A running profiler thread.
pub struct Handle {
    stop: Arc<AtomicBool>,
    flush: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Handle {
    /// Stops without a last cut (used when the configuration changes).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // The thread notices within one poll (100 ms).
            let _ = t.join();
        }
    }

    /// Stops after a last cut is queued, waiting at most `within`.
    pub fn stop_and_flush(mut self, within: Duration) {
        self.flush.store(true, Ordering::SeqCst);
        self.stop.store(true, Ordering::SeqCst);
        if self.done.recv_timeout(within).is_ok()
            && let Some(t) = self.thread.take()
        {
            let _ = t.join();
        }
    }
}

/// Which processes are profiled.
struct Filter {
    all: bool,
    comm: Option<Regex>,
    exe: Option<Regex>,
    pids: Vec<u32>,
    cgroup: Option<Regex>,
}

impl Filter {
    /// Compiles the target rules; a bad regex is an error naming its field.
    fn new(targets: &TargetsConfig) -> Result<Filter, ConfigError> {
        // comm and exe must match whole; a cgroup pattern may match any part of the path
        // (a container id or a unit name inside a longer hierarchy).
        let compile = |path: &str, pattern: &Option<String>, anchored: bool| {
            pattern
                .as_ref()
                .map(|p| {
                    let p = if anchored {
                        format!("^(?:{p})$")
                    } else {
                        p.clone()
                    };
                    Regex::new(&p).map_err(|e| ConfigError {
                        path: path.into(),
                        reason: e.to_string(),
                    })
                })
                .transpose()
        };
        Ok(Filter {
            all: targets.all,
            comm: compile("profiling.targets.comm", &targets.comm, true)?,
            exe: compile("profiling.targets.exe", &targets.exe, true)?,
            pids: targets.pids.clone(),
            cgroup: compile("profiling.targets.cgroup", &targets.cgroup, false)?,
        })
    }

    /// Whether a process is profiled: every process with `all`, else any filter matching.
    fn matches(&self, meta: &ProcessMeta) -> bool {
        if self.all {
            return true;
        }
        self.pids.contains(&meta.pid)
            || self.comm.as_ref().is_some_and(|r| r.is_match(&meta.comm))
            || self.exe.as_ref().is_some_and(|r| r.is_match(&meta.exe))
            || self
                .cgroup
                .as_ref()
                .is_some_and(|r| r.is_match(&meta.cgroup))
    }
}

/// Starts the sampler thread. Fails on a configuration the sampler refuses; a sampler that
/// cannot open its events (permissions) is reported in the log and metrics instead, so the
/// rest of the agent keeps running.
pub fn start(
    config: &ProfilingConfig,
    taps: Taps,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
) -> Result<Handle, ConfigError> {
    let filter = Filter::new(&config.targets)?;
    let rules = relabel::compile(&config.relabel_configs).map_err(|e| ConfigError {
        path: "profiling.relabel_configs".into(),
        reason: e.to_string(),
    })?;
    let mut options = Options::new(Target::AllCpus);
    // One sampler serves every consumer: it runs at the highest frequency asked for, and the
    // bucket exporters thin it back to their own (see the exporters module).
    let cpu_hz = config
        .cpu
        .enabled
        .then(|| u32::try_from(config.cpu.sample_rate_hz).unwrap_or(u32::MAX));
    options.frequency = sampler_frequency([cpu_hz, taps.perf_hz(), taps.perfetto_hz()]);
    options.call_graph = CallGraph::Auto;
    options.raw_events = !taps.is_empty();
    // The Perfetto trace needs the scheduler's switches whether or not off-CPU profiles are
    // sent; the minimum duration only shapes the off-CPU profiles.
    options.off_cpu = taps.wants_switches() || config.off_cpu.enabled;
    if config.off_cpu.enabled {
        options.off_cpu_min_ns =
            u64::try_from(config.off_cpu.min_duration.0.as_nanos()).unwrap_or(u64::MAX);
    }
    let feeder = Feeder::new(taps, options.frequency);
    let sinks = Sinks {
        push: Push {
            cpu: config.cpu.enabled,
            off_cpu: config.off_cpu.enabled,
        },
        feeder,
    };
    let interval = config.upload_interval.0;
    let stop = Arc::new(AtomicBool::new(false));
    let flush = Arc::new(AtomicBool::new(false));
    let (done_tx, done) = mpsc::channel();
    let (s, f) = (stop.clone(), flush.clone());
    let thread = std::thread::Builder::new()
        .name("ember-profiler".into())
        .spawn(move || {
            run(
                options, interval, sinks, filter, rules, outbox, metrics, s, f,
            );
            let _ = done_tx.send(());
        })
        .map_err(|e| ConfigError {
            path: "profiling".into(),
            reason: format!("cannot start the profiler thread: {e}"),
        })?;
    Ok(Handle {
        stop,
        flush,
        done,
        thread: Some(thread),
    })
}

/// The sampler's rate: the highest one asked for by the CPU profiles and the bucket
/// exporters (19 Hz when nothing asks), within the sampler's 1..=10000 Hz.
fn sampler_frequency(wanted: [Option<u32>; 3]) -> u32 {
    wanted
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(19)
        .clamp(1, 10_000)
}

/// Which per-process profiles go to the server.
#[derive(Debug, Clone, Copy)]
struct Push {
    /// On-CPU samples (`process_cpu:cpu:nanoseconds:...`).
    cpu: bool,
    /// Off-CPU time (`process_cpu:off_cpu:nanoseconds:...`).
    off_cpu: bool,
}

/// Who consumes the cuts.
struct Sinks {
    /// The server profiles' filter/relabel pipeline.
    push: Push,
    /// The bucket exporters.
    feeder: Feeder,
}

#[allow(clippy::too_many_arguments)]
fn run(
    options: Options,
    interval: Duration,
    mut sinks: Sinks,
    filter: Filter,
    rules: Vec<relabel::Rule>,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    flush: Arc<AtomicBool>,
) {
    let mut session = match Session::start(&options) {
        Ok(s) => s,
        Err(e) => {
            metrics.profiler.errors.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "ember agent: level=error msg=\"host profiling disabled\" error={:?}",
                e.to_string()
            );
            return;
        }
    };
    metrics.profiler.running.store(1, Ordering::Relaxed);
    eprintln!(
        "ember agent: level=info msg=\"host profiling started\" sample_rate_hz={} upload_interval={interval:?}",
        options.frequency
    );
    let hostname = hostname();
    let mut symbolizer = Symbolizer::new();
    // A pass over /proc/kallsyms per cut was most of the agent's own CPU; the table costs a few MB once.
    symbolizer.keep_kernel_table();
    // The exporters get events every second so their dumps and snapshots are not lumpy.
    let step = if sinks.feeder.is_empty() {
        interval
    } else {
        interval.min(FEED_INTERVAL)
    };
    let mut last_cut = Instant::now();
    let mut last_emit = Instant::now();
    let mut pending: Option<Recording> = None;
    let emit_cut = |rec: Recording, symbolizer: &mut Symbolizer| {
        emit(
            rec, sinks.push, symbolizer, &hostname, &filter, &rules, &outbox, &metrics,
        )
    };
    loop {
        session.poll(Duration::from_millis(100));
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if last_cut.elapsed() >= step {
            last_cut = Instant::now();
            let rec = session.cut();
            absorb(
                rec,
                &mut pending,
                &mut symbolizer,
                &mut sinks.feeder,
                sinks.push,
            );
            if last_emit.elapsed() >= interval {
                last_emit = Instant::now();
                if let Some(rec) = pending.take() {
                    emit_cut(rec, &mut symbolizer);
                }
            }
        }
    }
    let last = session.finish();
    if flush.load(Ordering::SeqCst) {
        absorb(
            last,
            &mut pending,
            &mut symbolizer,
            &mut sinks.feeder,
            sinks.push,
        );
        if let Some(rec) = pending.take() {
            emit_cut(rec, &mut symbolizer);
        }
    }
    metrics.profiler.running.store(0, Ordering::Relaxed);
}

/// How often the session is cut to feed the bucket exporters.
const FEED_INTERVAL: Duration = Duration::from_secs(1);

/// Symbolizes the cut's raw events once and hands them to the bucket exporters; the raw
/// events are dropped afterwards either way (the server profiles use the aggregated stacks).
/// One cut's way into the pending profile: its raw events to the bucket exporters, then its
/// aggregates (less what no server profile carries) merged into `pending`.
fn absorb(
    mut rec: Recording,
    pending: &mut Option<Recording>,
    symbolizer: &mut Symbolizer,
    feeder: &mut Feeder,
    push: Push,
) {
    feed(&mut rec, symbolizer, feeder);
    drop_unsent(&mut rec, push);
    merge(pending, rec);
}

fn feed(rec: &mut Recording, symbolizer: &mut Symbolizer, feeder: &mut Feeder) {
    if !feeder.is_empty() && !rec.raw_events.is_empty() {
        let events = ember_export::events_from_recording(rec, symbolizer);
        feeder.feed(events);
    }
    rec.raw_events = Vec::new();
    rec.raw_stacks = Vec::new();
}

/// Forgets the aggregates no server profile will carry before they are merged and held until
/// the next upload (the sampler times switches for the Perfetto trace even when off-CPU
/// profiles are off).
fn drop_unsent(rec: &mut Recording, push: Push) {
    if !push.off_cpu {
        rec.off_cpu_stacks = HashMap::new();
    }
    if !push.cpu && !push.off_cpu {
        rec.stacks = HashMap::new();
        rec.maps = Vec::new();
    }
}

/// Adds the aggregated stacks of `rec` to `acc`, renumbering `rec`'s mappings into
/// `acc.maps` (each cut numbers its own), and extends `acc`'s time span to cover `rec`.
pub fn merge(acc: &mut Option<Recording>, rec: Recording) {
    let Some(into) = acc.as_mut() else {
        *acc = Some(rec);
        return;
    };
    let mut index: HashMap<MapInfo, u32> = into
        .maps
        .iter()
        .enumerate()
        .map(|(i, m)| (m.clone(), i as u32))
        .collect();
    let renumber: Vec<u32> = rec
        .maps
        .into_iter()
        .map(|m| {
            *index.entry(m.clone()).or_insert_with(|| {
                into.maps.push(m);
                (into.maps.len() - 1) as u32
            })
        })
        .collect();
    let remap = |mut key: ember_sampler::session::StackKey| {
        for frame in &mut key.frames {
            if let Frame::User { map, .. } = frame
                && let Some(&to) = renumber.get(*map as usize)
            {
                *map = to;
            }
        }
        key
    };
    for (key, value) in rec.stacks {
        let slot = into.stacks.entry(remap(key)).or_default();
        slot.count += value.count;
        slot.period += value.period;
    }
    for (key, value) in rec.off_cpu_stacks {
        let slot = into.off_cpu_stacks.entry(remap(key)).or_default();
        slot.count += value.count;
        slot.period += value.period;
    }
    into.samples += rec.samples;
    into.lost += rec.lost;
    into.off_cpu_switches += rec.off_cpu_switches;
    let end = rec.start_unix_ns.saturating_add(rec.duration_ns);
    into.duration_ns = end.saturating_sub(into.start_unix_ns).max(into.duration_ns);
    into.warnings.extend(rec.warnings);
}

/// What `/proc` says about a process (empty strings when it is gone).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessMeta {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// Executable path.
    pub exe: String,
    /// Command line, arguments joined by spaces.
    pub cmdline: String,
    /// cgroup path (the v2 unified entry, else the first one).
    pub cgroup: String,
}

impl ProcessMeta {
    /// Reads `/proc/PID`; `comm` is the fallback name when the process already exited.
    pub fn read(pid: u32, comm: &str) -> ProcessMeta {
        let dir = format!("/proc/{pid}");
        let read = |f: &str| std::fs::read(format!("{dir}/{f}")).ok();
        let comm_now = read("comm")
            .map(|b| String::from_utf8_lossy(&b).trim_end().to_string())
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| comm.to_string());
        let exe = std::fs::read_link(format!("{dir}/exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let cmdline = read("cmdline")
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let cgroup = read("cgroup")
            .map(|b| parse_cgroup(&String::from_utf8_lossy(&b)))
            .unwrap_or_default();
        ProcessMeta {
            pid,
            comm: comm_now,
            exe,
            cmdline,
            cgroup,
        }
    }
}

/// The cgroup path of a `/proc/PID/cgroup` file: the v2 `0::` line, else the first line's path.
pub fn parse_cgroup(text: &str) -> String {
    let mut first = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(_), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" {
            return path.to_string();
        }
        first.get_or_insert_with(|| path.to_string());
    }
    first.unwrap_or_default()
}

/// `service_name` when none is configured: the systemd unit (`nginx.service` → `nginx`), else
/// the container id (docker/containerd/cri-o scopes, 12 characters), else the executable's
/// file name, else the command name.
pub fn derive_service_name(meta: &ProcessMeta) -> String {
    let segments: Vec<&str> = meta.cgroup.split('/').filter(|s| !s.is_empty()).collect();
    // Containers first: their scope may sit under a .service or .slice of the runtime.
    for seg in segments.iter().rev() {
        let id = seg.strip_suffix(".scope").unwrap_or(seg);
        for prefix in ["docker-", "cri-containerd-", "crio-", "libpod-", ""] {
            if let Some(rest) = id.strip_prefix(prefix)
                && rest.len() == 64
                && rest.bytes().all(|b| b.is_ascii_hexdigit())
            {
                return rest[..12].to_string();
            }
        }
    }
    for seg in segments.iter().rev() {
        if let Some(unit) = seg.strip_suffix(".service") {
            // user@1000.service holds a user's session; the process is not that unit.
            if !unit.starts_with("user@") && !unit.is_empty() {
                return unit.to_string();
            }
        }
    }
    let exe_name = meta
        .exe
        .trim_end_matches(" (deleted)")
        .rsplit('/')
        .next()
        .unwrap_or("");
    if !exe_name.is_empty() {
        return exe_name.to_string();
    }
    if meta.comm.is_empty() {
        "unknown_service".into()
    } else {
        meta.comm.clone()
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Splits a cut per process, labels, filters and queues each profile.
#[allow(clippy::too_many_arguments)]
fn emit(
    rec: Recording,
    push: Push,
    symbolizer: &mut Symbolizer,
    hostname: &str,
    filter: &Filter,
    rules: &[relabel::Rule],
    outbox: &Outbox,
    metrics: &Metrics,
) {
    metrics
        .profiler
        .samples
        .fetch_add(rec.samples, Ordering::Relaxed);
    metrics.profiler.lost.fetch_add(rec.lost, Ordering::Relaxed);
    if !push.cpu && !push.off_cpu {
        return;
    }
    let Recording {
        mut stacks,
        mut off_cpu_stacks,
        maps,
        frequency,
        start_unix_ns,
        duration_ns,
        ..
    } = rec;
    if !push.cpu {
        stacks.clear();
    }
    if !push.off_cpu {
        off_cpu_stacks.clear();
    }
    // One pass over /proc/kallsyms for the whole cut. Each per-process profile below would
    // otherwise re-read the whole file for the kernel addresses it brings: that was ~80 % of
    // the agent's CPU on a busy host (bench/agent/RESULTS.md).
    let kernel: Vec<u64> = stacks
        .keys()
        .chain(off_cpu_stacks.keys())
        .flat_map(|k| &k.frames)
        .filter_map(|frame| match *frame {
            Frame::Kernel { addr, ret } => Some(if ret { addr.wrapping_sub(1) } else { addr }),
            _ => None,
        })
        .collect();
    symbolizer.prepare_kernel(&kernel);
    let mut by_pid: HashMap<u32, Recording> = HashMap::new();
    let new_sub = || Recording {
        maps: maps.clone(),
        frequency,
        start_unix_ns,
        duration_ns,
        off_cpu: push.off_cpu,
        ..Recording::default()
    };
    for (key, value) in stacks {
        let sub = by_pid.entry(key.pid).or_insert_with(new_sub);
        sub.samples += value.count;
        sub.stacks.insert(key, value);
    }
    for (key, value) in off_cpu_stacks {
        let sub = by_pid.entry(key.pid).or_insert_with(new_sub);
        sub.off_cpu_switches += value.count;
        sub.off_cpu_stacks.insert(key, value);
    }
    let mut filtered = 0;
    for (pid, sub) in by_pid {
        // pid 0 is the idle task: nothing to attribute.
        if pid == 0 {
            continue;
        }
        let comm = sub
            .stacks
            .keys()
            .chain(sub.off_cpu_stacks.keys())
            .next()
            .map(|k| k.comm.to_string())
            .unwrap_or_default();
        let meta = ProcessMeta::read(pid, &comm);
        if !filter.matches(&meta) {
            filtered += 1;
            continue;
        }
        let mut labels = Labels::new();
        labels.insert("__meta_process_pid".into(), pid.to_string());
        labels.insert("__meta_process_comm".into(), meta.comm.clone());
        labels.insert("__meta_process_exe".into(), meta.exe.clone());
        labels.insert("__meta_process_cmdline".into(), meta.cmdline.clone());
        labels.insert("__meta_process_cgroup".into(), meta.cgroup.clone());
        labels.insert("__meta_system_hostname".into(), hostname.to_string());
        labels.insert("service_name".into(), derive_service_name(&meta));
        let (profile, _) = ember_sampler::build_profile(&sub, symbolizer);
        let build_id = if meta.exe.is_empty() {
            String::new()
        } else {
            let path: Arc<str> = Arc::from(meta.exe.as_str());
            symbolizer
                .binary(&path, pid)
                .map(|b| b.build_id.clone())
                .unwrap_or_default()
        };
        labels.insert("__meta_process_build_id".into(), build_id);
        let Some(mut labels) = relabel::apply(rules, labels) else {
            filtered += 1;
            continue;
        };
        relabel::drop_meta(&mut labels);
        labels.insert("__name__".into(), "process_cpu".into());
        if labels.get("service_name").is_none_or(|s| s.is_empty()) {
            labels.insert("service_name".into(), derive_service_name(&meta));
        }
        metrics.profiler.profiles.fetch_add(1, Ordering::Relaxed);
        outbox.send(labels, ember_pprof::encode_gzip(&profile));
    }
    metrics
        .profiler
        .filtered_processes
        .store(filtered, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(exe: &str, cgroup: &str) -> ProcessMeta {
        ProcessMeta {
            pid: 1,
            comm: "c".into(),
            exe: exe.into(),
            cmdline: String::new(),
            cgroup: cgroup.into(),
        }
    }

    #[test]
    fn service_names() {
        assert_eq!(
            derive_service_name(&meta("/usr/sbin/nginx", "/system.slice/nginx.service")),
            "nginx"
        );
        let id = "4f1c0e9a7b2d3c4e5f60718293a4b5c6d7e8f90112233445566778899aabbccd";
        assert_eq!(id.len(), 64);
        assert_eq!(
            derive_service_name(&meta("/app", &format!("/system.slice/docker-{id}.scope"))),
            &id[..12]
        );
        assert_eq!(
            derive_service_name(&meta(
                "/usr/bin/bash",
                "/user.slice/user-0.slice/user@0.service/app.slice/x.scope"
            )),
            "bash"
        );
        assert_eq!(derive_service_name(&meta("", "")), "c");
        assert_eq!(
            parse_cgroup("12:cpu:/a\n0::/system.slice/x.service\n"),
            "/system.slice/x.service"
        );
        assert_eq!(parse_cgroup("4:memory:/docker/abc\n"), "/docker/abc");
    }

    #[test]
    fn the_configured_rate_drives_the_sampler() {
        // profiling.cpu.sample_rate_hz alone, at its default and configured.
        let cpu = |hz: u64| {
            let c: ProfilingConfig =
                serde_norway::from_str(&format!("cpu: {{sample_rate_hz: {hz}}}")).unwrap();
            c.cpu
                .enabled
                .then(|| u32::try_from(c.cpu.sample_rate_hz).unwrap())
        };
        assert_eq!(
            sampler_frequency([
                cpu(ProfilingConfig::default().cpu.sample_rate_hz),
                None,
                None
            ]),
            19
        );
        assert_eq!(sampler_frequency([cpu(49), None, None]), 49);
        // A bucket exporter at 99 Hz raises it; the exporters thin back to their own rate.
        assert_eq!(sampler_frequency([cpu(19), Some(99), None]), 99);
        assert_eq!(sampler_frequency([cpu(199), Some(99), Some(49)]), 199);
        assert_eq!(sampler_frequency([None, None, Some(49)]), 49);
        assert_eq!(sampler_frequency([None, None, None]), 19);
        assert_eq!(sampler_frequency([Some(50_000), None, None]), 10_000);
    }

    fn filter(yaml: &str) -> Filter {
        Filter::new(&serde_norway::from_str::<TargetsConfig>(yaml).unwrap()).unwrap()
    }

    #[test]
    fn targets_filter_by_comm_exe_pid_and_cgroup() {
        // This test process, read from /proc like any profiled one.
        let me = ProcessMeta::read(std::process::id(), "x");
        let other_pid = me.pid + 1;
        assert!(filter("all: true").matches(&me));
        assert!(!filter("all: false").matches(&me));
        assert!(!filter("{all: false, comm: 'nothing-like-this'}").matches(&me));
        assert!(
            filter(&format!(
                "{{all: false, comm: '{}'}}",
                regex::escape(&me.comm)
            ))
            .matches(&me)
        );
        // exe is anchored: the file name alone does not match the whole path.
        assert!(!filter("{all: false, exe: 'ember_agent-[0-9a-f]+'}").matches(&me));
        assert!(filter("{all: false, exe: '.*/ember_agent-[0-9a-f]+'}").matches(&me));
        assert!(filter(&format!("{{all: false, pids: [{}]}}", me.pid)).matches(&me));
        assert!(!filter(&format!("{{all: false, pids: [{other_pid}]}}")).matches(&me));
        // Any one filter is enough.
        assert!(
            filter(&format!(
                "{{all: false, comm: nope, pids: [{other_pid}, {}]}}",
                me.pid
            ))
            .matches(&me)
        );
        // cgroup (unanchored): a systemd unit, or a container by its id.
        let id = "4f1c0e9a7b2d3c4e5f60718293a4b5c6d7e8f90112233445566778899aabbccd";
        let in_container = ProcessMeta {
            cgroup: format!("/system.slice/docker-{id}.scope"),
            ..meta("/app", "")
        };
        let in_unit = meta("/usr/sbin/nginx", "/system.slice/nginx.service");
        let by_container = filter("{all: false, cgroup: 'docker-4f1c0e9a7b2d'}");
        assert!(by_container.matches(&in_container));
        assert!(!by_container.matches(&in_unit));
        let by_unit = filter("{all: false, cgroup: 'nginx\\.service$'}");
        assert!(by_unit.matches(&in_unit));
        assert!(!by_unit.matches(&in_container));
        // A bad pattern names its field.
        let bad: TargetsConfig = serde_norway::from_str("{exe: '('}").unwrap();
        let err = Filter::new(&bad).err().unwrap();
        assert_eq!(err.path, "profiling.targets.exe");
        let bad: TargetsConfig = serde_norway::from_str("{cgroup: '['}").unwrap();
        assert_eq!(
            Filter::new(&bad).err().unwrap().path,
            "profiling.targets.cgroup"
        );
    }

    fn map(path: &str, start: u64) -> MapInfo {
        MapInfo {
            pid: 7,
            start,
            end: start + 0x1000,
            pgoff: 0,
            path: Arc::from(path),
        }
    }

    fn key(frames: Vec<Frame>) -> ember_sampler::session::StackKey {
        ember_sampler::session::StackKey {
            pid: 7,
            tid: 7,
            comm: Arc::from("w"),
            thread_name: Arc::from("w"),
            frames,
        }
    }

    #[test]
    fn merge_renumbers_mappings_and_adds_counts() {
        let user = |map, addr| Frame::User {
            map,
            addr,
            ret: false,
        };
        let mut first = Recording {
            maps: vec![map("/bin/a", 0x1000)],
            samples: 2,
            start_unix_ns: 1_000,
            duration_ns: 1_000,
            ..Recording::default()
        };
        first.stacks.insert(
            key(vec![user(0, 0x1010)]),
            ember_sampler::session::StackValue {
                count: 2,
                period: 20,
            },
        );
        // The second cut numbers /bin/b first: its index 1 is /bin/a.
        let mut second = Recording {
            maps: vec![map("/bin/b", 0x9000), map("/bin/a", 0x1000)],
            samples: 4,
            start_unix_ns: 2_000,
            duration_ns: 1_500,
            ..Recording::default()
        };
        second.stacks.insert(
            key(vec![user(1, 0x1010)]),
            ember_sampler::session::StackValue {
                count: 3,
                period: 30,
            },
        );
        second.stacks.insert(
            key(vec![user(0, 0x9010)]),
            ember_sampler::session::StackValue {
                count: 1,
                period: 10,
            },
        );
        let mut acc = None;
        merge(&mut acc, first);
        merge(&mut acc, second);
        let acc = acc.unwrap();
        assert_eq!(acc.maps, vec![map("/bin/a", 0x1000), map("/bin/b", 0x9000)]);
        assert_eq!(acc.samples, 6);
        assert_eq!(acc.duration_ns, 2_500);
        let a = &acc.stacks[&key(vec![user(0, 0x1010)])];
        assert_eq!((a.count, a.period), (5, 50));
        let b = &acc.stacks[&key(vec![user(1, 0x9010)])];
        assert_eq!((b.count, b.period), (1, 10));
        assert_eq!(acc.stacks.len(), 2);
    }

    #[test]
    fn reads_own_process() {
        let m = ProcessMeta::read(std::process::id(), "x");
        assert!(!m.comm.is_empty());
        assert!(m.exe.contains("ember_agent"), "{m:?}");
        assert!(m.cmdline.contains("ember_agent"), "{m:?}");
    }
}
