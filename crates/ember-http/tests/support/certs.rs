//! A private CA and a server certificate it signed, made with the openssl CLI. Written once
//! for every test that speaks TLS to a local server: ember-http's own client tests, and the
//! tests of other crates that include this file with `#[path]` (the agent pushing over https
//! in `crates/ember/tests/agent_tls.rs`, debuginfod over https in
//! `crates/ember-sampler/tests/symbols_debuginfod.rs`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A private CA and a `localhost`/127.0.0.1 server certificate it signed, as PEM files.
pub struct Certs {
    /// The directory holding them.
    pub dir: PathBuf,
    /// The CA certificate (what a client trusts).
    pub ca: PathBuf,
    /// The server certificate.
    pub server_cert: PathBuf,
    /// The server's private key.
    pub server_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI must be installed (.ci/setup installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes, in `dir` (created if missing), the CA (`ca.pem`, `ca.key`) and a server certificate
/// for `localhost` and 127.0.0.1 it signed (`server.pem`, `server.key`), P-256 keys valid for
/// two days.
pub fn make_certs(dir: &Path) -> Certs {
    std::fs::create_dir_all(dir).unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        dir,
        &[
            &["req", "-x509"][..],
            &ec,
            &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2"],
            &["-subj", "/CN=Ember test CA"],
        ]
        .concat(),
    );
    openssl(
        dir,
        &[
            &["req"][..],
            &ec,
            &["-keyout", "server.key", "-out", "server.csr"],
            &["-subj", "/CN=localhost"],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
    Certs {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server.key"),
        dir: dir.to_path_buf(),
    }
}
