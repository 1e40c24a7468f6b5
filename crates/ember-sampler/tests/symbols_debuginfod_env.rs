//! debuginfod configured the way elfutils' clients are, from the environment only, against
//! a real https server: `DEBUGINFOD_URLS` is a space-separated list tried in order (a server
//! that accepts connections and never answers, a port nobody listens on, then the https
//! server, which is trusted through `SSL_CERT_FILE` as the system's roots would be),
//! `DEBUGINFOD_TIMEOUT` bounds the wait on the silent one, and the file lands in
//! `DEBUGINFOD_CACHE_PATH`. A stripped program recorded for real gets its names.
//!
//! One test in its own binary: it sets process-wide environment variables, which no other
//! thread may read meanwhile. Needs perf_event_open (root in CI), gcc, objcopy, openssl and
//! python3.

#[path = "../../ember-http/tests/support/certs.rs"]
mod certs;
#[path = "support/debuginfod_server.rs"]
mod server;

use ember_sampler::{CallGraph, Options, Target};
use ember_samples::{Symbolizer, build_profile};
use server::{publish, serve, stop, stripped_program, work_dir};
use std::net::TcpListener;
use std::time::{Duration, Instant};

#[test]
fn debuginfod_urls_are_tried_in_order_over_https_with_the_environment_s_timeout_and_cache() {
    let dir = work_dir("env");
    let (bin, debug, build_id) = stripped_program(&dir);
    let served = publish(&dir, &debug, &build_id);
    let certs = certs::make_certs(&dir);
    let (server, https_url) = serve(&served, Some((&certs.server_cert, &certs.server_key)));
    // Accepts connections (the kernel completes the handshake for the backlog) and never
    // reads or answers them: a TLS handshake there waits until the timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cache = dir.join("cache");
    let urls = format!("https://127.0.0.1:{silent_port}  http://127.0.0.1:{closed}\t{https_url}/");
    // SAFETY: the only test of this binary, and no thread of it reads the environment
    // while these are set (the sampler and symbolizer are started below, after them).
    unsafe {
        std::env::set_var("DEBUGINFOD_URLS", &urls);
        std::env::set_var("DEBUGINFOD_CACHE_PATH", &cache);
        std::env::set_var("DEBUGINFOD_TIMEOUT", "1");
        std::env::set_var("SSL_CERT_FILE", &certs.ca);
    }

    let mut opts = Options::new(Target::Command(vec![bin.clone().into(), "40".into()]));
    opts.call_graph = CallGraph::Fp;
    opts.frequency = 499;
    let rec = ember_sampler::record(&opts, |_| {}).expect("recording");

    let started = Instant::now();
    let mut sym = Symbolizer::new();
    let client = sym
        .debuginfod
        .as_ref()
        .expect("DEBUGINFOD_URLS configures a client");
    assert_eq!(client.urls.len(), 3, "{:?}", client.urls);
    assert_eq!(client.timeout, Duration::from_secs(1));
    let (profile, _) = build_profile(&rec, &mut sym);
    let took = started.elapsed();
    stop(server);
    drop(silent);

    let stacks = ember_pprof::folded_stacks(&profile, 0);
    for f in ["main", "path_a", "burn"] {
        assert!(
            stacks.iter().any(|(s, _)| s.split(';').any(|x| x == f)),
            "{f} named from the https server's debug file; warnings {:?}",
            sym.warnings
        );
    }
    // The silent server cost one timeout (1 s), not the default 5 s, and the dead port
    // nothing: the https server was reached after both.
    assert!(took < Duration::from_secs(4), "symbolizing took {took:?}");
    let cached = cache.join(&build_id).join("debuginfo");
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(&debug).unwrap()
    );
    // The silent server's failure is reported, not hidden.
    assert!(
        sym.warnings
            .iter()
            .any(|w| w.contains(&format!("127.0.0.1:{silent_port}"))),
        "{:?}",
        sym.warnings
    );
    eprintln!(
        "env debuginfod: {} found over https in {took:?}; warnings {:?}",
        bin.display(),
        sym.warnings
    );
}
