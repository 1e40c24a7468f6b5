//! The CPU profiler on real code: threads burn CPU in known functions while a profile is
//! recorded; the profile must decode, name the hot function as the one with most samples,
//! carry thread names, and (with frame pointers) full stacks; `go tool pprof` must read it.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn hot_function_dominates_and_thread_names_are_labels() {
    let rec = ember_sdk::CpuRecording::start(99).unwrap();
    let until = Instant::now() + Duration::from_millis(2500);
    let threads: Vec<_> = (0..2)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("burner-{i}"))
                .spawn(move || {
                    let t0 = thread_cpu();
                    burn_outer(until);
                    thread_cpu() - t0
                })
                .unwrap()
        })
        .collect();
    let burned: Duration = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let profile = rec.finish();
    let bytes = ember_pprof::encode_gzip(&profile);
    let p = ember_pprof::decode(&bytes).expect("our pprof decodes and validates");
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    let cpu_ns: i64 = p.sample.iter().map(|s| s.value[1]).sum();
    assert_eq!(cpu_ns, total * 10_101_000, "each sample stands for 1/99 s");
    // The profile's CPU time matches what the burners used (the machine may be busy, so
    // compare with their measured CPU time, not with wall time).
    let ratio = cpu_ns as f64 / burned.as_nanos() as f64;
    eprintln!("{total} samples, profile {cpu_ns} ns vs burned {burned:?}: ratio {ratio:.2}");
    assert!(total >= 50, "got {total} samples for {burned:?} of CPU");
    assert!(
        (0.7..1.3).contains(&ratio),
        "profile/burned CPU ratio {ratio:.2}"
    );
    let by_fn = self_by_function(&p, 0);
    assert!(
        by_fn[0].0.ends_with("burn_hot"),
        "hottest leaf should be burn_hot: {by_fn:?}"
    );
    let hot = by_fn[0].1;
    let cold = by_fn
        .iter()
        .find(|(n, _)| n.ends_with("burn_cold"))
        .map_or(0, |x| x.1);
    assert!(hot > 4 * cold, "burn_hot {hot} vs burn_cold {cold}");
    let burner_samples: i64 = p
        .sample
        .iter()
        .filter(|s| {
            labels_of(&p, s)
                .get("thread_name")
                .is_some_and(|n| n.starts_with("burner-"))
        })
        .map(|s| s.value[0])
        .sum();
    assert!(
        burner_samples * 10 >= total * 9,
        "thread_name labels: {burner_samples} of {total} samples on burner threads"
    );
    if ember_sdk::FRAME_POINTERS {
        let full: i64 = p
            .sample
            .iter()
            .filter(|s| stack_has(&p, s, "burn_hot") && stack_has(&p, s, "burn_outer"))
            .map(|s| s.value[0])
            .sum();
        assert!(
            full * 10 >= hot * 9,
            "with frame pointers, burn_hot's samples have burn_outer above: {full} of {hot}"
        );
        let deep = p
            .sample
            .iter()
            .filter(|s| stack_has(&p, s, "burn_outer"))
            .all(|s| s.location_id.len() >= 3);
        assert!(
            deep,
            "stacks continue past burn_outer into std's thread start"
        );
    }
    let dir = temp_dir("cpu");
    let dir = dir.path();
    let file = dir.join("cpu.pb.gz");
    std::fs::write(&file, &bytes).unwrap();
    if let Some(top) = go_pprof_top(&file) {
        let first = top
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"))
            .nth(1)
            .unwrap_or_default();
        assert!(first.contains("burn_hot"), "go tool pprof -top:\n{top}");
    }
}

#[test]
fn frequency_out_of_range_is_refused() {
    assert!(ember_sdk::CpuRecording::start(0).is_err());
    assert!(ember_sdk::CpuRecording::start(100_000).is_err());
}
