//! The web UI in a real browser: a real `ember server` loaded with real pprof files from the
//! repository's corpus (and one generated 3,000-level stack), Debian's chromium driven by
//! playwright-core (`tests/browser/ui.mjs`). The script picks the service, checks the flame
//! graph's top frame, zooms, searches, clicks a top-table row, reloads from the URL, and checks
//! there is no console error and no request outside the server's origin; screenshots go to
//! `target/ui-screenshots/`. `tests/browser/ui_compare.mjs` opens the Compare view over a
//! generated regression and checks its colours (read back from the canvas) in both modes.
//!
//! Every expected figure (top frame, heaviest function, search share) is computed here from
//! the pprof files themselves, independently of the server and of the page's script. Needs
//! `bash .ci/setup`; without chromium or node it is skipped with a loud message, except under
//! CI (`CI` set), where that is a failure.

mod browser_util;
mod server_util;

use std::collections::BTreeMap;
use std::path::Path;

use browser_util::{browser_available, run_script, screenshots};
use server_util::{Server, corpus, temp_dir};

const JAVA: &str = "pyroscope/pkg/pprof/testdata/profile_java";
const GO: &str = "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof";
const SEARCH: &str = "UnixFileSystem";
/// A function that calls itself in the Java profile (`createTempFile` overloads).
const SANDWICH: &str = "java/io/File.createTempFile";

/// The cpu stacks of a corpus profile as the server names frames (function names).
fn cpu_stacks(path: &Path) -> BTreeMap<String, i64> {
    let p = ember_pprof::read_file(path).unwrap();
    let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
    ember_pprof::folded_stacks(&p, i).into_iter().collect()
}

/// The heaviest entry of a map of sums (ties: the first name).
fn heaviest(sums: BTreeMap<String, i64>) -> String {
    let mut best: Option<(String, i64)> = None;
    for (name, v) in sums {
        if best.as_ref().is_none_or(|(_, b)| v > *b) {
            best = Some((name, v));
        }
    }
    best.expect("a non-empty profile").0
}

/// What the page must show for `stacks`: the root's widest child, a frame of the second level
/// to zoom into, the function with the most self value, and the share (in percent) of the
/// samples whose stack has a frame matching the search (case-insensitive, as the page
/// searches).
struct Expected {
    /// The sandwich of [`SANDWICH`]: its total (each stack once, at its outermost call), its
    /// heaviest direct caller and callee there.
    sandwich: (i64, String, String),
    top_frame: String,
    zoom_path: Vec<String>,
    top_self: String,
    search_percent: f64,
}

fn expected(stacks: &BTreeMap<String, i64>) -> Expected {
    let frames = |s: &str| s.split(';').map(str::to_string).collect::<Vec<_>>();
    let mut first = BTreeMap::new();
    let mut leaf = BTreeMap::new();
    for (stack, v) in stacks {
        let f = frames(stack);
        *first.entry(f[0].clone()).or_insert(0) += v;
        *leaf.entry(f.last().unwrap().clone()).or_insert(0) += v;
    }
    let top_frame = heaviest(first);
    let mut second = BTreeMap::new();
    for (stack, v) in stacks {
        let f = frames(stack);
        if f[0] == top_frame && f.len() > 1 {
            *second.entry(f[1].clone()).or_insert(0) += v;
        }
    }
    let zoom_path = vec![top_frame.clone(), heaviest(second)];
    let re = regex::Regex::new(&format!("(?i){SEARCH}")).unwrap();
    let (mut matched, mut total) = (0i64, 0i64);
    for (stack, v) in stacks {
        total += v;
        if stack.split(';').any(|f| re.is_match(f)) {
            matched += v;
        }
    }
    let (mut callers, mut callees, mut fn_total) = (BTreeMap::new(), BTreeMap::new(), 0);
    for (stack, v) in stacks {
        let f = frames(stack);
        if let Some(k) = f.iter().position(|x| x == SANDWICH) {
            fn_total += v;
            if k > 0 {
                *callers.entry(f[k - 1].clone()).or_insert(0) += v;
            }
            if let Some(next) = f.get(k + 1) {
                *callees.entry(next.clone()).or_insert(0) += v;
            }
        }
    }
    Expected {
        sandwich: (fn_total, heaviest(callers), heaviest(callees)),
        top_frame,
        zoom_path,
        top_self: heaviest(leaf),
        search_percent: matched as f64 * 100.0 / total as f64,
    }
}

fn ingest(server: &Server, name: &str, format: &str, body: &[u8], headers: &[(&str, &str)]) {
    let path = format!("/ingest?name={name}.cpu&format={format}");
    let (status, answer) = server.request("POST", &path, headers, body);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
}

