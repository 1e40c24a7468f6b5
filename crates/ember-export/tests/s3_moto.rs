//! Fault test against a real S3-compatible server (`moto_server` from PyPI
//! `moto[server]`, started here on a free loopback port): dumps land in the
//! bucket under PREFIX/BUCKET_SUBDIRECTORY/NODE_NAME/; with the server down
//! they pile up locally to `max_dumps_retained` (the oldest dropped and
//! counted); once it is back they are uploaded, oldest first.
//!
//! One test per binary: it sets the AWS_* variables of the process.

mod common;

use common::*;
use ember_export::{PerfCollector, PerfCollectorConfig, Sample};
use object_store::ObjectStoreExt;
use object_store::aws::AmazonS3Builder;
use object_store::{ClientOptions, ObjectStore};
use std::time::Duration;

const BUCKET: &str = "ember-dumps";

async fn list(port: u16) -> Vec<String> {
    let store = AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_endpoint(format!("http://127.0.0.1:{port}"))
        .with_region("us-east-1")
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap();
    let mut keys = Vec::new();
    let mut it = store.list(None);
    use futures_util::StreamExt;
    while let Some(meta) = it.next().await {
        keys.push(meta.unwrap().location.to_string());
    }
    keys.sort();
    keys
}

async fn get(port: u16, key: &str) -> Vec<u8> {
    let store = AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_endpoint(format!("http://127.0.0.1:{port}"))
        .with_region("us-east-1")
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap();
    store
        .get(&object_store::path::Path::from(key))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec()
}

fn push_all(pc: &PerfCollector, samples: &[Sample]) {
    for s in samples {
        pc.push(s.clone());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_upload_outage_and_recovery_against_moto() {
    if !python_has("import moto.server, flask", "\"moto[server]\"") {
        return;
    }
    let port = free_port();
    // SAFETY: this binary runs this single test; no other thread reads the
    // environment while it is set.
    unsafe {
        std::env::set_var("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"));
        std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
        std::env::set_var("AWS_REGION", "us-east-1");
    }
    let mut moto = Moto::start(port);
    moto.create_bucket(BUCKET);

    let spool = scratch("s3-spool");
    let pc = PerfCollector::new(PerfCollectorConfig {
        export_to: format!("s3://{BUCKET}/cluster-a"),
        bucket_subdirectory: "perf".into(),
        node_name: Some("node-1".into()),
        local_dir: Some(spool.clone()),
        max_dumps_retained: 2,
        ..Default::default()
    })
    .unwrap();
    let samples = iperf_samples();
    let chunks: Vec<&[Sample]> = samples.chunks(samples.len().div_ceil(4)).collect();
    assert_eq!(chunks.len(), 4);

    // 1. Bucket up: the dump is uploaded and deleted locally.
    push_all(&pc, chunks[0]);
    let r = pc.dump().await.unwrap();
    assert_eq!(r.upload_error, None);
    let first = r.written.clone().unwrap();
    let keys = list(port).await;
    assert_eq!(keys, vec![format!("cluster-a/perf/node-1/{first}")]);
    assert!(
        first.ends_with("-perf-data.gz") && first.len() == "YYYYMMDDTHHMMSS-perf-data.gz".len()
    );
    assert_eq!(
        folded_dump(&get(port, &keys[0]).await),
        fold(chunks[0], true)
    );
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0);

    // 2. Bucket unreachable: dumps stay local, at most max_dumps_retained.
    moto.stop();
    let mut kept = Vec::new();
    for (i, chunk) in chunks[1..].iter().enumerate() {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        push_all(&pc, chunk);
        let r = pc.dump().await.unwrap();
        assert!(
            r.upload_error.is_some(),
            "upload should fail while moto is down"
        );
        assert!(r.uploaded.is_empty());
        kept.push(r.written.unwrap());
        let local = std::fs::read_dir(&spool).unwrap().count();
        assert_eq!(
            local,
            (i + 1).min(2),
            "local dumps after outage dump {}",
            i + 1
        );
    }
    let stats = pc.stats();
    assert_eq!(stats.dumps_dropped, 1, "{stats:?}");
    assert_eq!(stats.pending, 2);
    assert!(stats.upload_errors >= 3);

    // 3. Bucket back (moto keeps no state across restarts: recreate it):
    //    the two retained dumps are uploaded, oldest first, and deleted.
    let mut moto = Moto::start(port);
    moto.create_bucket(BUCKET);
    let r = pc.dump().await.unwrap();
    assert_eq!(r.upload_error, None);
    assert_eq!(r.written, None);
    let want: Vec<String> = kept[1..]
        .iter()
        .map(|n| format!("cluster-a/perf/node-1/{n}"))
        .collect();
    assert_eq!(r.uploaded, want);
    assert_eq!(list(port).await, want);
    for (key, chunk) in want.iter().zip(&chunks[2..]) {
        assert_eq!(folded_dump(&get(port, key).await), fold(chunk, true));
    }
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0);
    assert_eq!(pc.stats().pending, 0);
    moto.stop();
}
