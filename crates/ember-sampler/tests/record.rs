//! End-to-end recordings of real programs compiled here with gcc: stack
//! completeness and per-path CPU shares, per-thread labels, fork + exec
//! attribution, attaching to a pid, `perf script` text that
//! `ember-collapse` folds identically, and `go tool pprof` reading the profile.
//!
//! These need `perf_event_open` for software events (root, or
//! `kernel.perf_event_paranoid` <= 1) and gcc; CI runs them as root.

#[path = "programs/mod.rs"]
mod programs;

use ember_pprof::{Profile, string};
use ember_sampler::{CallGraph, Options, Target};
use ember_samples::{Recording, Symbolizer, build_profile};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Compiles `tests/programs/<name>.c` with frame pointers into a directory
/// of its own per test (tests run in parallel).
fn compile(test: &str, name: &str, extra: &[&str]) -> PathBuf {
    compile_with(test, name, "fp", &programs::FRAME_POINTERS, extra)
}

/// Compiles `tests/programs/<name>.c` as `<name>-<suffix>` with `flags`.
fn compile_with(test: &str, name: &str, suffix: &str, flags: &[&str], extra: &[&str]) -> PathBuf {
    let output = format!("{name}-{suffix}");
    programs::compile(test, name, &output, &[flags, extra].concat())
}

fn record(target: Target, frequency: u32, duration: Option<Duration>) -> (Recording, Profile) {
    record_with(target, frequency, duration, CallGraph::Fp)
}

fn record_with(
    target: Target,
    frequency: u32,
    duration: Option<Duration>,
    call_graph: CallGraph,
) -> (Recording, Profile) {
    let mut opts = Options::new(target);
    opts.call_graph = call_graph;
    opts.frequency = frequency;
    opts.duration = duration;
    let rec = ember_sampler::record(&opts, |_| {}).expect("recording");
    let mut sym = Symbolizer::new();
    let (profile, _summary) = build_profile(&rec, &mut sym);
    ember_pprof::validate(&profile).expect("valid profile");
    (rec, profile)
}

/// One decoded sample: function names leaf first, values and labels.
struct Decoded {
    names: Vec<String>,
    count: i64,
    cpu_ns: i64,
    num: HashMap<String, i64>,
    strs: HashMap<String, String>,
}

fn decode(profile: &Profile) -> Vec<Decoded> {
    let funcs: HashMap<u64, &str> = profile
        .function
        .iter()
        .map(|f| (f.id, string(profile, f.name)))
        .collect();
    let locs: HashMap<u64, Vec<String>> = profile
        .location
        .iter()
        .map(|l| {
            let names = l
                .line
                .iter()
                .map(|line| {
                    funcs
                        .get(&line.function_id)
                        .copied()
                        .unwrap_or("")
                        .to_string()
                })
                .collect();
            (l.id, names)
        })
        .collect();
    profile
        .sample
        .iter()
        .map(|s| {
            let mut d = Decoded {
                names: s
                    .location_id
                    .iter()
                    .flat_map(|id| locs.get(id).cloned().unwrap_or_default())
                    .collect(),
                count: s.value[0],
                cpu_ns: s.value[1],
                num: HashMap::new(),
                strs: HashMap::new(),
            };
            for l in &s.label {
                let key = string(profile, l.key).to_string();
                if l.str != 0 {
                    d.strs.insert(key, string(profile, l.str).to_string());
                } else {
                    d.num.insert(key, l.num);
                }
            }
            d
        })
        .collect()
}

#[test]
fn three_paths_with_frame_pointers_have_complete_stacks_and_true_shares() {
    let bin = compile("shares", "three_paths", &[]);
    let (rec, profile) = record(
        Target::Command(vec![bin.clone().into(), "150".into()]),
        999,
        None,
    );
    let samples = decode(&profile);
    let comm_of = |d: &Decoded| d.strs.get("comm").cloned().unwrap_or_default();
    let ours: Vec<&Decoded> = samples
        .iter()
        .filter(|d| comm_of(d) == "three_paths-fp")
        .collect();
    let total: i64 = ours.iter().map(|d| d.count).sum();
    assert!(
        total >= 300,
        "too few samples: {total} (recording had {})",
        rec.samples
    );
    check_three_paths_shares("three_paths fp", &ours);
    // cpu/nanoseconds follows the sample count at roughly 1/999 s per sample.
    let cpu: i64 = ours.iter().map(|d| d.cpu_ns).sum();
    let per_sample = cpu as f64 / total as f64;
    assert!(
        (500_000.0..2_000_000.0).contains(&per_sample),
        "{per_sample} ns per sample"
    );
    // The main binary's mapping comes first and carries its build-id.
    let first = &profile.mapping[0];
    assert!(string(&profile, first.filename).ends_with("three_paths-fp"));
    assert_eq!(string(&profile, first.build_id).len(), 40);
    assert!(profile.duration_nanos > 0 && profile.time_nanos > 0);
    assert_eq!(profile.period, 1_000_000_000 / 999);
}

