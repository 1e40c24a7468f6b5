//! The web UI's call graph and single-profile views in a real browser: a real `ember server`
//! loaded with real pprof files (and generated folded profiles at known times), Debian's
//! chromium driven by playwright-core (`tests/browser/ui_callgraph.mjs`,
//! `tests/browser/ui_profile.mjs`), and the first paint drawn by boot.js before the page's
//! modules (`tests/browser/ui_first_paint.mjs`). Screenshots go to `target/ui-screenshots/`.
//!
//! Every expected figure (the heaviest function, its total, the focused total, each profile's
//! top frame and total) is computed here from the profiles themselves, independently of the
//! server and of the page's script. Needs `bash .ci/setup`; without chromium or node it is
//! skipped with a loud message, except under CI, where that is a failure.

mod browser_util;
mod server_util;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use browser_util::{browser_available, run_script, screenshots};
use server_util::{Server, corpus, java_shop_server, temp_dir};

const GO: &str = "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof";

/// The cpu stacks of a corpus profile as the server names frames.
fn cpu_stacks(path: &Path) -> Vec<(Vec<String>, i64)> {
    let p = ember_pprof::read_file(path).unwrap();
    let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
    ember_pprof::folded_stacks(&p, i)
        .into_iter()
        .map(|(s, v)| (s.split(';').map(str::to_string).collect(), v))
        .collect()
}

/// Each function's total, every stack counted once per function however often it recurses.
fn function_totals(stacks: &[(Vec<String>, i64)]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (frames, v) in stacks {
        for f in frames.iter().collect::<BTreeSet<_>>() {
            *out.entry(f.clone()).or_insert(0) += v;
        }
    }
    out
}

/// The heaviest entry (ties: the first name), as the server orders functions.
fn heaviest(sums: &BTreeMap<String, i64>) -> (String, i64) {
    let mut best: Option<(&String, i64)> = None;
    for (name, v) in sums {
        if best.is_none_or(|(_, b)| *v > b) {
            best = Some((name, *v));
        }
    }
    let (n, v) = best.expect("a non-empty profile");
    (n.clone(), v)
}

fn ingest(server: &Server, path: &str, body: &[u8]) {
    let (status, answer) = server.request("POST", path, &[], body);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
}

#[test]
fn web_ui_draws_the_call_graph_in_chromium() {
    if !browser_available() {
        return;
    }
    let (_dir, server, java) = java_shop_server("ui-callgraph");
    ingest(
        &server,
        "/ingest?name=checkout.cpu&format=pprof",
        &std::fs::read(corpus(GO)).unwrap(),
    );
    let stacks = cpu_stacks(&java);
    let totals = function_totals(&stacks);
    let (top, top_total) = heaviest(&totals);
    // The function with the most self value: the one a click picks.
    let mut selfs = BTreeMap::new();
    for (frames, v) in &stacks {
        *selfs.entry(frames.last().unwrap().clone()).or_insert(0) += v;
    }
    let (hot, _) = heaviest(&selfs);
    // A zoom path (the heaviest root and its heaviest child) and the total through it.
    let mut roots = BTreeMap::new();
    for (frames, v) in &stacks {
        *roots.entry(frames[0].clone()).or_insert(0) += v;
    }
    let root = heaviest(&roots).0;
    let mut second = BTreeMap::new();
    for (frames, v) in stacks.iter().filter(|(f, _)| f[0] == root && f.len() > 1) {
        *second.entry(frames[1].clone()).or_insert(0) += v;
    }
    let zoom = vec![root.clone(), heaviest(&second).0];
    let zoom_total: i64 = stacks
        .iter()
        .filter(|(f, _)| f.starts_with(&zoom))
        .map(|s| s.1)
        .sum();
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "java-shop",
        "total": stacks.iter().map(|s| s.1).sum::<i64>(),
        "heaviest": top,
        "heaviestTotal": top_total,
        "functions": totals.len(),
        "hot": hot,
        "zoom": zoom,
        "zoomTotal": zoom_total,
        "screenshots": screenshots(),
    });
    run_script("ui_callgraph.mjs", &args, 20);
    drop(server);
}

/// The generated profiles of the single-profile test: pushed 50, 30 and 10 minutes ago, each
/// with its own root frame and total.
fn generated(k: usize) -> String {
    let root = format!("service{k}.main");
    format!(
        "{root};handle;work{k} {}\n{root};handle;io 40\n{root};gc {}\n",
        300 * (k + 1),
        20 + k
    )
}

