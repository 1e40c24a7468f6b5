//! More of the web UI in a real browser (a real `ember server`, Debian's chromium through
//! playwright-core), besides `ui_browser.rs`: the exports of issue 12 and its honest states.
//!
//! - `tests/browser/ui_export.mjs`: the speedscope download (checked here against the
//!   ingested profile's stacks, there against speedscope's own file-format schema and by
//!   loading it into npm's `speedscope` app), the PNG of the flame graph at the device pixel
//!   ratio, and the Compare view's zoom into a diff cut at the node limit, which asks the
//!   server for the zoomed subtree so no frame under it stays hidden in `other`.
//! - `tests/browser/ui_states.mjs`: loading indicator, the no-data hints, an unreachable
//!   server, keyboard shortcuts and their help overlay, the theme toggle, layouts at 1280×800
//!   and 1920×1080, and WCAG AA contrast of the main text in both themes.
//!
//! Needs `bash .ci/setup`; skipped loudly without chromium or node, except under CI.

mod browser_util;
mod server_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use browser_util::{browser_available, repo_root, run_script, screenshots};
use server_util::{Server, java_shop_server, temp_dir};

/// The cpu stacks of a corpus profile as the server names frames.
fn cpu_stacks(path: &Path) -> BTreeMap<String, i64> {
    let p = ember_pprof::read_file(path).unwrap();
    let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
    ember_pprof::folded_stacks(&p, i).into_iter().collect()
}

fn ingest(server: &Server, path: &str, body: &[u8]) {
    let (status, answer) = server.request("POST", path, &[], body);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
}

/// The stacks of a speedscope file's profile `p` (frame names joined by `;`) with their
/// summed weights.
fn speedscope_stacks(file: &serde_json::Value, p: usize) -> BTreeMap<String, i64> {
    let frames = file["shared"]["frames"].as_array().expect("frames");
    let profile = &file["profiles"][p];
    let mut out = BTreeMap::new();
    let samples = profile["samples"].as_array().expect("samples");
    let weights = profile["weights"].as_array().expect("weights");
    for (s, w) in samples.iter().zip(weights) {
        let names: Vec<&str> = s
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                frames[i.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        *out.entry(names.join(";")).or_insert(0) += w.as_f64().unwrap() as i64;
    }
    out
}

/// A diff wider than a node limit of 320: under `main` two frames of 300 children each, on
/// both sides (grown on the comparison side). The children of `wide.cold` are heavier, so the
/// cut keeps them and sums most of `wide.hot`'s into `other`; `wide.hot` alone (303 nodes
/// with its path) fits the limit.
fn wide_diff(server: &Server) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    for (grow, ago) in [(0, 90 * 60), (3, 30 * 60)] {
        let mut body = String::new();
        for i in 0..300 {
            body.push_str(&format!("main;wide.cold;wide.c{i} {}\n", 30 + grow + i % 5));
            body.push_str(&format!(
                "main;wide.hot;wide.leaf{i} {}\n",
                10 + grow + i % 7
            ));
        }
        let at = now - ago;
        let path = format!(
            "/ingest?name=wide-diff.cpu&format=folded&from={at}&until={}",
            at + 10
        );
        ingest(server, &path, body.as_bytes());
    }
}

