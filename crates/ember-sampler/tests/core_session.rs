//! The continuous-session API ([`Session`]): consecutive cuts of one running
//! program add up to what a single recording of the same interval sees,
//! raw events are complete and time-ordered, and the state of exited
//! processes is dropped between cuts.
//!
//! Like `tests/record.rs` these need perf_event_open (root in CI) and gcc.

#[path = "programs/mod.rs"]
mod programs;

use ember_sampler::{CallGraph, Options, Session, Status, Target};
use ember_samples::Resolver;
use ember_samples::{RawEvent, Recording, Symbolizer};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn compile(test: &str, name: &str, flags: &[&str]) -> PathBuf {
    programs::compile(test, name, name, flags)
}

/// Starts `bin args` and waits until its image is mapped (so attaching to
/// it tests -p, not the exec race).
fn spawn_mapped(bin: &Path, args: &[&str]) -> Child {
    let child = Command::new(bin).args(args).spawn().expect("spawn");
    let exe = bin.to_str().unwrap();
    for _ in 0..200 {
        let maps =
            std::fs::read_to_string(format!("/proc/{}/maps", child.id())).unwrap_or_default();
        if maps.contains(exe) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

/// Names of the frames of a raw stack, leaf first.
fn stack_names(rec: &Recording, sym: &mut Symbolizer, stack: u32) -> Vec<String> {
    let mut resolver = Resolver::new(rec, sym);
    rec.raw_stacks()[stack as usize]
        .iter()
        .map(|f| resolver.resolve(f).name.to_string())
        .collect()
}

fn check_raw_events(rec: &Recording) {
    let samples: Vec<_> = rec
        .raw_events()
        .iter()
        .filter_map(|e| match e {
            RawEvent::Sample(s) => Some(*s),
            RawEvent::Switch(_) => None,
        })
        .collect();
    assert_eq!(
        samples.len() as u64,
        rec.samples,
        "one raw event per sample"
    );
    let times: Vec<u64> = rec.raw_events().iter().map(RawEvent::time_ns).collect();
    assert!(times.is_sorted(), "raw events out of order");
    let end = rec.start_monotonic_ns + rec.duration_ns as u64;
    assert!(
        times
            .iter()
            .all(|&t| t >= rec.start_monotonic_ns.saturating_sub(20_000_000) && t <= end),
        "raw event outside [{}, {end}]",
        rec.start_monotonic_ns
    );
    let weight: u64 = samples.iter().map(|s| s.weight_ns).sum();
    let period: u64 = rec.stacks().values().map(|v| v.period).sum();
    assert_eq!(weight, period, "raw weights = aggregated CPU time");
    assert!(
        samples
            .iter()
            .all(|s| (s.stack as usize) < rec.raw_stacks().len())
    );
}

#[test]
fn two_cuts_add_up_to_one_recording_of_the_same_interval() {
    let bin = compile(
        "session_cuts",
        "three_paths",
        &["-fno-omit-frame-pointer", "-fno-shrink-wrap"],
    );
    let mut child = spawn_mapped(&bin, &["600"]);
    let pid = child.id();
    let options = |raw: bool| {
        let mut o = Options::new(Target::Pids(vec![pid]));
        o.frequency = 499;
        o.call_graph = CallGraph::Fp;
        o.raw_events = raw;
        o
    };
    let mut cutting = Session::start(&options(true)).expect("session");
    let mut single = Session::start(&options(false)).expect("session");
    let begun = Instant::now();
    let mut cuts = Vec::new();
    for until in [Duration::from_millis(800), Duration::from_millis(1600)] {
        while begun.elapsed() < until {
            assert_eq!(cutting.poll(Duration::from_millis(50)), Status::Running);
            single.poll(Duration::from_millis(0));
        }
        cuts.push(cutting.cut());
    }
    let whole = single.finish();
    let progress = cutting.progress();
    drop(cutting);
    let _ = child.kill();
    let _ = child.wait();

    let (a, b) = (&cuts[0], &cuts[1]);
    eprintln!(
        "cuts: {} + {} samples ({:.0} + {:.0} ms), single recording: {} samples ({:.0} ms)",
        a.samples,
        b.samples,
        a.duration_ns as f64 / 1e6,
        b.duration_ns as f64 / 1e6,
        whole.samples,
        whole.duration_ns as f64 / 1e6
    );
    // ~800 ms each at 499 Hz on one busy thread: up to ~400 samples, fewer
    // on a loaded 2-core machine.
    assert!(
        a.samples >= 30 && b.samples >= 30,
        "{} {}",
        a.samples,
        b.samples
    );
    let sum = a.samples + b.samples;
    let diff = sum.abs_diff(whole.samples) as f64;
    assert!(
        diff <= 0.1 * whole.samples as f64,
        "cuts {sum} vs single {}",
        whole.samples
    );
    assert_eq!(progress.samples, sum);
    // Consecutive, non-overlapping time ranges.
    assert_eq!(
        a.start_monotonic_ns + a.duration_ns as u64,
        b.start_monotonic_ns
    );
    assert!(b.start_unix_ns > a.start_unix_ns);
    for cut in &cuts {
        check_raw_events(cut);
        assert!(cut.stacks().keys().all(|k| k.pid == pid));
    }
    // Process state (mappings) carries over: the second cut's stacks still
    // symbolize down to the three paths and main.
    let mut sym = Symbolizer::new();
    for cut in &cuts {
        let mut in_paths = 0;
        for e in cut.raw_events() {
            if let RawEvent::Sample(s) = e {
                let names = stack_names(cut, &mut sym, s.stack);
                if names.iter().any(|n| n.starts_with("path_")) && names.iter().any(|n| n == "main")
                {
                    in_paths += 1;
                }
            }
        }
        assert!(
            in_paths as f64 >= 0.9 * cut.samples as f64,
            "{in_paths}/{} samples reach path_* and main",
            cut.samples
        );
    }
}

#[test]
fn exited_processes_are_forgotten_between_cuts() {
    // 150 short-lived children, then a long sleep of the shell.
    let script = "i=0; while [ $i -lt 150 ]; do /bin/true; i=$((i+1)); done; sleep 3";
    let mut opts = Options::new(Target::Command(vec![
        "/bin/sh".into(),
        "-c".into(),
        script.into(),
    ]));
    opts.call_graph = CallGraph::Fp;
    let mut session = Session::start(&opts).expect("session");
    let begun = Instant::now();
    // The loop takes well under a second; wait for it to be over.
    let mut peak = 0;
    while begun.elapsed() < Duration::from_millis(1500) {
        session.poll(Duration::from_millis(50));
        peak = peak.max(session.tracked_tasks().0);
    }
    let before = session.tracked_tasks();
    let first = session.cut();
    session.poll(Duration::from_millis(50));
    let second = session.cut();
    let after = session.tracked_tasks();
    let pid = session.child_pid().unwrap();
    // SAFETY: plain kill(2) on the child we launched.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    while session.poll(Duration::from_millis(50)) == Status::Running {}
    let last = session.finish();
    eprintln!(
        "tracked processes/threads: peak {peak}, before cuts {before:?}, after two cuts {after:?}; \
         {} + {} + {} samples",
        first.samples, second.samples, last.samples
    );
    // Exited children stay known until a cut (late samples may still name
    // them), then go; only the shell and its sleep remain.
    assert!(before.0 >= 100, "{before:?}");
    assert!(after.0 <= 3, "{after:?}");
    assert!(after.1 <= 3, "{after:?}");
    assert!(last.exit_status.is_some());
}
