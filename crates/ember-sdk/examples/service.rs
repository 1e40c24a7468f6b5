//! A small service with profiles: the lines marked `ember-sdk` are all a service adds.
//!
//! ```text
//! RUSTFLAGS="-C force-frame-pointers=yes" cargo run -p ember-sdk --example service -- \
//!     127.0.0.1:6060 [http://127.0.0.1:4040]
//! curl -o cpu.pb.gz 'http://127.0.0.1:6060/profile/cpu?seconds=10'
//! curl -o heap.svg 'http://127.0.0.1:6060/profile/heap?format=svg'
//! ```
//!
//! With a second argument it also pushes continuous profiles to that Ember (or Pyroscope)
//! server as `service_name="example-service"`. An `ember agent` scrapes it with the
//! `ember_cpu` and `ember_heap` presets (README, "Rust SDK").

use std::time::Duration;

use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

// ember-sdk: heap profiles, one sample per 2 MiB allocated on average.
#[global_allocator]
static ALLOC: ember_sdk::SamplingAllocator = ember_sdk::SamplingAllocator::system();

#[inline(never)]
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The service's own work: a request handler that allocates and computes.
async fn handle_request(id: u64) -> u64 {
    let data: Vec<u8> = (0..256 * 1024).map(|i| (i as u64 ^ id) as u8).collect();
    let sum = checksum(&data);
    tokio::task::yield_now().await;
    sum ^ checksum(&data[..1024])
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:6060".into());
    let push_url = args.next();

    // ember-sdk: span_id, trace_id and span name on the samples of traced work.
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(ember_sdk::ProfilingLayer::new()),
    )
    .expect("no other subscriber");

    // ember-sdk: continuous profiles (19 Hz, 59 s of CPU and a heap profile every 60 s).
    let _push = push_url.map(|url| {
        ember_sdk::PushMode::start(ember_sdk::PushOptions::new("example-service", url))
            .expect("a valid push URL")
    });

    // A background load so that profiles show something.
    tokio::spawn(async {
        let mut id = 0u64;
        loop {
            id += 1;
            let span = tracing::info_span!("handle_request");
            // ember-sdk: a label of the service's own, merged with the span's.
            let labels = ember_sdk::Labels::new([("endpoint", "/work")]);
            use ember_sdk::LabelsExt;
            std::hint::black_box(
                handle_request(id)
                    .instrument(span)
                    .with_labels(labels)
                    .await,
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });

    // ember-sdk: GET /profile/cpu and /profile/heap, merged into the service's router.
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "example service\n" }))
        .merge(ember_sdk::router(ember_sdk::Profiling::new()));
    let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind");
    println!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.expect("serve");
}
