//! Complete user stacks: every sample of a Rust, C and C++ program, each built with and
//! without frame pointers, unwinds from the hot function up to the root of its thread:
//! `_start` through glibc's start-up (`__libc_start_main`, `__libc_start_call_main`), `main`
//! and, for Rust, the runtime (`std::rt::lang_start_internal`); a spawned Rust thread up to
//! `clone3` through `start_thread`. Both `--call-graph dwarf` and `auto` are checked (`fp`
//! is the kernel's walk alone and stops at the first function without a frame pointer, as
//! `perf --call-graph fp` does).
//!
//! The two failures this guards against: `rustc`'s linker (lld) starts the code segment in
//! the file page where read-only data ends, so the first segment holding the mapping's page
//! gave a load bias off by a page and CFI stopped after a frame or two; and `auto` kept the
//! kernel's frame-pointer walk for binaries with frame pointers, which ends in glibc (built
//! without them), so `_start` was never reached.
//!
//! The same stacks are compared with `perf record --call-graph dwarf` on the same programs
//! where `perf` runs (Debian: linux-perf).
//!
//! Needs perf_event_open (root in CI), rustc, gcc and g++.

#[path = "programs/mod.rs"]
mod programs;

use ember_sampler::{CallGraph, Options, Session, Status, Target};
use ember_samples::{Recording, Resolver, Symbolizer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long each program spins, in milliseconds.
const RUN_MS: u32 = 1200;

/// A frame name the stack must contain, in order from the root.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// This exact name.
    Is(&'static str),
    /// A name starting with this (`__libc_start_main` is also `__libc_start_main_impl`).
    Prefix(&'static str),
    /// A name containing this (C++ names carry their parameters, Rust names their path).
    Has(&'static str),
}

impl Want {
    fn matches(self, name: &str) -> bool {
        match self {
            Want::Is(s) => name == s,
            Want::Prefix(s) => name.starts_with(s),
            Want::Has(s) => name.contains(s),
        }
    }
}

/// glibc's start-up down to `main`, the root of every main thread.
const START: [Want; 4] = [
    Want::Is("_start"),
    Want::Prefix("__libc_start_main"),
    Want::Is("__libc_start_call_main"),
    Want::Is("main"),
];

/// Samples in `hot_loop`, how many of them complete, and an incomplete one for the message.
#[derive(Default)]
struct Tally {
    all: u64,
    good: u64,
    example: Option<String>,
}

struct Program {
    /// The file name, also the process's comm (at most 15 bytes).
    name: String,
    path: PathBuf,
    rust: bool,
}

fn run(cmd: &mut Command) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed");
}

/// Builds `to_start.{rs,c,cpp}` with and without frame pointers into a directory of `test`.
fn build(test: &str) -> Vec<Program> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(test);
    std::fs::create_dir_all(&dir).unwrap();
    let src = programs::programs_dir();
    let mut out = Vec::new();
    for fp in [true, false] {
        let suffix = if fp { "fp" } else { "nofp" };
        let rs = dir.join(format!("rs-{suffix}"));
        let mut rustc = Command::new("rustc");
        rustc.args(["-O", "-g", "-o"]).arg(&rs);
        if fp {
            rustc.args(["-C", "force-frame-pointers=yes"]);
        }
        run(rustc.arg(src.join("to_start.rs")));
        out.push((rs, true));
        for (lang, compiler) in [("c", "gcc"), ("cpp", "g++")] {
            let bin = dir.join(format!("{lang}-{suffix}"));
            let flags: &[&str] = if fp {
                &programs::FRAME_POINTERS
            } else {
                &["-fomit-frame-pointer"]
            };
            run(Command::new(compiler)
                .args(["-O2", "-g"])
                .args(flags)
                .arg("-o")
                .arg(&bin)
                .arg(src.join(format!("to_start.{lang}"))));
            out.push((bin, false));
        }
    }
    out.into_iter()
        .map(|(path, rust)| Program {
            name: path.file_name().unwrap().to_str().unwrap().to_string(),
            path,
            rust,
        })
        .collect()
}

/// Records every program at once (two cores: they share them) with `call_graph`.
fn record(programs: &[Program], call_graph: CallGraph) -> Recording {
    let script: Vec<String> = programs
        .iter()
        .map(|p| format!("{} {RUN_MS} >/dev/null &", p.path.display()))
        .collect();
    let script = format!("{} wait", script.join(" "));
    let mut opts = Options::new(Target::Command(vec![
        "/bin/sh".into(),
        "-c".into(),
        script.into(),
    ]));
    opts.frequency = 499;
    opts.call_graph = call_graph;
    let mut session = Session::start(&opts).expect("perf_event_open (run as root)");
    while session.poll(Duration::from_millis(50)) == Status::Running {}
    session.finish()
}

/// Whether `names` (root first) holds `want` in order.
fn holds_in_order(names: &[String], want: &[Want]) -> bool {
    let mut next = want.iter().peekable();
    for name in names {
        if next.peek().is_some_and(|w| w.matches(name)) {
            next.next();
        }
    }
    next.peek().is_none()
}

/// Checks that at least 90% of the samples of each program in `hot_loop`, per thread kind,
/// have complete stacks (`root` the exact outermost frame, then `want` in order).
fn check(rec: &Recording, programs: &[Program], mode: &str) {
    let mut sym = Symbolizer::new();
    let mut resolver = Resolver::new(rec, &mut sym);
    let mut failures = Vec::new();
    for p in programs {
        let (mut main, mut spawned) = (Tally::default(), Tally::default());
        for (key, value) in rec.stacks() {
            if *key.comm != *p.name {
                continue;
            }
            let mut names: Vec<String> = key
                .frames
                .iter()
                .map(|f| resolver.resolve(f).name.to_string())
                .collect();
            names.reverse();
            if !names.iter().any(|n| n.contains("hot_loop")) {
                continue;
            }
            let is_main = key.tid == key.pid;
            let mut want: Vec<Want> = if is_main {
                START.to_vec()
            } else {
                // glibc's thread entry; with libc6-dbg its symbol table names it `__GI___clone3`.
                vec![Want::Has("clone3"), Want::Is("start_thread")]
            };
            if p.rust && is_main {
                want.push(Want::Is("std::rt::lang_start_internal"));
            }
            if p.rust {
                want.push(Want::Has("spin_until"));
            }
            want.extend([Want::Has("middle_call"), Want::Has("hot_loop")]);
            let complete = want[0].matches(&names[0]) && holds_in_order(&names, &want);
            let tally = if is_main { &mut main } else { &mut spawned };
            tally.all += value.count;
            if complete {
                tally.good += value.count;
            } else {
                tally.example.get_or_insert_with(|| names.join(";"));
            }
        }
        let kinds: &[(&str, &Tally)] = if p.rust {
            &[("main thread", &main), ("spawned thread", &spawned)]
        } else {
            &[("main thread", &main)]
        };
        for (kind, Tally { all, good, example }) in kinds {
            eprintln!(
                "{mode}: {} {kind}: {good}/{all} samples in hot_loop reach the root",
                p.name
            );
            if *all < 10 || (*good as f64) < 0.9 * *all as f64 {
                failures.push(format!(
                    "{mode} {} {kind}: {good}/{all} complete; e.g. {}",
                    p.name,
                    example.as_deref().unwrap_or("-")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "incomplete stacks:\n{}",
        failures.join("\n")
    );
}

#[test]
fn dwarf_stacks_reach_start_for_rust_c_and_cpp_with_and_without_frame_pointers() {
    let programs = build("roots_dwarf");
    let rec = record(&programs, CallGraph::Dwarf);
    check(&rec, &programs, "dwarf");
}

#[test]
fn auto_stacks_reach_start_for_rust_c_and_cpp_with_and_without_frame_pointers() {
    let programs = build("roots_auto");
    let rec = record(&programs, CallGraph::Auto);
    check(&rec, &programs, "auto");
    // What auto chose for the frame-pointer builds: the Rust one keeps frame pointers (its
    // stacks above are completed by CFI from glibc on); gcc leaves them out of leaf
    // functions, so its builds lose the caller of a leaf and go to CFI.
    for p in programs.iter().filter(|p| p.name.ends_with("-fp")) {
        let choice = rec
            .auto_choices
            .iter()
            .find(|c| *c.path == *p.path.to_str().unwrap());
        eprintln!("auto: {}: {choice:?}", p.name);
    }
}

/// A frame name as both tools can agree on it: perf prints C++ names without their
/// parameters and clone suffixes (`middle_call`, not `middle_call(unsigned long)`), and
/// glibc's versioned ones with their version (`__libc_start_main@@GLIBC_2.34`).
fn comparable(name: &str) -> String {
    let name = name.split("@@").next().unwrap_or_default();
    name.split('(')
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

/// The main thread's stacks through `hot_loop`, root first and cut at `hot_loop`, with how
/// many samples each: from `perf script --no-inline -F comm,pid,tid,ip,sym` text
/// (`comm pid/tid` lines, then one `address symbol` line per frame, leaf first, blocks
/// separated by blank lines).
fn perf_stacks(text: &str) -> HashMap<Vec<String>, u64> {
    let mut out = HashMap::new();
    for block in text.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(head) = lines.next() else { continue };
        let main_thread = head
            .split_whitespace()
            .find_map(|w| w.split_once('/'))
            .is_some_and(|(pid, tid)| pid == tid);
        if !main_thread {
            continue;
        }
        let names: Vec<String> = lines
            .filter_map(|l| l.trim().split_once(' ').map(|(_, sym)| comparable(sym)))
            .collect();
        if let Some(hot) = names.iter().position(|n| n.contains("hot_loop")) {
            let stack: Vec<String> = names[hot..].iter().rev().cloned().collect();
            *out.entry(stack).or_insert(0) += 1;
        }
    }
    out
}

/// The same from one of our recordings.
fn our_stacks(rec: &Recording, comm: &str) -> HashMap<Vec<String>, u64> {
    let mut sym = Symbolizer::new();
    let mut resolver = Resolver::new(rec, &mut sym);
    let mut out = HashMap::new();
    for (key, value) in rec.stacks() {
        if *key.comm != *comm || key.tid != key.pid {
            continue;
        }
        let names: Vec<String> = key
            .frames
            .iter()
            .map(|f| comparable(&resolver.resolve(f).name))
            .collect();
        if let Some(hot) = names.iter().position(|n| n.contains("hot_loop")) {
            let stack: Vec<String> = names[hot..].iter().rev().cloned().collect();
            *out.entry(stack).or_insert(0) += value.count;
        }
    }
    out
}

fn most_common(stacks: &HashMap<Vec<String>, u64>) -> Option<&Vec<String>> {
    stacks.iter().max_by_key(|(_, n)| **n).map(|(s, _)| s)
}

#[test]
fn dwarf_stacks_match_perf_on_the_same_programs() {
    let perf_runs = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !perf_runs {
        eprintln!("SKIPPED: perf is not installed (apt-get install linux-perf)");
        return;
    }
    let programs = build("roots_perf");
    let rec = record(&programs, CallGraph::Dwarf);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("roots_perf");
    let mut failures = Vec::new();
    for p in &programs {
        let data = dir.join(format!("{}.perf.data", p.name));
        let recorded = Command::new("perf")
            .args(["record", "-q", "-F", "499", "--call-graph", "dwarf", "-o"])
            .arg(&data)
            .arg(&p.path)
            .arg("600")
            .output()
            .expect("perf record");
        assert!(
            recorded.status.success(),
            "perf record {}: {recorded:?}",
            p.name
        );
        let script = Command::new("perf")
            .args(["script", "--no-inline", "-F", "comm,pid,tid,ip,sym", "-i"])
            .arg(&data)
            .output()
            .expect("perf script");
        let theirs = perf_stacks(&String::from_utf8_lossy(&script.stdout));
        let ours = our_stacks(&rec, &p.name);
        let (theirs, ours) = (most_common(&theirs), most_common(&ours));
        eprintln!("{}:\n  perf:  {theirs:?}\n  ember: {ours:?}", p.name);
        if theirs.is_none() || theirs != ours {
            failures.push(format!("{}: perf {theirs:?}, ember {ours:?}", p.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
