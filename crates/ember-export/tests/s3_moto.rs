//! Fault test against a real S3-compatible server (`moto_server` from PyPI
//! `moto[server]`, started here on a free loopback port): dumps land in the
//! bucket under PREFIX/BUCKET_SUBDIRECTORY/NODE_NAME/; with the server down
//! they pile up locally to `max_dumps_retained` (the oldest dropped and
//! counted); once it is back they are uploaded, oldest first.
//!
//! One test per binary: it sets the AWS_* variables of the process.

mod common;

use common::*;
use ember_export::Sample;
use object_store::aws::AmazonS3Builder;
use object_store::{ClientOptions, ObjectStore};

const BUCKET: &str = "ember-dumps";

/// A client of the moto bucket, for reading back what the collector uploaded.
fn reader(port: u16) -> impl ObjectStore {
    AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_endpoint(format!("http://127.0.0.1:{port}"))
        .with_region("us-east-1")
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap()
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

    let spool = spool.path();
    let pc = outage_collector(&format!("s3://{BUCKET}/cluster-a"), spool);
    let bucket = reader(port);
    let samples = iperf_samples();
    let chunks: Vec<&[Sample]> = samples.chunks(samples.len().div_ceil(4)).collect();
    assert_eq!(chunks.len(), 4);

    // 1. Bucket up: the dump is uploaded and deleted locally.
    dump_while_up(&pc, chunks[0], spool, &bucket).await;

    // 2. Bucket unreachable: dumps stay local, at most max_dumps_retained.
    moto.stop();
    let written = dumps_while_down(&pc, &chunks[1..], spool).await;

    // 3. Bucket back (moto keeps no state across restarts: recreate it):
    //    the two retained dumps are uploaded, oldest first, and deleted.
    let mut moto = Moto::start(port);
    moto.create_bucket(BUCKET);
    dump_after_outage(&pc, &written, &chunks[1..], spool, &bucket).await;
    moto.stop();
}