#[test]
fn threads_get_their_own_tid_and_name_labels() {
    let bin = compile("threads", "threads", &["-pthread"]);
    let (_rec, profile) = record(
        Target::Command(vec![bin.into(), "150000000".into()]),
        499,
        None,
    );
    let samples = decode(&profile);
    let mut tids_by_name: HashMap<String, Vec<i64>> = HashMap::new();
    let mut pids = Vec::new();
    for d in &samples {
        let name = d.strs.get("thread_name").cloned().unwrap_or_default();
        let tid = d.num["tid"];
        let entry = tids_by_name.entry(name).or_default();
        if !entry.contains(&tid) {
            entry.push(tid);
        }
        pids.push(d.num["pid"]);
        if d.names.iter().any(|n| n == "worker_alpha") {
            assert_eq!(d.strs["thread_name"], "worker-alpha");
        }
        if d.names.iter().any(|n| n == "worker_beta") {
            assert_eq!(d.strs["thread_name"], "worker-beta");
        }
        assert_eq!(d.strs["comm"], "threads-fp");
    }
    pids.dedup();
    assert_eq!(pids.len(), 1, "one process: {pids:?}");
    let alpha = &tids_by_name["worker-alpha"];
    let beta = &tids_by_name["worker-beta"];
    assert_eq!((alpha.len(), beta.len()), (1, 1));
    assert_ne!(alpha[0], beta[0]);
    assert_ne!(alpha[0], pids[0], "worker tid differs from the pid");
}

#[test]
fn fork_and_exec_are_attributed_to_the_right_image() {
    let forker = compile("fork", "forker", &[]);
    let three = compile("fork", "three_paths", &[]);
    let (rec, profile) = record(
        Target::Command(vec![forker.into(), three.into(), "60".into()]),
        499,
        None,
    );
    let samples = decode(&profile);
    let by_comm = |comm: &str| -> Vec<&Decoded> {
        samples
            .iter()
            .filter(|d| d.strs.get("comm").is_some_and(|c| c == comm))
            .collect()
    };
    let parent = by_comm("forker-fp");
    let child = by_comm("three_paths-fp");
    assert!(
        !parent.is_empty() && !child.is_empty(),
        "{} samples",
        rec.samples
    );
    let parent_pid = parent[0].num["pid"];
    let child_pid = child[0].num["pid"];
    assert_ne!(parent_pid, child_pid);
    let count = |v: &[&Decoded], f: &dyn Fn(&Decoded) -> bool| -> i64 {
        v.iter().filter(|d| f(d)).map(|d| d.count).sum()
    };
    let parent_total = count(&parent, &|_| true);
    let child_total = count(&child, &|_| true);
    let parent_ok = count(&parent, &|d| d.names.iter().any(|n| n == "parent_work"));
    let child_ok = count(&child, &|d| {
        d.names.iter().any(|n| n.starts_with("path_")) && d.names.iter().any(|n| n == "main")
    });
    eprintln!(
        "fork+exec: parent {parent_ok}/{parent_total} in parent_work, child {child_ok}/{child_total} in path_*"
    );
    assert!(parent_ok as f64 >= 0.9 * parent_total as f64);
    assert!(child_ok as f64 >= 0.9 * child_total as f64);
    // No child sample may be symbolized against the parent's image.
    assert_eq!(
        count(&child, &|d| d.names.iter().any(|n| n == "parent_work")),
        0
    );
    assert!(child.iter().all(|d| d.num["pid"] == child_pid));
}

