//! Off-CPU time from the `sched:sched_switch` tracepoint (and the
//! context-switch fallback): blocked time per stack for a program that sleeps
//! known amounts, task state and next task of each switch in the raw events,
//! and CPU-wide (-a) sampling where switch-ins come from `next_pid`.
//!
//! Needs root (tracefs, raw tracepoint samples) and gcc, as CI runs them.

#[path = "programs/mod.rs"]
mod programs;

use ember_sampler::{CallGraph, OffCpuSource, Options, Session, Status, Target};
use ember_samples::Resolver;
use ember_samples::{RawEvent, Recording, Symbolizer};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

fn compile(test: &str, name: &str) -> PathBuf {
    programs::compile(test, name, name, &programs::FRAME_POINTERS)
}

/// Blocked nanoseconds of `pid` in stacks that contain `function`.
fn off_cpu_in(rec: &Recording, sym: &mut Symbolizer, pid: u32, function: &str) -> u64 {
    let mut resolver = Resolver::new(rec, sym);
    rec.off_cpu_stacks()
        .iter()
        .filter(|(k, _)| k.pid == pid)
        .filter(|(k, _)| {
            k.frames
                .iter()
                .any(|f| &*resolver.resolve(f).name == function)
        })
        .map(|(_, v)| v.period)
        .sum()
}

fn check_sleeper(rec: &Recording, pid: u32) {
    let mut sym = Symbolizer::new();
    let long = off_cpu_in(rec, &mut sym, pid, "sleep_long");
    let short = off_cpu_in(rec, &mut sym, pid, "sleep_short");
    let what = format!("{:?}", rec.off_cpu_source);
    programs::check_sleeper_times(&what, long as f64, short as f64, rec.off_cpu_switches);
}

fn sleeper_options(source: OffCpuSource, target: Target) -> Options {
    let mut opts = Options::new(target);
    opts.call_graph = CallGraph::Fp;
    opts.off_cpu = true;
    opts.off_cpu_source = source;
    opts.raw_events = true;
    opts
}

#[test]
fn sched_switch_tracepoint_times_blocked_stacks_with_task_states() {
    let bin = compile("offcpu_tp", "sleeper");
    let opts = sleeper_options(OffCpuSource::Tracepoint, Target::Command(vec![bin.into()]));
    let mut session = Session::start(&opts).expect("tracepoint session (root needed)");
    let pid = session.child_pid().unwrap() as u32;
    while session.poll(Duration::from_millis(50)) == Status::Running {}
    let rec = session.finish();
    assert_eq!(rec.off_cpu_source, Some(OffCpuSource::Tracepoint));
    check_sleeper(&rec, pid);

    let switches: Vec<_> = rec
        .raw_events()
        .iter()
        .filter_map(|e| match e {
            RawEvent::Switch(s) if s.prev_pid == pid => Some(s),
            _ => None,
        })
        .collect();
    // 40 naps, each one switch out (plus exec/exit noise).
    assert!(switches.len() >= 40, "{} switches", switches.len());
    let sleeping = switches
        .iter()
        .filter(|s| s.prev_state_str() == "S")
        .count();
    assert!(
        sleeping >= 40,
        "{sleeping} of {} in state S",
        switches.len()
    );
    assert!(
        switches
            .iter()
            .all(|s| s.next_tid.is_some() && s.next_comm.is_some())
    );
    assert!(
        switches
            .iter()
            .all(|s| s.prev_tid == pid && &*s.prev_comm == "sleeper")
    );
    let mut sym = Symbolizer::new();
    let mut resolver = Resolver::new(&rec, &mut sym);
    // (A frame-pointer walk from inside libc skips nap itself: its callers
    // are what the stack must show.)
    let in_sleep = switches
        .iter()
        .filter(|s| {
            rec.raw_stacks()[s.prev_stack as usize].iter().any(|f| {
                let name = resolver.resolve(f).name;
                &*name == "sleep_long" || &*name == "sleep_short"
            })
        })
        .count();
    assert!(in_sleep >= 40, "{in_sleep} switch stacks through sleep_*");
    let times: Vec<u64> = rec.raw_events().iter().map(RawEvent::time_ns).collect();
    assert!(times.is_sorted());
}

#[test]
fn context_switch_fallback_measures_the_same_without_states() {
    let bin = compile("offcpu_cs", "sleeper");
    let opts = sleeper_options(
        OffCpuSource::ContextSwitch,
        Target::Command(vec![bin.into()]),
    );
    let mut session = Session::start(&opts).expect("session");
    let pid = session.child_pid().unwrap() as u32;
    while session.poll(Duration::from_millis(50)) == Status::Running {}
    let rec = session.finish();
    assert_eq!(rec.off_cpu_source, Some(OffCpuSource::ContextSwitch));
    check_sleeper(&rec, pid);
    assert!(
        rec.raw_events()
            .iter()
            .any(|e| matches!(e, RawEvent::Switch(_)))
    );
    assert!(rec.raw_events().iter().all(|e| match e {
        RawEvent::Switch(s) => s.prev_state.is_none() && s.next_tid.is_none(),
        RawEvent::Sample(_) => true,
    }));
}

// Every switch-in must be found even when the tracepoint misses the switches *from* a CPU's
// idle task (seen on kernel 6.18, mostly after other sessions ran): the sleeper's returns then
// come from PERF_RECORD_SWITCH records. This failed 3 runs in 4 before they were asked for.
#[test]
fn whole_host_tracepoint_times_a_sleeper_from_next_pid() {
    let bin = compile("offcpu_host", "sleeper");
    let opts = sleeper_options(OffCpuSource::Tracepoint, Target::AllCpus);
    let mut session = Session::start(&opts).expect("tracepoint session (root needed)");
    let mut child = Command::new(&bin).spawn().expect("spawn");
    let pid = child.id();
    let begun = Instant::now();
    while child.try_wait().unwrap().is_none() && begun.elapsed() < Duration::from_secs(10) {
        session.poll(Duration::from_millis(50));
    }
    session.poll(Duration::from_millis(50));
    let rec = session.finish();
    assert_eq!(rec.off_cpu_source, Some(OffCpuSource::Tracepoint));
    check_sleeper(&rec, pid);
    // The raw timeline (what a Perfetto trace shows) has the sleeper come back after every time
    // it left: switch-outs and switch-ins alternate.
    let mut on_cpu = true;
    let mut episodes = 0;
    for e in rec.raw_events() {
        let RawEvent::Switch(s) = e else { continue };
        if s.prev_tid == pid {
            assert!(
                on_cpu,
                "left twice without coming back at {} ({} records lost)",
                s.time_ns, rec.lost
            );
            on_cpu = false;
            episodes += 1;
        }
        if s.next_tid == Some(pid) {
            on_cpu = true;
        }
    }
    assert!(episodes >= 40, "{episodes} switch-outs");
}