#[test]
fn web_ui_exports_speedscope_and_png_and_zooms_into_a_cut_diff() {
    if !browser_available() {
        return;
    }
    let (dir, server, java) = java_shop_server("ui-export");
    wide_diff(&server);
    let want = cpu_stacks(&java);
    let downloads = dir.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "java-shop",
        "serviceTotal": want.values().sum::<i64>(),
        "wide": { "service": "wide-diff", "path": ["main", "wide.hot"], "children": 300, "maxNodes": 320 },
        "speedscope": repo_root().join("tests/browser/node_modules/speedscope/dist/release"),
        "downloads": downloads,
        "screenshots": screenshots(),
    });
    run_script("ui_export.mjs", &args, 25);
    // The downloaded speedscope file holds exactly the ingested profile's stacks.
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(downloads.join("profile.speedscope.json")).unwrap())
            .expect("speedscope JSON");
    assert_eq!(speedscope_stacks(&file, 0), want);
    // The pprof download opens in `go tool pprof` (Go 1.19, from `.ci/setup`): its top table
    // is headed by the function with the most self value in the ingested profile.
    let go = ["/usr/lib/go-1.19/bin/go", "go"]
        .into_iter()
        .find(|g| Command::new(g).arg("version").output().is_ok());
    if let Some(go) = go {
        let top = Command::new(go)
            .args(["tool", "pprof", "-top", "-nodecount=3"])
            .arg(downloads.join("profile.pb.gz"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&top.stdout);
        assert!(
            top.status.success(),
            "go tool pprof: {}",
            String::from_utf8_lossy(&top.stderr)
        );
        let mut selfs: BTreeMap<&str, i64> = BTreeMap::new();
        for (s, v) in &want {
            *selfs.entry(s.rsplit(';').next().unwrap()).or_insert(0) += v;
        }
        let heaviest = selfs.iter().max_by_key(|(_, v)| **v).unwrap().0;
        let first_row = text
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"))
            .nth(1);
        assert!(
            first_row.is_some_and(|r| r.ends_with(heaviest)),
            "go tool pprof -top of the download starts with {heaviest}:\n{text}"
        );
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "Go is needed under CI (.ci/setup)"
        );
        eprintln!("SKIPPED: no Go toolchain to read the pprof download");
    }
    // The diff's file, zoomed: both sides of the zoomed subtree only.
    let diff: serde_json::Value =
        serde_json::from_slice(&std::fs::read(downloads.join("diff.speedscope.json")).unwrap())
            .expect("speedscope JSON");
    let right = speedscope_stacks(&diff, 1);
    assert_eq!(right.len(), 300);
    assert!(right.keys().all(|k| k.starts_with("main;wide.hot;")));
    drop(server);
}

#[test]
fn web_ui_states_keys_themes_and_contrast() {
    if !browser_available() {
        return;
    }
    let (_dir, server, java) = java_shop_server("ui-states");
    wide_diff(&server);
    // The frame to zoom into and one of its children (the heaviest of each level).
    let stacks = cpu_stacks(&java);
    let heaviest = |prefix: &[&str]| -> String {
        let mut sums: BTreeMap<String, i64> = BTreeMap::new();
        for (s, v) in &stacks {
            let f: Vec<&str> = s.split(';').collect();
            if f.len() > prefix.len() && f[..prefix.len()] == *prefix {
                *sums.entry(f[prefix.len()].to_string()).or_insert(0) += v;
            }
        }
        let best = sums.iter().max_by_key(|(_, v)| **v).unwrap();
        best.0.clone()
    };
    let first = heaviest(&[]);
    let second = heaviest(&[first.as_str()]);
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "java-shop",
        "zoomPath": [first, second],
        "diffService": "wide-diff",
        "screenshots": screenshots(),
    });
    run_script("ui_states.mjs", &args, 40);
    drop(server);
}

/// The stacks of `stacks` with the frame filters applied as the server documents them
/// (hidden frames left out, direct recursion folded, nothing below `below`), summed.
fn filtered(
    stacks: &BTreeMap<String, i64>,
    hide: Option<&regex::Regex>,
    rec: bool,
    below: Option<&str>,
) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (stack, v) in stacks {
        let mut kept: Vec<&str> = Vec::new();
        for name in stack.split(';') {
            if hide.is_some_and(|r| r.is_match(name)) || rec && kept.last() == Some(&name) {
                continue;
            }
            kept.push(name);
            if below == Some(name) {
                break;
            }
        }
        *out.entry(kept.join(";")).or_insert(0) += v;
    }
    out
}

/// Nodes of the flame graph of `stacks`: every distinct call path, plus the root.
fn node_count(stacks: &BTreeMap<String, i64>) -> usize {
    let mut paths = std::collections::BTreeSet::new();
    for stack in stacks.keys().filter(|s| !s.is_empty()) {
        for (i, c) in stack.char_indices() {
            if c == ';' {
                paths.insert(&stack[..i]);
            }
        }
        paths.insert(stack.as_str());
    }
    paths.len() + 1
}

