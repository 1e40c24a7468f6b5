//! Push mode's heap profiles: `alloc_space` goes out as the difference since the previous
//! push, so the server's sum over time equals what was allocated (cumulative profiles would
//! count early allocations once per push). Needs frame pointers to find the allocation site
//! among the in-process server's own allocations; without them it only checks that heap
//! profiles arrive.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[global_allocator]
static ALLOC: ember_sdk::SamplingAllocator =
    ember_sdk::SamplingAllocator::with_rate(std::alloc::System, 256 << 10);

#[inline(never)]
fn push_churn_site(bytes: usize) -> u64 {
    let mut acc = 0u64;
    for i in 0..bytes / (64 << 10) {
        let v = std::hint::black_box(vec![i as u8; 64 << 10]);
        acc += u64::from(v[1]);
    }
    acc
}

#[test]
fn pushed_alloc_space_adds_up_to_what_was_allocated() {
    let dir = temp_dir("heap-push");
    let dir = dir.path();
    let server = start_server(&dir.join("data"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let churned = rt.block_on(async {
        let mut options = ember_sdk::PushOptions::new("sdk-heap-push", format!("http://{server}"));
        options.interval = Duration::from_secs(1);
        options.cpu_duration = Duration::from_millis(200);
        let push = ember_sdk::PushMode::start(options).unwrap();
        let mut churned = 0usize;
        let until = Instant::now() + Duration::from_millis(3500);
        while Instant::now() < until {
            std::hint::black_box(push_churn_site(16 << 20));
            churned += 16 << 20;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Two more pushes after the last allocation, so all of it has been sent.
        let sent = push.stats().sent_profiles;
        let deadline = Instant::now() + Duration::from_secs(20);
        while push.stats().sent_profiles < sent + 4 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(push.flush(Duration::from_secs(10)).await);
        churned
    });
    let folded = query_folded(
        &server,
        "memory:alloc_space:bytes:space:bytes{service_name=\"sdk-heap-push\"}",
    );
    assert!(!folded.is_empty(), "heap profiles arrived");
    if !ember_sdk::FRAME_POINTERS {
        eprintln!(
            "without frame pointers the allocation site cannot be told apart: totals not checked"
        );
        return;
    }
    let site: f64 = folded
        .lines()
        .filter(|l| l.contains("push_churn_site"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let want = churned as f64;
    eprintln!(
        "alloc_space of the site summed over the pushes: {:.1} MiB, allocated {:.1} MiB",
        site / 1048576.0,
        want / 1048576.0
    );
    assert!(
        (site - want).abs() <= want * 0.15,
        "pushed alloc_space {site} vs allocated {want}"
    );
}
