//! Push mode into a real Ember server (in this process, on 127.0.0.1:0), queried back; an
//! ad hoc forced profile at the same time; and a server that is down never slowing the
//! service.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;

#[test]
fn pushes_into_a_real_server_alongside_a_forced_ad_hoc_profile() {
    let dir = temp_dir("push");
    let dir = dir.path();
    let addr = start_server(dir);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let burn = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("push-burner".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    burn_hot(100_000);
                }
            })
            .unwrap()
    };
    rt.block_on(async {
        let mut options = ember_sdk::PushOptions::new("sdk-push-test", format!("http://{addr}"));
        options.interval = Duration::from_secs(2);
        options.cpu_duration = Duration::from_millis(1800);
        options.frequency = 99;
        options.labels = vec![("env".into(), "test".into())];
        let push = ember_sdk::PushMode::start(options).unwrap();
        // An ad hoc forced profile while push mode records: both get samples.
        let state = ember_sdk::Profiling::new();
        let adhoc = ember_sdk::respond(&state, "/profile/cpu", "seconds=2&force=true").await;
        assert_eq!(adhoc.status, 200);
        let p = ember_pprof::decode(&adhoc.body).unwrap();
        assert!(p.sample.iter().any(|s| stack_has(&p, s, "burn_hot")));
        let deadline = Instant::now() + Duration::from_secs(30);
        while push.stats().sent_profiles < 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stats = push.stats();
        assert!(stats.sent_profiles >= 2, "{stats:?}");
        assert_eq!(stats.rejected_profiles, 0, "{stats:?}");
    });
    stop.store(true, Ordering::Relaxed);
    burn.join().unwrap();
    let query = url_encode(
        r#"process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="sdk-push-test",env="test"}"#,
    );
    let (status, body) = http_get(
        &addr,
        &format!("/api/v1/query?query={query}&format=folded&from=now-1h&until=now"),
    );
    let folded = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{folded}");
    assert!(
        folded.contains("burn_hot"),
        "pushed profile queried back:\n{folded}"
    );
}

#[test]
fn a_server_that_is_down_never_slows_the_service() {
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut options = ember_sdk::PushOptions::new("sdk-down-test", url);
        options.interval = Duration::from_millis(500);
        options.cpu_duration = Duration::from_millis(400);
        let push = ember_sdk::PushMode::start(options).unwrap();
        // The service's own timer keeps its pace while profiles fail to upload.
        let mut worst = Duration::ZERO;
        let until = Instant::now() + Duration::from_secs(4);
        while Instant::now() < until {
            let t = Instant::now();
            tokio::time::sleep(Duration::from_millis(10)).await;
            worst = worst.max(t.elapsed());
            std::hint::black_box(burn_hot(10_000));
        }
        let stats = push.stats();
        eprintln!("worst 10 ms sleep took {worst:?}; {stats:?}");
        assert!(stats.enqueued_profiles >= 3, "{stats:?}");
        assert!(stats.upload_errors >= 1, "{stats:?}");
        assert_eq!(stats.sent_profiles, 0);
        assert!(worst < Duration::from_millis(500), "worst {worst:?}");
    });
}
