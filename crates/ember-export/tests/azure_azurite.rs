//! az:// against a real Azure Blob Storage emulator: Azurite's blob service
//! (npm `azurite`, installed in tests/azurite by `npm ci`), started here on a
//! free loopback port with its own account and key. Checks that the exporter
//! signs its requests with the key from the environment (a wrong key is
//! refused), that dumps land in the container under
//! PREFIX/BUCKET_SUBDIRECTORY/NODE_NAME/ and fold back to the samples, and
//! that with Azurite down they pile up locally to `max_dumps_retained`, then
//! are uploaded oldest first once it is back; and that a plain http
//! endpoint (AZURE_STORAGE_ENDPOINT, AZURE_ALLOW_HTTP) works too.
//!
//! One test per binary: it sets the AZURE_* variables of the process.

mod common;

use common::*;
use ember_export::{Sample, Uploader};
use object_store::azure::{
    AzureAccessKey, AzureAuthorizer, AzureCredential, MicrosoftAzureBuilder,
};
use object_store::client::{HttpConnector, HttpRequest, ReqwestConnector};
use object_store::{ClientOptions, ObjectStore};
use std::path::PathBuf;
use std::process::Command;

const CONTAINER: &str = "ember-dumps";
// Azurite serves the accounts of AZURITE_ACCOUNTS ("name:base64key"), so the
// test uses its own instead of the emulator's well-known default.
const ACCOUNT: &str = "embertest";
// Base64, as Azure account keys are.
const KEY: &str = "ZW1iZXIgYXp1cml0ZSB0ZXN0IGFjY291bnQga2V5LCAzMiBieXRlcys=";
const WRONG_KEY: &str = "bm90IHRoZSBrZXkgb2YgdGhlIGVtYmVydGVzdCBhY2NvdW50IQ==";

/// The azurite-blob launcher that `npm ci` puts in tests/azurite.
fn azurite_blob() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/azurite/node_modules/.bin/azurite-blob")
}

fn azurite_present() -> bool {
    let node = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    require(
        node && azurite_blob().is_file(),
        "Azurite (node and tests/azurite/node_modules/.bin/azurite-blob)",
        "apt-get install nodejs npm; cd tests/azurite && npm ci",
    )
}

/// Starts Azurite's blob service on `port`, its data in memory (a kill
/// loses it, as an outage of moto does: the test makes the container again).
/// It runs in `dir`, where it would put any file of its own.
fn azurite(port: u16, dir: &std::path::Path, log: PathBuf) -> Server {
    let mut cmd = Command::new(azurite_blob());
    cmd.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
        .arg("--inMemoryPersistence")
        .current_dir(dir)
        // No telemetry: the test must not reach beyond loopback.
        .args(["--disableTelemetry", "--skipApiVersionCheck"])
        .env("AZURITE_ACCOUNTS", format!("{ACCOUNT}:{KEY}"));
    Server::start("azurite-blob", cmd, port, log)
}

/// Creates the container with Azure's REST call (`PUT ?restype=container`),
/// signed with the account's shared key by object_store's own signer: the
/// object store API itself has no "create bucket".
async fn create_container(port: u16) {
    let url = format!("http://127.0.0.1:{port}/{ACCOUNT}/{CONTAINER}?restype=container");
    let mut req = HttpRequest::new(Vec::new().into());
    *req.method_mut() = http::Method::PUT;
    *req.uri_mut() = url.parse().unwrap();
    req.headers_mut()
        .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(0));
    let credential = AzureCredential::AccessKey(AzureAccessKey::try_new(KEY).unwrap());
    AzureAuthorizer::new(&credential, ACCOUNT)
        .try_authorize(&mut req)
        .unwrap();
    // reqwest is built without a default rustls provider (ring, not aws-lc);
    // Err only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = ReqwestConnector::default()
        .connect(&ClientOptions::new().with_allow_http(true))
        .unwrap();
    let resp = client.execute(req).await.expect("PUT container");
    let status = resp.status();
    let body = resp.into_body().bytes().await.unwrap_or_default();
    assert_eq!(
        status.as_u16(),
        201,
        "create container: {}",
        String::from_utf8_lossy(&body)
    );
}