#[test]
fn web_ui_filters_frames_on_the_server() {
    if !browser_available() {
        return;
    }
    let (_dir, server, java) = java_shop_server("ui-filters");
    let stacks = cpu_stacks(&java);
    // Hide the thread entry frames: the heaviest root frame becomes one of their callees.
    let hide = "^java/lang/Thread";
    let re = regex::Regex::new(hide).unwrap();
    let hidden = filtered(&stacks, Some(&re), false, None);
    let mut roots: BTreeMap<&str, i64> = BTreeMap::new();
    for (s, v) in &hidden {
        *roots.entry(s.split(';').next().unwrap()).or_insert(0) += v;
    }
    let hidden_top = roots.iter().max_by_key(|(_, v)| **v).unwrap().0.to_string();
    let rec = filtered(&stacks, Some(&re), true, None);
    let dropped = filtered(&stacks, Some(&re), true, Some(&hidden_top));
    let counts = [
        node_count(&stacks),
        node_count(&hidden),
        node_count(&rec),
        node_count(&dropped),
    ];
    assert!(
        counts[0] > counts[1] && counts[1] >= counts[2] && counts[2] > counts[3],
        "each filter changes the graph: {counts:?}"
    );
    // Focus on a function called from several places: its stacks from its outermost call.
    let focus_fn = "java/io/File.createTempFile";
    let mut focused: BTreeMap<String, i64> = BTreeMap::new();
    for (s, v) in &stacks {
        if let Some(at) = s.find(focus_fn) {
            *focused.entry(s[at..].to_string()).or_insert(0) += v;
        }
    }
    assert!(!focused.is_empty() && node_count(&focused) < counts[0]);
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "java-shop",
        "total": stacks.values().sum::<i64>(),
        "focusFn": focus_fn,
        "nodesFocused": node_count(&focused),
        "focusTotal": focused.values().sum::<i64>(),
        "nodesAll": counts[0],
        "hide": hide,
        "hiddenTop": hidden_top,
        "nodesHidden": counts[1],
        "nodesHiddenRec": counts[2],
        "nodesDropped": counts[3],
        "screenshots": screenshots(),
    });
    run_script("ui_filters.mjs", &args, 20);
    drop(server);
}

#[test]
fn web_ui_pages_through_tens_of_thousands_of_label_values() {
    if !browser_available() {
        return;
    }
    let dir = temp_dir("ui-values");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    // One tiny CPU profile per pod of one service, 20,000 pods, pushed in requests of 2,500
    // series (a push request holds many series).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    b.set_period(("cpu", "nanoseconds"), 10_000_000);
    b.set_time(now - 60_000_000_000, 10_000_000_000);
    b.add_folded_stack(&["main", "work"], &[10_000_000]);
    let pprof = ember_pprof::encode(&b.build());
    const PODS: usize = 20_000;
    for chunk in 0..PODS / 2_500 {
        let mut body = Vec::new();
        for i in chunk * 2_500..(chunk + 1) * 2_500 {
            let pod = format!("pod-{i:05}");
            body.extend(server_util::push_request(
                &[
                    ("__name__", "process_cpu"),
                    ("service_name", "many-pods"),
                    ("pod", &pod),
                ],
                &pprof,
            ));
        }
        let (status, answer) = server.request(
            "POST",
            "/push.v1.PusherService/Push",
            &[("content-type", "application/proto")],
            &body,
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }
    // Pods are named pod-00000 to pod-19999: "pod-123" is in pod-12300..pod-12399 alone.
    let args = serde_json::json!({
        "base": format!("http://{}", server.addr),
        "service": "many-pods",
        "label": "pod",
        "count": PODS,
        "typed": "pod-123",
        "matching": 100,
        "pick": "pod-12345",
        "screenshots": screenshots(),
    });
    run_script("ui_values.mjs", &args, 7);
    drop(server);
}
