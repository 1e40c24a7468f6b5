//! debuginfod end to end against a real HTTP server (Python's `http.server`
//! serving a directory laid out as `buildid/<hex>/debuginfo`): a stripped
//! program whose debug file exists only on the server is recorded and its
//! functions get their names; a second symbolization finds the file in the
//! on-disk cache with the server gone; misses are remembered; a file with
//! the wrong build-id is refused.
//!
//! Needs perf_event_open (root in CI), gcc, objcopy and python3.

#[path = "../../ember-http/tests/support/certs.rs"]
mod certs;

#[path = "support/debuginfod_server.rs"]
mod server;

use ember_sampler::{CallGraph, Options, Target};
use ember_samples::debuginfod::{Debuginfod, DebuginfodError};
use ember_samples::{Recording, Symbolizer, build_profile};
use server::{publish, serve, stop, stripped_program, work_dir};
use std::path::Path;

fn record(bin: &Path) -> Recording {
    let mut opts = Options::new(Target::Command(vec![bin.into(), "40".into()]));
    opts.call_graph = CallGraph::Fp;
    opts.frequency = 499;
    ember_sampler::record(&opts, |_| {}).expect("recording")
}

/// Folded stacks (root first) of the recording, symbolized with `client`.
fn stacks(rec: &Recording, client: Debuginfod) -> (Vec<(String, i64)>, Vec<String>) {
    let mut sym = Symbolizer::new();
    sym.debuginfod = Some(client);
    let (profile, _) = build_profile(rec, &mut sym);
    (ember_pprof::folded_stacks(&profile, 0), sym.warnings)
}

fn samples_with(stacks: &[(String, i64)], frame: &str) -> i64 {
    stacks
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == frame))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn stripped_program_gets_its_names_from_debuginfod_then_from_the_cache() {
    let dir = work_dir("names");
    let (bin, debug, build_id) = stripped_program(&dir);
    let served = publish(&dir, &debug, &build_id);
    let cache = dir.join("cache");

    let rec = record(&bin);
    assert!(rec.samples > 100, "{} samples", rec.samples);

    // Without debuginfod the program's frames stay unknown.
    let (plain, warnings) = {
        let mut sym = Symbolizer::new();
        sym.debuginfod = None;
        let (profile, _) = build_profile(&rec, &mut sym);
        (ember_pprof::folded_stacks(&profile, 0), sym.warnings)
    };
    assert_eq!(samples_with(&plain, "path_a"), 0);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("three_paths-dbgd has no symbol table")
                && w.contains("DEBUGINFOD_URLS")),
        "{warnings:?}"
    );

    let (server, url) = serve(&served, None);
    let fetched = stacks(&rec, Debuginfod::new(vec![url.clone()], cache.clone()));
    stop(server);
    let (with_server, warnings) = fetched;
    assert!(warnings.is_empty(), "{warnings:?}");
    let total: i64 = with_server.iter().map(|(_, n)| n).sum();
    for f in ["main", "path_a", "path_b", "path_c", "burn"] {
        assert!(
            samples_with(&with_server, f) > 0,
            "{f} missing: {with_server:?}"
        );
    }
    // The program's own frames are all named: [unknown] only outside it.
    assert!(
        !with_server
            .iter()
            .any(|(s, _)| s.contains("[unknown] three_paths-dbgd")),
        "{with_server:?}"
    );
    assert!(samples_with(&with_server, "main") * 10 >= total * 8);
    let cached = cache.join(&build_id).join("debuginfo");
    assert_eq!(
        std::fs::read(&cached).unwrap(),
        std::fs::read(&debug).unwrap()
    );

    // Server gone: the cache answers, with the same result and no warning.
    let (again, warnings) = stacks(&rec, Debuginfod::new(vec![url.clone()], cache.clone()));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(again, with_server);

    // Server gone and nothing cached: a warning naming the server, the
    // frames degrade to [unknown] binary+offset, the run still succeeds.
    let (degraded, warnings) = stacks(&rec, Debuginfod::new(vec![url.clone()], dir.join("empty")));
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("debuginfod server") && w.contains(&url)),
        "{warnings:?}"
    );
    assert!(
        degraded
            .iter()
            .any(|(s, _)| s.contains("[unknown] three_paths-dbgd+0x")),
        "{degraded:?}"
    );
    assert_eq!(
        degraded.iter().map(|(_, n)| n).sum::<i64>(),
        total,
        "no sample dropped"
    );
}