#[test]
fn web_ui_opens_single_profiles_in_chromium() {
    if !browser_available() {
        return;
    }
    let dir = temp_dir("ui-profiles");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut profiles = Vec::new();
    for (k, ago) in [50u64, 30, 10].into_iter().enumerate() {
        let at = now - ago * 60;
        let body = generated(k);
        ingest(
            &server,
            &format!(
                "/ingest?name=shop.cpu&format=folded&from={at}&until={}",
                at + 10
            ),
            body.as_bytes(),
        );
        let samples: i64 = body
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
            .sum();
        // Legacy ingest stores CPU samples as time: 10 ms each at the default 100 Hz.
        let total = samples * 10_000_000;
        profiles.push(serde_json::json!({
            "timeMs": at * 1000,
            "topFrame": format!("service{k}.main"),
            "total": total,
        }));
    }
    // Another service's profile, not in the selection.
    ingest(
        &server,
        &format!(
            "/ingest?name=other.cpu&format=folded&from={}",
            now - 20 * 60
        ),
        b"other.main;x 5\n",
    );
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "shop",
        "profiles": profiles,
        "screenshots": screenshots(),
    });
    run_script("ui_profile.mjs", &args, 20);
    drop(server);
}

/// boot.js draws a plain view's flame graph before the page's modules run; what it drew must
/// be the full view, pixel for pixel, once the page has loaded everything
/// (`tests/browser/ui_first_paint.mjs`), with the node limit off: on a real profile (every
/// frame wide enough to be drawn), and on a generated one whose thousands of one-sample
/// leaves are too narrow to draw, between leaves that are drawn, so boot.js's first answer
/// (`minShare`) leaves them out and must keep every drawn frame in its place.
#[test]
fn web_ui_draws_the_first_view_early_and_it_is_the_full_view() {
    if !browser_available() {
        return;
    }
    let (_dir, server, java) = java_shop_server("ui-first-paint");
    let stacks = cpu_stacks(&java);
    // The whole call tree's nodes: the root and every distinct call path.
    let paths: BTreeSet<&[String]> = stacks
        .iter()
        .flat_map(|(frames, _)| (1..=frames.len()).map(move |n| &frames[..n]))
        .collect();
    let mut roots = BTreeMap::new();
    for (frames, v) in &stacks {
        *roots.entry(frames[0].clone()).or_insert(0) += v;
    }
    // 3,000 leaves under `main;cold`: one sample each but every 100th, which has 60 (drawn,
    // 7 px wide at 1280 px), and 2,000 samples in `main;hot;work`.
    let mut leafy = String::from("main;hot;work 2000\n");
    for i in 0..3000 {
        let v = if i % 100 == 50 { 60 } else { 1 };
        leafy.push_str(&format!("main;cold;leaf{i:04} {v}\n"));
    }
    ingest(
        &server,
        "/ingest?name=leafy.cpu&format=folded",
        leafy.as_bytes(),
    );
    let types = server.get_json("/api/v1/profile_types", &[]);
    let types: Vec<&str> = types
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    let cpu = *types
        .iter()
        .find(|t| t.split(':').nth(1) == Some("cpu"))
        .expect("a cpu type");
    assert_eq!(
        types.len(),
        1,
        "one type, so a first visit picks it: {types:?}"
    );
    // boot.js's first answer at the test's 1280 px window: the nodes of at least 0.3 px
    // (`minShare`, 0.3 / 1280 to three digits) of the whole.
    let share = "0.000234";
    let kept = |stacks: &[(Vec<String>, i64)]| {
        let whole: i64 = stacks.iter().map(|s| s.1).sum();
        let mut totals: BTreeMap<&[String], i64> = BTreeMap::new();
        for (frames, v) in stacks {
            for n in 1..=frames.len() {
                *totals.entry(&frames[..n]).or_insert(0) += v;
            }
        }
        let least = share.parse::<f64>().unwrap() * whole as f64;
        1 + totals.values().filter(|&&t| t as f64 >= least).count()
    };
    let leafy_stacks: Vec<(Vec<String>, i64)> = leafy
        .lines()
        .map(|l| {
            let (s, v) = l.rsplit_once(' ').unwrap();
            (
                s.split(';').map(str::to_string).collect(),
                v.parse().unwrap(),
            )
        })
        .collect();
    let cases = serde_json::json!([
        {
            "service": "java-shop", "type": cpu, "heaviestRoot": heaviest(&roots).0,
            "nodes": paths.len() + 1, "share": share, "early": kept(&stacks), "firstVisit": true,
        },
        {
            // root, main, cold, hot, work and 3,000 leaves; drawn: all but the 2,970 thin ones.
            "service": "leafy", "type": cpu, "heaviestRoot": "main",
            "nodes": 3005, "share": share, "early": kept(&leafy_stacks), "firstVisit": false,
        },
    ]);
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "cases": cases,
        "screenshots": screenshots(),
    });
    run_script("ui_first_paint.mjs", &args, 31);
    drop(server);
}
