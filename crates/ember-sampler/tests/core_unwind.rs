//! `--call-graph auto` decides per binary, and unwind tables are shared by
//! every process mapping the same binary: two builds of the same C program
//! (with and without frame pointers) run side by side in one recording.
//!
//! Needs perf_event_open (root in CI) and gcc.

#[path = "programs/mod.rs"]
mod programs;

use ember_sampler::{CallGraph, Options, Session, Status, Target};
use ember_samples::Method;
use ember_samples::Resolver;
use ember_samples::{Recording, Symbolizer};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn compile(test: &str, suffix: &str, flags: &[&str]) -> PathBuf {
    let output = format!("three_paths-{suffix}");
    programs::compile(test, "three_paths", &output, flags)
}

fn record_all(opts: &Options) -> (Recording, (usize, u64)) {
    let mut session = Session::start(opts).expect("session");
    while session.poll(Duration::from_millis(50)) == Status::Running {}
    let stats = session.unwind_cache_stats();
    (session.finish(), stats)
}

/// Samples of processes whose comm starts with `comm`, and how many of them
/// have a stack reaching `main` through one of the three paths.
fn complete(rec: &Recording, comm: &str) -> (u64, u64) {
    let mut sym = Symbolizer::new();
    let mut resolver = Resolver::new(rec, &mut sym);
    let (mut all, mut good) = (0, 0);
    for (key, value) in rec.stacks() {
        if !key.comm.starts_with(comm) {
            continue;
        }
        all += value.count;
        let names: Vec<_> = key
            .frames
            .iter()
            .map(|f| resolver.resolve(f).name)
            .collect();
        if names.iter().any(|n| n.starts_with("path_")) && names.iter().any(|n| &**n == "main") {
            good += value.count;
        }
    }
    (all, good)
}

#[test]
fn auto_keeps_frame_pointers_for_one_build_and_cfi_for_the_other() {
    let fp = compile(
        "auto_per_binary",
        "fp",
        &["-fno-omit-frame-pointer", "-fno-shrink-wrap"],
    );
    let nofp = compile("auto_per_binary", "nofp", &["-fomit-frame-pointer"]);
    let script = format!("{} 80 & {} 80; wait", fp.display(), nofp.display());
    let mut opts = Options::new(Target::Command(vec![
        "/bin/sh".into(),
        "-c".into(),
        script.into(),
    ]));
    opts.frequency = 499;
    opts.call_graph = CallGraph::Auto;
    let (rec, _) = record_all(&opts);
    let method = |bin: &Path| {
        rec.auto_choices
            .iter()
            .find(|c| *c.path == *bin.to_str().unwrap())
            .map(|c| (c.method, c.reason.clone()))
    };
    let (fp_method, nofp_method) = (method(&fp), method(&nofp));
    eprintln!(
        "auto: {fp_method:?} for -fno-omit-frame-pointer, {nofp_method:?} for -fomit-frame-pointer"
    );
    for c in &rec.auto_choices {
        eprintln!("  {} {} {:?}: {}", c.path, c.build_id, c.method, c.reason);
    }
    assert_eq!(fp_method.unwrap().0, Method::FramePointer);
    assert_eq!(nofp_method.unwrap().0, Method::Cfi);
    // Either way the stacks are complete.
    for comm in ["three_paths-fp", "three_paths-no"] {
        let (all, good) = complete(&rec, comm);
        eprintln!("{comm}: {good}/{all} samples reach main");
        assert!(all >= 50, "{comm}: {all} samples");
        assert!(good as f64 >= 0.95 * all as f64, "{comm}: {good}/{all}");
    }
}

#[test]
fn unwind_tables_are_loaded_once_per_binary_across_processes() {
    let nofp = compile("unwind_shared", "nofp", &["-fomit-frame-pointer"]);
    let copy = nofp.with_file_name("three_paths-nofp-copy");
    std::fs::copy(&nofp, &copy).unwrap();
    // Four processes: three of the binary, one of an identical copy.
    let script = format!(
        "{0} 30 & {0} 30 & {0} 30 & {1} 30; wait",
        nofp.display(),
        copy.display()
    );
    let mut opts = Options::new(Target::Command(vec![
        "/bin/sh".into(),
        "-c".into(),
        script.into(),
    ]));
    opts.frequency = 499;
    opts.call_graph = CallGraph::Dwarf;
    let (rec, (cached, loads)) = record_all(&opts);
    let pids: std::collections::HashSet<u32> = rec
        .stacks()
        .keys()
        .filter(|k| k.comm.starts_with("three_paths"))
        .map(|k| k.pid)
        .collect();
    eprintln!(
        "{} sampled three_paths processes; {cached} binaries cached after {loads} loads",
        pids.len()
    );
    assert!(pids.len() >= 3, "{pids:?}");
    // Every file is read once (the copy is a second file with the same
    // build-id: one extra load, no extra entry); sh, libc, ld.so and the
    // program are the binaries.
    assert!(
        loads <= cached as u64 + 1,
        "{loads} loads for {cached} binaries"
    );
    assert!(cached <= 6, "{cached}");
    let (all, good) = complete(&rec, "three_paths");
    assert!(good as f64 >= 0.95 * all as f64, "{good}/{all}");
}