#[test]
fn misses_are_remembered_and_wrong_files_refused() {
    let dir = work_dir("misses");
    let (_, debug, build_id) = stripped_program(&dir);
    let served = dir.join("served");
    // The server holds another build-id's slot only, plus a file of the
    // wrong build-id under a third one.
    let wrong_id = "00112233445566778899aabbccddeeff00112233";
    std::fs::create_dir_all(served.join("buildid").join(wrong_id)).unwrap();
    std::fs::copy(
        &debug,
        served.join("buildid").join(wrong_id).join("debuginfo"),
    )
    .unwrap();
    let cache = dir.join("cache");
    let (server, url) = serve(&served, None);

    let mut client = Debuginfod::new(vec![url.clone()], cache.clone());
    let miss = client.debuginfo(&build_id);
    let wrong = client.debuginfo(wrong_id);
    stop(server);
    assert!(matches!(miss, Ok(None)), "{miss:?}");
    assert!(cache.join(&build_id).join("debuginfo.miss").is_file());
    match wrong {
        Err(DebuginfodError::Http { message, .. }) => {
            assert!(message.contains(&build_id), "{message}")
        }
        other => panic!("a file of another build-id was accepted: {other:?}"),
    }
    assert!(!cache.join(wrong_id).join("debuginfo").exists());

    // The server is down now: a remembered miss does not even try it...
    let mut client = Debuginfod::new(vec![url.clone()], cache.clone());
    assert!(matches!(client.debuginfo(&build_id), Ok(None)));
    // ...while a build-id never asked about does, and fails cleanly.
    let other = "ffeeddccbbaa99887766554433221100ffeeddcc";
    assert!(matches!(
        client.debuginfo(other),
        Err(DebuginfodError::Transfer { .. })
    ));
    // The unreachable server is not asked again in this run.
    assert!(matches!(client.debuginfo(other), Ok(None)));

    // An expired miss is asked again.
    let mut client = Debuginfod::new(vec![url], cache.clone());
    client.negative_ttl = std::time::Duration::ZERO;
    assert!(client.debuginfo(&build_id).is_err());
}

#[test]
fn a_failing_server_does_not_hide_the_next_one() {
    let dir = work_dir("servers");
    let (_, debug, build_id) = stripped_program(&dir);
    let served = publish(&dir, &debug, &build_id);
    // A port nobody listens on: bound, then released.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (server, url) = serve(&served, None);
    let mut client = Debuginfod::new(
        vec![
            format!("http://127.0.0.1:{closed}"),
            "https://example.invalid".to_string(),
            url,
        ],
        dir.join("cache"),
    );
    let found = client.debuginfo(&build_id);
    stop(server);
    let path = found.expect("the live server answers").expect("file found");
    assert_eq!(std::fs::read(path).unwrap(), std::fs::read(&debug).unwrap());
}

#[test]
fn debug_files_come_over_https() {
    let dir = work_dir("https");
    let (_, debug, build_id) = stripped_program(&dir);
    let served = publish(&dir, &debug, &build_id);
    let certs = certs::make_certs(&dir);
    let (server, url) = serve(&served, Some((&certs.server_cert, &certs.server_key)));
    // Without the private CA the server is not trusted: an error, no file.
    let mut untrusted = Debuginfod::new(vec![url.clone()], dir.join("cache-untrusted"));
    let refused = untrusted.debuginfo(&build_id);
    let mut client = Debuginfod::new(vec![url], dir.join("cache"));
    client.ca_file = Some(certs.ca);
    let found = client.debuginfo(&build_id);
    stop(server);
    assert!(
        matches!(refused, Err(DebuginfodError::Transfer { .. })),
        "{refused:?}"
    );
    let path = found.expect("fetched over https").expect("file found");
    assert_eq!(std::fs::read(path).unwrap(), std::fs::read(&debug).unwrap());
}