#[test]
fn web_ui_asks_for_the_token_of_a_server_with_auth() {
    if !browser_available() {
        return;
    }
    let dir = temp_dir("ui-browser-auth");
    let dir = dir.path();
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "s3cret-token team-a\n").unwrap();
    let server = Server::start(
        &dir.join("data"),
        &["--auth-tokens", tokens.to_str().unwrap()],
    );
    // The page is open; the data is not.
    let (status, page) = server.get("/", &[]);
    assert_eq!(status, 200);
    assert!(page.contains("<canvas"), "{page}");
    assert_eq!(server.get("/api/v1/profile_types", &[]).0, 401);
    let java = corpus(JAVA);
    let auth = [("Authorization", "Bearer s3cret-token")];
    ingest(
        &server,
        "java-shop",
        "pprof",
        &std::fs::read(&java).unwrap(),
        &auth,
    );
    let want = expected(&cpu_stacks(&java));
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "token": "s3cret-token",
        "service": "java-shop",
        "topFrame": want.top_frame,
        "screenshots": screenshots(),
        "download": dir.join("export.pb.gz"),
    });
    run_script("ui_auth.mjs", &args, 9);
    // The exported pprof holds exactly the ingested profile's stacks.
    let exported = ember_pprof::read_file(&dir.join("export.pb.gz")).expect("a pprof download");
    let got: BTreeMap<String, i64> = ember_pprof::folded_stacks(&exported, 0)
        .into_iter()
        .collect();
    assert_eq!(got, cpu_stacks(&java));
    drop(server);
}

#[test]
fn web_ui_explores_a_service_in_chromium() {
    if !browser_available() {
        return;
    }
    let dir = temp_dir("ui-browser");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    // Legacy ingest without `from`: the profiles are "now", inside the page's default hour.
    let java = corpus(JAVA);
    ingest(
        &server,
        "java-shop",
        "pprof",
        &std::fs::read(&java).unwrap(),
        &[],
    );
    let go = std::fs::read(corpus(GO)).unwrap();
    ingest(&server, "checkout", "pprof", &go, &[]);
    let deep: Vec<String> = (0..3000).map(|i| format!("deep_frame_{i}")).collect();
    ingest(
        &server,
        "deep",
        "folded",
        format!("{} 100\n", deep.join(";")).as_bytes(),
        &[],
    );
    // Wider than the server's node limit (8,192): 5,000 frames under `a`, 5,000 under `c`.
    let mut wide = String::new();
    for (parent, leaf) in [("a", "x"), ("c", "y")] {
        for i in 0..5000 {
            wide.push_str(&format!("{parent};{leaf}{i} 10\n"));
        }
    }
    ingest(&server, "wide", "folded", wide.as_bytes(), &[]);

    let want = expected(&cpu_stacks(&java));
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "java-shop",
        "serviceTotal": cpu_stacks(&java).values().sum::<i64>(),
        "services": ["checkout", "deep", "java-shop", "wide"],
        "topFrame": want.top_frame,
        "zoomPath": want.zoom_path,
        "topSelf": want.top_self,
        "search": SEARCH,
        "searchPercent": want.search_percent,
        "sandwich": {
            "fn": SANDWICH,
            "total": want.sandwich.0,
            "caller": want.sandwich.1,
            "callee": want.sandwich.2,
        },
        "wide": { "service": "wide", "frame": "c", "children": 5000 },
        "deepService": "deep",
        "deepLeaf": deep.last().unwrap(),
        "screenshots": screenshots(),
    });
    run_script("ui.mjs", &args, 50);
    drop(server);
}

/// The generated regression of the Compare test: per function its self value an hour and a
/// half ago (the baseline) and half an hour ago (the comparison). `regress.slowPath` grows
/// ninefold and from 6 % to 41 % of the total; `regress.fastPath` shrinks; `gc` keeps its
/// value but loses share (unchanged in absolute mode, less in normalised mode).
const REGRESSION: [(&str, i64, i64); 3] = [
    ("main;regress.handle;regress.fastPath", 600, 500),
    ("main;regress.handle;regress.slowPath", 50, 450),
    ("main;gc", 150, 150),
];

/// The function whose self value changes most, by |change| of value and of share: the one
/// the movers table must put first in each mode.
fn biggest_movers() -> (String, String) {
    let leaf = |s: &str| s.rsplit(';').next().unwrap().to_string();
    let (lt, rt) = REGRESSION
        .iter()
        .fold((0, 0), |(l, r), (_, a, b)| (l + a, r + b));
    let by = |f: &dyn Fn(i64, i64) -> f64| {
        let (s, _, _) = REGRESSION
            .iter()
            .max_by(|x, y| f(x.1, x.2).abs().total_cmp(&f(y.1, y.2).abs()))
            .unwrap();
        leaf(s)
    };
    (
        by(&|a, b| (b - a) as f64),
        by(&|a, b| b as f64 / rt as f64 - a as f64 / lt as f64),
    )
}

#[test]
fn web_ui_compares_a_regression_in_chromium() {
    if !browser_available() {
        return;
    }
    let dir = temp_dir("ui-browser-compare");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (side, ago) in [(0, 90 * 60), (1, 30 * 60)] {
        let body: String = REGRESSION
            .iter()
            .map(|(stack, a, b)| format!("{stack} {}\n", if side == 0 { a } else { b }))
            .collect();
        let at = now - ago;
        let path = format!(
            "/ingest?name=regress-svc.cpu&format=folded&from={at}&until={}",
            at + 10
        );
        let (status, answer) = server.request("POST", &path, &[], body.as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }
    let (absolute, normalised) = biggest_movers();
    assert_eq!(
        (absolute.as_str(), normalised.as_str()),
        ("regress.slowPath", "regress.slowPath")
    );
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "regress-svc",
        "regressed": absolute,
        "improved": "regress.fastPath",
        "steady": "gc",
        "parent": "regress.handle",
        "screenshots": screenshots(),
    });
    run_script("ui_compare.mjs", &args, 25);
    drop(server);
}
