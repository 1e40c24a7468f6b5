//! The handlers over real loopback HTTP: axum's router and the plain hyper service, status
//! codes and messages, one CPU profile at a time (409), `force`, formats.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;

/// Serves `ember_sdk::router` on 127.0.0.1:0 from a runtime on its own thread.
fn serve_axum() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().to_string()).unwrap();
            let app = axum::Router::new().merge(ember_sdk::router(ember_sdk::Profiling::new()));
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// Serves `ember_sdk::ProfileService` with hyper's own HTTP/1 connection driver.
fn serve_hyper() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().to_string()).unwrap();
            let service = ember_sdk::ProfileService::new(ember_sdk::Profiling::new());
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let service = service.clone();
                tokio::spawn(async move {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
    });
    rx.recv().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Burns CPU on a named thread until the flag is cleared.
fn burner(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("http-burner".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                burn_hot(100_000);
            }
        })
        .unwrap()
}

#[test]
fn axum_router_parameters_status_codes_and_force() {
    let addr = serve_axum();
    for (query, reason) in [
        ("seconds=0", "seconds must be"),
        ("seconds=301", "seconds must be"),
        ("seconds=abc", "seconds must be"),
        ("frequency=0", "frequency must be"),
        ("frequency=5000", "frequency must be"),
        ("format=png", "format must be pprof or svg"),
        ("force=maybe", "force must be true or false"),
        ("secs=1", "unknown parameter \"secs\""),
        ("seconds=%zz", "bad percent-encoding"),
    ] {
        let (status, body) = http_get(&addr, &format!("/profile/cpu?{query}"));
        assert_eq!(status, 400, "{query}: {}", text(&body));
        assert!(text(&body).contains(reason), "{query}: {}", text(&body));
    }
    let (status, body) = http_get(&addr, "/profile/heap");
    assert_eq!(status, 404);
    assert!(text(&body).contains("SamplingAllocator"), "{}", text(&body));
    let (status, _) = http_get(&addr, "/profile/heap?format=png");
    assert_eq!(status, 400);

    let stop = Arc::new(AtomicBool::new(false));
    let burn = burner(stop.clone());
    let (status, body) = http_get(&addr, "/profile/cpu?seconds=1&frequency=199");
    assert_eq!(status, 200, "{}", text(&body));
    let p = ember_pprof::decode(&body).expect("gzip'd pprof");
    assert!(!p.sample.is_empty());
    let (status, body) = http_get(&addr, "/profile/cpu?seconds=1&format=svg");
    assert_eq!(status, 200);
    assert!(text(&body).contains("<svg"), "{}", text(&body));

    // One at a time: a second request gets 409; a forced one cancels the first.
    let first = {
        let addr = addr.clone();
        std::thread::spawn(move || http_get(&addr, "/profile/cpu?seconds=6"))
    };
    std::thread::sleep(Duration::from_millis(700));
    let (status, body) = http_get(&addr, "/profile/cpu?seconds=1");
    assert_eq!(status, 409, "{}", text(&body));
    assert!(text(&body).contains("force=true"), "{}", text(&body));
    let (status, body) = http_get(&addr, "/profile/cpu?seconds=1&force=true");
    assert_eq!(status, 200, "{}", text(&body));
    ember_pprof::decode(&body).unwrap();
    let (status, body) = first.join().unwrap();
    assert_eq!(status, 409, "{}", text(&body));
    assert!(text(&body).contains("cancelled"), "{}", text(&body));
    // And the slot is free again.
    let (status, _) = http_get(&addr, "/profile/cpu?seconds=1");
    assert_eq!(status, 200);
    stop.store(true, Ordering::Relaxed);
    burn.join().unwrap();
}

#[test]
fn plain_hyper_service_answers_the_same() {
    let addr = serve_hyper();
    let stop = Arc::new(AtomicBool::new(false));
    let burn = burner(stop.clone());
    let (status, body) = http_get(&addr, "/profile/cpu?seconds=1");
    assert_eq!(status, 200, "{}", text(&body));
    ember_pprof::decode(&body).unwrap();
    let (status, body) = http_get(&addr, "/profile/cpu?frequency=x");
    assert_eq!(status, 400);
    assert!(text(&body).contains("frequency"));
    let (status, _) = http_get(&addr, "/elsewhere");
    assert_eq!(status, 404);
    let (status, body) = http_get(&addr, "/profile/heap");
    assert_eq!(status, 404);
    assert!(text(&body).contains("global_allocator"));
    stop.store(true, Ordering::Relaxed);
    burn.join().unwrap();
}
