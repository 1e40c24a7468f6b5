//! Labels under a multi-threaded tokio runtime: tasks instrumented with `tracing` spans and
//! wrapped with service labels burn CPU, yield and sleep (so workers steal them from each
//! other); every sample of a task's own function must carry that task's labels, merged.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ember_sdk::{Labels, LabelsExt, ProfilingLayer};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

#[inline(never)]
fn spin_task_a() -> u64 {
    // Not a tail call: the frame stays on the stack while burn_hot runs.
    std::hint::black_box(common::burn_hot(300_000)) ^ 2
}

#[inline(never)]
fn spin_task_b() -> u64 {
    std::hint::black_box(common::burn_cold(300_000)) ^ 3
}

#[inline(never)]
fn spin_child_a() -> u64 {
    std::hint::black_box(common::burn_hot(150_000)) ^ 1
}

#[test]
fn labels_follow_tasks_across_worker_threads() {
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(ProfilingLayer::new()),
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .build()
        .unwrap();
    let rec = ember_sdk::CpuRecording::start(199).unwrap();
    let seen: Arc<Mutex<HashMap<&'static str, HashSet<std::thread::ThreadId>>>> = Arc::default();
    rt.block_on(async {
        let mut handles = Vec::new();
        for (task, tenant) in [("task_a", "a"), ("task_b", "b")] {
            let seen = seen.clone();
            let work = async move {
                let until = Instant::now() + Duration::from_millis(2500);
                let mut i = 0u64;
                while Instant::now() < until {
                    if task == "task_a" {
                        spin_task_a();
                        if i.is_multiple_of(2) {
                            let child = tracing::info_span!("child_a");
                            let _entered = child.enter();
                            spin_child_a();
                        }
                    } else {
                        spin_task_b();
                    }
                    seen.lock()
                        .unwrap()
                        .entry(task)
                        .or_default()
                        .insert(std::thread::current().id());
                    if i.is_multiple_of(3) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                    i += 1;
                }
            };
            let span = if task == "task_a" {
                tracing::info_span!("task_a")
            } else {
                tracing::info_span!("task_b")
            };
            let labels = Labels::new([("tenant", tenant), ("service_part", "worker")]);
            handles.push(tokio::spawn(work.instrument(span).with_labels(labels)));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    let p = rec.finish();
    let threads = seen.lock().unwrap().clone();
    eprintln!(
        "task_a ran on {} threads, task_b on {}",
        threads["task_a"].len(),
        threads["task_b"].len()
    );
    assert!(
        threads.values().any(|t| t.len() > 1),
        "the runtime moved a task between worker threads"
    );
    let mut checked = HashMap::<&str, usize>::new();
    let mut span_ids = HashMap::<&str, HashSet<String>>::new();
    let mut trace_ids = HashMap::<&str, HashSet<String>>::new();
    for s in &p.sample {
        let Some(&leaf) = s.location_id.first() else {
            continue;
        };
        let leaf = common::function_of(&p, leaf);
        // The burn loops are the leaves; their caller says whose work it is (with frame
        // pointers), else the leaf alone does (task_b burns cold, task_a hot).
        let who = if common::stack_has(&p, s, "spin_child_a") {
            "child_a"
        } else if common::stack_has(&p, s, "spin_task_a") {
            "task_a"
        } else if common::stack_has(&p, s, "spin_task_b")
            || (!ember_sdk::FRAME_POINTERS && leaf.ends_with("burn_cold"))
        {
            "task_b"
        } else {
            continue;
        };
        let l = common::labels_of(&p, s);
        let (name, tenant) = match who {
            "child_a" => ("child_a", "a"),
            "task_a" => ("task_a", "a"),
            _ => ("task_b", "b"),
        };
        assert_eq!(l.get("span_name").map(String::as_str), Some(name), "{l:?}");
        assert_eq!(l.get("tenant").map(String::as_str), Some(tenant), "{l:?}");
        assert_eq!(l.get("service_part").map(String::as_str), Some("worker"));
        assert_eq!(l["span_id"].len(), 16);
        span_ids
            .entry(who)
            .or_default()
            .insert(l["span_id"].clone());
        trace_ids
            .entry(who)
            .or_default()
            .insert(l["trace_id"].clone());
        *checked.entry(who).or_default() += s.value[0] as usize;
    }
    eprintln!("checked samples: {checked:?}");
    assert!(
        checked.get("task_b").copied().unwrap_or(0) >= 10,
        "{checked:?}"
    );
    if ember_sdk::FRAME_POINTERS {
        assert!(
            checked.get("task_a").copied().unwrap_or(0) >= 10,
            "{checked:?}"
        );
        assert!(
            checked.get("child_a").copied().unwrap_or(0) >= 3,
            "{checked:?}"
        );
        // One span for the whole task wherever it ran; the child inherits its trace id.
        assert_eq!(span_ids["task_a"].len(), 1);
        assert_eq!(trace_ids["task_a"], span_ids["task_a"]);
        assert_eq!(trace_ids["child_a"], span_ids["task_a"]);
        assert_ne!(span_ids["child_a"], span_ids["task_a"]);
    }
    assert_eq!(span_ids["task_b"].len(), 1);
}
