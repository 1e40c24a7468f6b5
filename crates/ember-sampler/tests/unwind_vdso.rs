//! Samples inside the kernel's vDSO (`clock_gettime`) unwind through it to `_start`, and
//! its frames are named: the vDSO has no file, so its unwind tables and symbols come from
//! the sampler's own copy of the image (every process of the host maps the same one).
//! Before, the vDSO had no unwind module: framehop fell back to the frame pointer there,
//! which libc's caller does not keep, and the stack ended at the vDSO.
//!
//! Needs perf_event_open (root in CI) and gcc.

#[path = "programs/mod.rs"]
mod programs;

use ember_sampler::{CallGraph, Options, Target};
use ember_samples::{Resolver, Symbolizer};

#[test]
fn samples_in_the_vdso_reach_start_and_are_named() {
    let bin = programs::compile("vdso", "vdso_loop", "vdso_loop", &["-g"]);
    for call_graph in [CallGraph::Dwarf, CallGraph::Auto] {
        let mut opts = Options::new(Target::Command(vec![bin.clone().into(), "700".into()]));
        opts.call_graph = call_graph;
        opts.frequency = 499;
        let rec = ember_sampler::record(&opts, |_| {}).expect("recording (run as root)");
        let mut sym = Symbolizer::new();
        let mut resolver = Resolver::new(&rec, &mut sym);
        let (mut in_vdso, mut complete, mut example) = (0, 0, None);
        for (key, value) in rec.stacks() {
            let frames: Vec<_> = key.frames.iter().map(|f| resolver.resolve(f)).collect();
            if !frames.iter().any(|f| &*f.module == "[vdso]") {
                continue;
            }
            in_vdso += value.count;
            let names: Vec<&str> = frames.iter().rev().map(|f| &*f.name).collect();
            let named = frames
                .iter()
                .filter(|f| &*f.module == "[vdso]")
                .all(|f| f.known && f.name.contains("clock_gettime"));
            let tick = names.iter().position(|n| *n == "tick");
            if named && names.first() == Some(&"_start") && tick.is_some() {
                complete += value.count;
            } else {
                example.get_or_insert_with(|| names.join(";"));
            }
        }
        for choice in &rec.auto_choices {
            eprintln!(
                "  auto: {} {:?} ({})",
                choice.path, choice.method, choice.reason
            );
        }
        eprintln!(
            "{call_graph:?}: {complete}/{in_vdso} samples in the vDSO are complete and named"
        );
        if in_vdso < 10 {
            eprintln!("SKIPPED: clock_gettime does not stay in the vDSO here (clock source?)");
            return;
        }
        assert!(
            complete as f64 >= 0.9 * in_vdso as f64,
            "{call_graph:?}: {complete}/{in_vdso}; e.g. {example:?}"
        );
    }
}