/// A client of the container built independently of the exporter (the
/// AZURITE_BLOB_STORAGE_URL of the process points it at the emulator).
fn reader() -> impl ObjectStore {
    MicrosoftAzureBuilder::new()
        .with_use_emulator(true)
        .with_account(ACCOUNT)
        .with_access_key(KEY)
        .with_container_name(CONTAINER)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn az_upload_outage_and_recovery_against_azurite() {
    if !azurite_present() {
        return;
    }
    let port = free_port();
    let data = scratch("azurite-cwd");
    let data = data.path();
    let logs = scratch("azurite-logs");
    let logs = logs.path();
    // SAFETY: this binary runs this single test; no other thread reads the
    // environment while it is set.
    unsafe {
        std::env::set_var("AZURE_STORAGE_USE_EMULATOR", "true");
        std::env::set_var(
            "AZURITE_BLOB_STORAGE_URL",
            format!("http://127.0.0.1:{port}"),
        );
        std::env::set_var("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT);
        std::env::set_var("AZURE_STORAGE_ACCOUNT_KEY", WRONG_KEY);
    }
    let mut server = azurite(port, data, logs.join("1.log"));
    create_container(port).await;

    // 0. The key comes from the environment and Azurite checks it.
    let wrong = Uploader::new(&format!("az://{CONTAINER}/cluster-a")).unwrap();
    let err = wrong
        .put("cluster-a/probe", b"x".to_vec())
        .await
        .expect_err("a wrong account key must be refused");
    assert!(
        err.to_string().contains("403") || err.to_string().contains("uthenticat"),
        "{err}"
    );
    // SAFETY: as above.
    unsafe { std::env::set_var("AZURE_STORAGE_ACCOUNT_KEY", KEY) };

    let spool = scratch("az-spool");

    let spool = spool.path();
    let pc = outage_collector(&format!("az://{CONTAINER}/cluster-a"), spool);
    let bucket = reader();
    let samples = iperf_samples();
    let chunks: Vec<&[Sample]> = samples.chunks(samples.len().div_ceil(4)).collect();
    assert_eq!(chunks.len(), 4);

    // 1. Azurite up: the dump is uploaded and deleted locally.
    let first = dump_while_up(&pc, chunks[0], spool, &bucket).await;

    // 2. Azurite down: dumps stay local, at most max_dumps_retained.
    server.stop();
    let written = dumps_while_down(&pc, &chunks[1..], spool).await;

    // 3. Azurite back (empty: make the container again): the two retained
    //    dumps are uploaded, oldest first, and deleted.
    let _server = azurite(port, data, logs.join("2.log"));
    create_container(port).await;
    dump_after_outage(&pc, &written, &chunks[1..], spool, &bucket).await;

    // 4. Without emulator mode, an explicit http:// endpoint works when
    //    AZURE_ALLOW_HTTP says so: the Uploader keeps the client options the
    //    builder read from the environment.
    // SAFETY: as above.
    unsafe {
        std::env::remove_var("AZURE_STORAGE_USE_EMULATOR");
        std::env::set_var(
            "AZURE_STORAGE_ENDPOINT",
            format!("http://127.0.0.1:{port}/{ACCOUNT}"),
        );
        std::env::set_var("AZURE_ALLOW_HTTP", "true");
    }
    let plain = Uploader::new(&format!("az://{CONTAINER}/cluster-a")).unwrap();
    plain
        .put("cluster-a/endpoint-probe", first.as_bytes().to_vec())
        .await
        .unwrap();
    assert_eq!(
        object(&bucket, "cluster-a/endpoint-probe").await,
        first.as_bytes()
    );
}
