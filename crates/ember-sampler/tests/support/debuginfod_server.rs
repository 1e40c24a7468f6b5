//! A debuginfod server for the tests: a stripped C program whose debug file is published
//! only on the server, and Python's `http.server` serving the `buildid/<hex>/debuginfo`
//! layout over http or https. Used by `symbols_debuginfod.rs` and `symbols_debuginfod_env.rs`.
#![allow(dead_code)]

use ember_samples::symbolize::Binary;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub fn work_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("symbols-debuginfod-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed");
}

/// Builds three_paths with DWARF, splits its debug file off and strips the
/// binary: (stripped binary, debug file, build-id).
pub fn stripped_program(dir: &Path) -> (PathBuf, PathBuf, String) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/three_paths.c");
    let bin = dir.join("three_paths-dbgd");
    let debug = dir.join("three_paths-dbgd.debug");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-fno-shrink-wrap"])
        .args(["-Wl,--build-id", "-o"])
        .arg(&bin)
        .arg(src));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(&debug));
    run(Command::new("objcopy").arg("--strip-all").arg(&bin));
    let binary = Binary::load(&bin).expect("stripped binary loads");
    assert!(binary.stripped, "objcopy --strip-all left symbols");
    assert!(!binary.build_id.is_empty(), "gcc wrote no build-id");
    (bin, debug, binary.build_id.clone())
}

/// Python's `http.server` on an ephemeral port of 127.0.0.1 serving `root`, behind TLS when
/// given `(certificate, key)`; returns the child and its base URL.
pub fn serve(root: &Path, tls: Option<(&Path, &Path)>) -> (Child, String) {
    const SERVER: &str = "import functools, http.server, ssl, sys\n\
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n\
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)\n\
        if len(sys.argv) > 2: ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n\
        if len(sys.argv) > 2: ctx.load_cert_chain(sys.argv[2], sys.argv[3])\n\
        if len(sys.argv) > 2: server.socket = ctx.wrap_socket(server.socket, server_side=True)\n\
        print(server.server_address[1], flush=True)\n\
        server.serve_forever()\n";
    let mut python = Command::new("python3");
    python.args(["-u", "-c", SERVER]).arg(root);
    if let Some((cert, key)) = tls {
        python.args([cert, key]);
    }
    let mut child = python
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 must be installed");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("unexpected server banner {line:?}"));
    let scheme = if tls.is_some() { "https" } else { "http" };
    (child, format!("{scheme}://127.0.0.1:{port}"))
}

/// Lays out `dir/served` as a debuginfod server does, holding `debug` as the debug file of
/// `build_id`; returns that folder.
pub fn publish(dir: &Path, debug: &Path, build_id: &str) -> PathBuf {
    let served = dir.join("served");
    let slot = served.join("buildid").join(build_id);
    std::fs::create_dir_all(&slot).unwrap();
    std::fs::copy(debug, slot.join("debuginfo")).unwrap();
    served
}

pub fn stop(mut server: Child) {
    let _ = server.kill();
    let _ = server.wait();
}