#[test]
fn attaching_to_a_running_pid() {
    let bin = compile("attach", "three_paths", &[]);
    let mut child = Command::new(&bin).arg("400").spawn().expect("spawn");
    let pid = child.id();
    // spawn returns at exec, before the new image is fully mapped; attach
    // once /proc shows it so the test exercises -p, not that race.
    let exe = bin.to_str().unwrap().to_string();
    for _ in 0..200 {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        if maps.contains(&exe) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let (_rec, profile) = record(
        Target::Pids(vec![pid]),
        499,
        Some(Duration::from_millis(1500)),
    );
    let _ = child.kill();
    let _ = child.wait();
    let samples = decode(&profile);
    let total: i64 = samples.iter().map(|d| d.count).sum();
    assert!(total >= 50, "{total} samples");
    assert!(samples.iter().all(|d| d.num["pid"] == i64::from(pid)));
    let in_paths: i64 = samples
        .iter()
        .filter(|d| d.names.iter().any(|n| n.starts_with("path_")))
        .map(|d| d.count)
        .sum();
    assert!(in_paths as f64 >= 0.9 * total as f64, "{in_paths}/{total}");
}

#[test]
fn missing_pid_is_a_clear_error() {
    let mut opts = Options::new(Target::Pids(vec![u32::MAX - 1]));
    opts.duration = Some(Duration::from_millis(10));
    let err = ember_sampler::record(&opts, |_| {}).unwrap_err();
    assert!(err.to_string().contains("no process with pid"), "{err}");
    let mut opts = Options::new(Target::AllCpus);
    opts.frequency = 20_000;
    assert!(ember_sampler::record(&opts, |_| {}).is_err());
}

#[test]
fn whole_host_sees_a_busy_process() {
    let bin = compile("host", "three_paths", &[]);
    let mut child = Command::new(&bin).arg("300").spawn().expect("spawn");
    let pid = i64::from(child.id());
    let (rec, profile) = record(Target::AllCpus, 199, Some(Duration::from_millis(1200)));
    let _ = child.kill();
    let _ = child.wait();
    let samples = decode(&profile);
    let ours: Vec<&Decoded> = samples.iter().filter(|d| d.num["pid"] == pid).collect();
    assert!(
        !ours.is_empty(),
        "no sample of pid {pid} among {}",
        rec.samples
    );
    let named = ours
        .iter()
        .filter(|d| d.names.iter().any(|n| n.starts_with("path_")))
        .count();
    assert!(named * 10 >= ours.len() * 9, "{named}/{}", ours.len());
    assert!(rec.process_count() >= 1);
}

#[test]
fn perf_script_text_folds_like_the_profile() {
    let bin = compile("perfscript", "three_paths", &[]);
    let (rec, profile) = record(Target::Command(vec![bin.into(), "40".into()]), 499, None);
    let mut text = Vec::new();
    ember_samples::perf_script::write_recording(&rec, &mut Symbolizer::new(), &mut text).unwrap();
    let collapsed =
        ember_collapse::collapse_bytes(&text, &ember_collapse::CollapseOptions::default()).unwrap();
    assert!(collapsed.warnings.is_empty(), "{:?}", collapsed.warnings);
    // stackcollapse-perf puts the thread name first and strips `+0x..`.
    let mut from_profile: HashMap<String, i64> = HashMap::new();
    for d in decode(&profile) {
        let mut frames: Vec<String> = d.names.iter().rev().cloned().collect();
        frames.insert(0, d.strs["thread_name"].clone());
        *from_profile.entry(frames.join(";")).or_default() += d.count;
    }
    let from_text: HashMap<String, i64> = collapsed
        .stacks
        .into_iter()
        .map(|(s, c)| (s, c as i64))
        .collect();
    assert_eq!(from_text, from_profile);
}

fn go_binary() -> PathBuf {
    let packaged = PathBuf::from("/usr/lib/go-1.19/bin/go");
    if packaged.exists() {
        packaged
    } else {
        PathBuf::from("go")
    }
}

fn go_pprof_top(profile: &Profile, name: &str) -> String {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.pb.gz"));
    ember_pprof::write_file(profile, &out).unwrap();
    let result = Command::new(go_binary())
        .args(["tool", "pprof", "-top"])
        .arg(&out)
        .env("HOME", env!("CARGO_TARGET_TMPDIR"))
        .output()
        .expect("go (golang-1.19-go) must be installed, see .ci/setup");
    let stdout = String::from_utf8_lossy(&result.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        result.status.success(),
        "go tool pprof failed on {name}: {stderr}"
    );
    stdout
}

#[test]
fn go_tool_pprof_reads_the_written_profiles() {
    let bin = compile("go", "three_paths", &[]);
    let nofp = compile_with("go", "three_paths", "nofp", &["-fomit-frame-pointer"], &[]);
    let sleeper = compile("go", "sleeper", &[]);
    let (_rec, fp) = record(Target::Command(vec![bin.into(), "40".into()]), 499, None);
    let (_rec, dwarf) = record_with(
        Target::Command(vec![nofp.into(), "40".into()]),
        499,
        None,
        CallGraph::Dwarf,
    );
    let mut opts = Options::new(Target::Command(vec![sleeper.into()]));
    opts.off_cpu = true;
    let rec = ember_sampler::record(&opts, |_| {}).unwrap();
    let (off, _) = build_profile(&rec, &mut Symbolizer::new());
    for (profile, name, kind, funcs) in [
        (
            &fp,
            "fp",
            "Type: cpu",
            &["path_a", "path_b", "path_c", "main"][..],
        ),
        (
            &dwarf,
            "dwarf",
            "Type: cpu",
            &["path_a", "path_b", "path_c", "main"][..],
        ),
        (
            &off,
            "offcpu",
            "Type: off_cpu",
            &["sleep_long", "sleep_short", "main"][..],
        ),
    ] {
        let stdout = go_pprof_top(profile, name);
        assert!(stdout.contains(kind), "{name}: {stdout}");
        for f in funcs {
            assert!(stdout.contains(f), "{name}: {f} missing from:\n{stdout}");
        }
    }
}

#[test]
fn stripped_binary_frames_stay_unknown_with_binary_and_offset() {
    let bin = compile("stripped", "three_paths", &["-s"]);
    let (rec, _) = record(
        Target::Command(vec![bin.clone().into(), "20".into()]),
        499,
        None,
    );
    let mut sym = Symbolizer::new();
    let (profile, summary) = build_profile(&rec, &mut sym);
    assert!(
        sym.warnings
            .iter()
            .any(|w| w.contains("three_paths-fp has no symbol table")),
        "{:?}",
        sym.warnings
    );
    let unknown: Vec<String> = decode(&profile)
        .into_iter()
        .flat_map(|d| d.names)
        .filter(|n| n.starts_with("[unknown] three_paths-fp+0x"))
        .collect();
    assert!(!unknown.is_empty());
    assert!(summary.unknown_frames > 0 && summary.unknown_percent() > 0.0);
    // Frames are kept (never dropped): libc's frames still resolve around them.
    assert!(
        decode(&profile)
            .iter()
            .any(|d| d.names.iter().any(|n| n == "__libc_start_call_main"))
    );
}

fn paranoid() -> i32 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

/// Runs as an unprivileged user (re-executed by the test below): whole-host
/// sampling must fail with the sysctl to change, and a launched command
/// must still be profiled in user mode.
#[test]
fn unprivileged_inner() {
    if std::env::var_os("EMBER_SAMPLER_UNPRIVILEGED").is_none() {
        return;
    }
    let mut opts = Options::new(Target::AllCpus);
    opts.duration = Some(Duration::from_millis(50));
    match ember_sampler::record(&opts, |_| {}) {
        Err(e) => {
            let msg = e.to_string();
            println!("ALLCPUS-ERROR: {msg}");
            assert!(
                msg.contains("sudo sysctl -w kernel.perf_event_paranoid="),
                "{msg}"
            );
        }
        Ok(_) => println!("ALLCPUS-OK"),
    }
    let opts = Options::new(Target::Command(vec![
        "sh".into(),
        "-c".into(),
        "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done".into(),
    ]));
    let rec = ember_sampler::record(&opts, |_| {}).expect("user-mode recording");
    println!("COMMAND-SAMPLES: {}", rec.samples);
    for w in &rec.warnings {
        println!("WARNING: {w}");
    }
    assert!(rec.samples > 0);
    // Off-CPU: the sched_switch tracepoint is root-only; the run goes on
    // with context-switch events and says so.
    let mut opts = Options::new(Target::Command(vec!["sleep".into(), "0.1".into()]));
    opts.off_cpu = true;
    let rec = ember_sampler::record(&opts, |_| {}).expect("off-CPU recording");
    println!("OFFCPU-SOURCE: {:?}", rec.off_cpu_source);
    for w in &rec.warnings {
        println!("OFFCPU-WARNING: {w}");
    }
}

#[test]
fn unprivileged_user_gets_helpful_errors_and_user_mode_fallback() {
    if std::env::var_os("EMBER_SAMPLER_UNPRIVILEGED").is_some() {
        return;
    }
    // Only root can switch to another uid here.
    let is_root = std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false);
    if !is_root {
        eprintln!("skipped: needs root to drop to an unprivileged user");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args([
            "--exact",
            "unprivileged_inner",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("EMBER_SAMPLER_UNPRIVILEGED", "1")
        .current_dir("/tmp")
        .output()
        .expect("setpriv (util-linux) must be installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "inner run failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("OFFCPU-SOURCE: Some(ContextSwitch)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("sched:sched_switch tracepoint unavailable"),
        "{stdout}"
    );
    if paranoid() >= 1 {
        assert!(
            stdout.contains("ALLCPUS-ERROR: permission denied"),
            "{stdout}"
        );
    }
    if paranoid() >= 2 {
        assert!(
            stdout.contains("recording user-space frames only"),
            "{stdout}"
        );
    }
}

/// Checks the samples of one `three_paths` run (`ours`, `what` names it in the printed
/// summary): at least 95 % of them reach `main`, and path_a, path_b and path_c take their
/// 50/30/20 % shares within 5 points.
fn check_three_paths_shares(what: &str, ours: &[&Decoded]) {
    let total: i64 = ours.iter().map(|d| d.count).sum();
    let share = |f: &str| {
        ours.iter()
            .filter(|d| d.names.iter().any(|n| n == f))
            .map(|d| d.count)
            .sum::<i64>() as f64
            / total as f64
    };
    let completeness = share("main");
    let (a, b, c) = (share("path_a"), share("path_b"), share("path_c"));
    eprintln!(
        "{what}: {total} samples, {:.1}% down to main, shares a={:.1}% b={:.1}% c={:.1}%",
        completeness * 100.0,
        a * 100.0,
        b * 100.0,
        c * 100.0
    );
    assert!(
        completeness >= 0.95,
        "only {:.1}% complete",
        completeness * 100.0
    );
    assert!((a - 0.5).abs() <= 0.05, "path_a share {a}");
    assert!((b - 0.3).abs() <= 0.05, "path_b share {b}");
    assert!((c - 0.2).abs() <= 0.05, "path_c share {c}");
}

/// Checks the 50/30/20 split of `three_paths` built without frame pointers.
fn check_three_paths_without_frame_pointers(test: &str, call_graph: CallGraph) {
    let bin = compile_with(test, "three_paths", "nofp", &["-fomit-frame-pointer"], &[]);
    let (rec, profile) = record_with(
        Target::Command(vec![bin.into(), "150".into()]),
        999,
        None,
        call_graph,
    );
    let samples = decode(&profile);
    let ours: Vec<&Decoded> = samples
        .iter()
        .filter(|d| d.strs.get("comm").is_some_and(|c| c == "three_paths-nof"))
        .collect();
    let total: i64 = ours.iter().map(|d| d.count).sum();
    assert!(total >= 300, "too few samples: {total} of {}", rec.samples);
    let what = format!(
        "three_paths -fomit-frame-pointer {call_graph:?} (lost {})",
        rec.lost
    );
    check_three_paths_shares(&what, &ours);
}

#[test]
fn three_paths_without_frame_pointers_unwind_with_dwarf() {
    check_three_paths_without_frame_pointers("dwarf", CallGraph::Dwarf);
}

#[test]
fn three_paths_without_frame_pointers_unwind_with_auto() {
    check_three_paths_without_frame_pointers("auto", CallGraph::Auto);
}

#[test]
fn frame_pointer_walk_alone_cannot_unwind_without_frame_pointers() {
    // The control for the two tests above: the kernel's frame-pointer walk
    // loses the callers, so their completeness really comes from CFI.
    let bin = compile_with(
        "fpcontrol",
        "three_paths",
        "nofp",
        &["-fomit-frame-pointer"],
        &[],
    );
    let (_rec, profile) = record(Target::Command(vec![bin.into(), "40".into()]), 499, None);
    let samples = decode(&profile);
    let total: i64 = samples.iter().map(|d| d.count).sum();
    let with_main: i64 = samples
        .iter()
        .filter(|d| d.names.iter().any(|n| n == "main"))
        .map(|d| d.count)
        .sum();
    assert!(total > 0);
    assert!(
        (with_main as f64) < 0.5 * total as f64,
        "{with_main}/{total}"
    );
}

#[test]
fn off_cpu_time_is_attributed_to_the_blocked_stacks() {
    let bin = compile("offcpu", "sleeper", &[]);
    let mut opts = Options::new(Target::Command(vec![bin.into()]));
    opts.off_cpu = true;
    let rec = ember_sampler::record(&opts, |_| {}).expect("recording");
    let (profile, _) = build_profile(&rec, &mut Symbolizer::new());
    ember_pprof::validate(&profile).unwrap();
    assert_eq!(string(&profile, profile.sample_type[2].r#type), "off_cpu");
    assert_eq!(string(&profile, profile.sample_type[2].unit), "nanoseconds");
    let off = |f: &str| -> i64 {
        profile
            .sample
            .iter()
            .zip(decode(&profile))
            .filter(|(_, d)| d.names.iter().any(|n| n == f))
            .map(|(s, _)| s.value[2])
            .sum()
    };
    let (long, short) = (off("sleep_long"), off("sleep_short"));
    programs::check_sleeper_times("off-CPU", long as f64, short as f64, rec.off_cpu_switches);
    // Both paths pass through nap, whose stacks reach main.
    let total: i64 = profile.sample.iter().map(|s| s.value[2]).sum();
    assert!(off("main") as f64 >= 0.95 * total as f64);
}

#[test]
fn wall_time_adds_on_and_off_cpu_time() {
    let sleeper = compile("wall", "sleeper", &[]);
    let mut opts = Options::new(Target::Command(vec![sleeper.into()]));
    opts.wall = true;
    let rec = ember_sampler::record(&opts, |_| {}).unwrap();
    let (profile, _) = build_profile(&rec, &mut Symbolizer::new());
    ember_pprof::validate(&profile).unwrap();
    let names: Vec<&str> = profile
        .sample_type
        .iter()
        .map(|t| string(&profile, t.r#type))
        .collect();
    assert_eq!(names, ["samples", "cpu", "off_cpu", "wall"]);
    let sum = |i: usize| -> i64 { profile.sample.iter().map(|s| s.value[i]).sum() };
    assert_eq!(sum(3), sum(1) + sum(2));
    // The program sleeps 400 ms; wall time covers at least that.
    assert!(sum(3) >= 400_000_000, "{}", sum(3));
    assert!(
        profile
            .sample
            .iter()
            .all(|s| s.value[3] == s.value[1] + s.value[2])
    );
}

/// Compiles `tests/programs/<name>.rs` with rustc (optimised, full debuginfo).
fn compile_rust(test: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    let status = Command::new("rustc")
        .args([
            "--edition",
            "2021",
            "-C",
            "opt-level=2",
            "-C",
            "debuginfo=2",
        ])
        .arg("-o")
        .arg(&out)
        .arg(programs::programs_dir().join(format!("{name}.rs")))
        .status()
        .expect("rustc must be installed");
    assert!(status.success(), "rustc failed for {name}");
    out
}

/// The function names, file names and lines of every location in `profile`.
fn location_lines(profile: &Profile) -> Vec<Vec<(String, String, i64)>> {
    let funcs: HashMap<u64, (&str, &str)> = profile
        .function
        .iter()
        .map(|f| (f.id, (string(profile, f.name), string(profile, f.filename))))
        .collect();
    profile
        .location
        .iter()
        .map(|l| {
            l.line
                .iter()
                .map(|line| {
                    let (name, file) = funcs.get(&line.function_id).copied().unwrap_or(("", ""));
                    (name.to_string(), file.to_string(), line.line)
                })
                .collect()
        })
        .collect()
}

#[test]
fn inline_shows_inlined_rust_functions_as_frames_with_lines() {
    let bin = compile_rust("inline", "inlined");
    let mut opts = Options::new(Target::Command(vec![bin.clone().into(), "1500".into()]));
    opts.call_graph = CallGraph::Dwarf;
    opts.frequency = 999;
    let rec = ember_sampler::record(&opts, |_| {}).expect("recording");
    assert!(rec.samples >= 100, "too few samples: {}", rec.samples);
    let hot = "inlined::mix_inlined_hot";
    let caller = "inlined::outer_caller";

    // Without --inline: the hot loop is attributed to its caller only.
    let (plain, _) = build_profile(&rec, &mut Symbolizer::new());
    ember_pprof::validate(&plain).expect("valid profile");
    let plain_samples = decode(&plain);
    assert!(
        plain_samples
            .iter()
            .all(|d| d.names.iter().all(|n| n != hot))
    );
    let in_caller: i64 = plain_samples
        .iter()
        .filter(|d| d.names.first().is_some_and(|n| n == caller))
        .map(|d| d.count)
        .sum();
    assert!(
        in_caller * 2 > rec.samples as i64,
        "{in_caller} of {}",
        rec.samples
    );

    // With --inline: the inlined function is its own frame, leaf-most, with
    // its caller right above it, and the pair sits in one Location.
    let mut sym = Symbolizer::with_inline(true);
    let (inl, _) = build_profile(&rec, &mut sym);
    ember_pprof::validate(&inl).expect("valid profile");
    let samples = decode(&inl);
    let with_pair: i64 = samples
        .iter()
        .filter(|d| d.names.windows(2).any(|w| w[0] == hot && w[1] == caller))
        .map(|d| d.count)
        .sum();
    assert!(
        with_pair * 2 > rec.samples as i64,
        "{with_pair} of {} samples show {hot} under {caller}",
        rec.samples
    );
    let locs = location_lines(&inl);
    let pair = locs
        .iter()
        .find(|l| l.len() >= 2 && l[0].0 == hot && l[l.len() - 1].0 == caller)
        .expect("a location with the inlined function first and its caller last");
    // Lines point into the source: the hot loop body and the call site.
    let source = std::fs::read_to_string(programs::programs_dir().join("inlined.rs")).unwrap();
    let src_lines: Vec<&str> = source.lines().collect();
    let (_, file, line) = &pair[0];
    assert!(file.ends_with("inlined.rs"), "{file}");
    let text = src_lines[(*line as usize).saturating_sub(1)];
    assert!(
        (8..=13).contains(line),
        "inlined frame at line {line}: {text}"
    );
    let (_, file, line) = &pair[pair.len() - 1];
    assert!(file.ends_with("inlined.rs"), "{file}");
    assert!(
        src_lines[(*line as usize).saturating_sub(1)].contains("mix_inlined_hot("),
        "caller frame at line {line}"
    );
    // Folded output puts the caller before the callee.
    let folded = ember_pprof::folded_stacks(&inl, 0);
    assert!(
        folded
            .iter()
            .any(|(s, _)| s.ends_with(&format!("{caller};{hot}"))),
        "{:?}",
        folded.iter().take(5).collect::<Vec<_>>()
    );
    // perf script text shows the inlined frame too (innermost first).
    let mut text = Vec::new();
    ember_samples::perf_script::write_recording(&rec, &mut sym, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains(&format!(" {hot} (")),
        "no inlined frame in perf script text"
    );
}

fn run_tool(program: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{program} must be installed: {e}"));
    assert!(status.success(), "{program} {args:?} failed");
}

/// Names of all functions in `profile`'s samples of binary `comm`.
fn sampled_names(profile: &Profile, comm: &str) -> Vec<String> {
    decode(profile)
        .into_iter()
        .filter(|d| d.strs.get("comm").is_some_and(|c| c == comm))
        .flat_map(|d| d.names)
        .collect()
}

#[test]
fn symbols_come_from_split_debug_files_by_debuglink_and_build_id() {
    let bin = compile("splitdebug", "three_paths", &["-g"]);
    let debug = bin.with_extension("debug");
    let os = |p: &Path| p.as_os_str().to_owned();
    run_tool(
        "objcopy",
        &["--only-keep-debug".as_ref(), &os(&bin), &os(&debug)],
    );
    run_tool("strip", &["--strip-all".as_ref(), &os(&bin)]);
    let link = format!("--add-gnu-debuglink={}", debug.display());
    run_tool("objcopy", &[link.as_ref(), &os(&bin)]);

    let (rec, _) = record(
        Target::Command(vec![bin.clone().into(), "30".into()]),
        499,
        None,
    );
    let comm = "three_paths-fp";
    let path: std::sync::Arc<str> = std::sync::Arc::from(bin.to_str().unwrap());

    // Through .gnu_debuglink (the debug file sits next to the binary).
    let mut sym = Symbolizer::new();
    let (profile, _) = build_profile(&rec, &mut sym);
    let names = sampled_names(&profile, comm);
    assert!(names.iter().any(|n| n == "path_a"), "{names:?}");
    let b = sym.binary(&path, 0).expect("binary loads");
    assert_eq!(b.debug_file.as_deref(), Some(debug.as_path()));
    assert!(!b.build_id.is_empty());
    let build_id = b.build_id.clone();

    // Without the debug file the same recording has no names for it.
    let hidden = bin.with_extension("hidden");
    std::fs::rename(&debug, &hidden).unwrap();
    let mut sym = Symbolizer::new();
    let (profile, _) = build_profile(&rec, &mut sym);
    let names = sampled_names(&profile, comm);
    assert!(!names.iter().any(|n| n == "path_a"), "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("[unknown] three_paths-fp+0x"))
    );

    // Through /usr/lib/debug/.build-id/xx/rest.debug (needs root to write
    // there, which CI has; elsewhere that part is reported and skipped).
    let dir = Path::new("/usr/lib/debug/.build-id").join(&build_id[..2]);
    let by_id = dir.join(format!("{}.debug", &build_id[2..]));
    if std::fs::create_dir_all(&dir).is_err() || std::fs::copy(&hidden, &by_id).is_err() {
        eprintln!("cannot write {}: build-id lookup not tested", dir.display());
        return;
    }
    let mut sym = Symbolizer::new();
    let (profile, _) = build_profile(&rec, &mut sym);
    let found = sym.binary(&path, 0).and_then(|b| b.debug_file.clone());
    let _ = std::fs::remove_file(&by_id);
    let names = sampled_names(&profile, comm);
    assert!(names.iter().any(|n| n == "path_a"), "{names:?}");
    assert_eq!(found.as_deref(), Some(by_id.as_path()));
}

#[test]
fn each_address_is_symbolized_once_and_the_disk_cache_answers_the_next_run() {
    let bin = compile("symcache", "three_paths", &[]);
    let (rec, _) = record(
        Target::Command(vec![bin.clone().into(), "30".into()]),
        999,
        None,
    );
    let path: std::sync::Arc<str> = std::sync::Arc::from(bin.to_str().unwrap());
    // Distinct lookup offsets of this binary over all processes and maps.
    let mut offsets = std::collections::HashSet::new();
    for key in rec.stacks().keys() {
        for f in &key.frames {
            if let ember_samples::Frame::User { map, addr, ret } = *f {
                let m = &rec.maps()[map as usize];
                if m.path == path {
                    let off = addr - m.start + m.pgoff;
                    offsets.insert(if ret { off - 1 } else { off });
                }
            }
        }
    }
    assert!(offsets.len() >= 4, "{offsets:?}");
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("symcache/cache");
    let _ = std::fs::remove_dir_all(&cache);

    let mut sym = Symbolizer::with_inline(true);
    sym.cache_dir = Some(cache.clone());
    let (first, _) = build_profile(&rec, &mut sym);
    // A second output of the same recording looks nothing up again.
    ember_samples::perf_script::write_recording(&rec, &mut sym, std::io::sink()).unwrap();
    let (_again, _) = build_profile(&rec, &mut sym);
    let b = sym.binary(&path, 0).unwrap();
    assert_eq!(b.lookups, offsets.len() as u64);
    assert_eq!(b.disk_entries, 0);
    let build_id = b.build_id.clone();
    sym.save_cache();
    assert!(sym.warnings.iter().all(|w| !w.contains("symbol cache")));
    assert!(cache.join(format!("{build_id}.sym")).exists());

    // The next run answers every address from disk, with the same names.
    let mut sym = Symbolizer::with_inline(true);
    sym.cache_dir = Some(cache.clone());
    let (second, _) = build_profile(&rec, &mut sym);
    let b = sym.binary(&path, 0).unwrap();
    assert_eq!(b.lookups, 0);
    assert_eq!(b.disk_entries, offsets.len() as u64);
    assert_eq!(
        ember_pprof::folded_stacks(&first, 0),
        ember_pprof::folded_stacks(&second, 0)
    );
    // A damaged cache file degrades to fresh lookups, not errors.
    std::fs::write(cache.join(format!("{build_id}.sym")), "zz\tnot hex\n\n12\n").unwrap();
    let mut sym = Symbolizer::new();
    sym.cache_dir = Some(cache);
    let (third, _) = build_profile(&rec, &mut sym);
    assert_eq!(
        ember_pprof::folded_stacks(&first, 0),
        ember_pprof::folded_stacks(&third, 0)
    );
    assert_eq!(sym.binary(&path, 0).unwrap().lookups, offsets.len() as u64);
}
