//! `ember query` against a real running `ember server`, and the `/api/v1/diff` route behind
//! `ember query --baseline`: merged selections as folded/pprof/SVG/top, and the diff of two
//! selections as pprof (right minus left), 3-column folded and a differential SVG.

mod server_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use server_util::{Server, corpus, enc, push_request, temp_dir};

const P: &str = "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz";
const Q: &str = "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof";

/// The corpus profile's cpu stacks as the server names frames (function names).
fn cpu_stacks(path: &Path) -> BTreeMap<String, i64> {
    let p = ember_pprof::read_file(path).unwrap();
    let i = ember_pprof::sample_index(&p, Some("cpu")).unwrap();
    ember_pprof::folded_stacks(&p, i).into_iter().collect()
}

fn add(into: &mut BTreeMap<String, i64>, from: &BTreeMap<String, i64>, times: i64) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += v * times;
    }
    into.retain(|_, v| *v != 0);
}

fn parse_folded(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let (stack, v) = l.rsplit_once(' ').expect("folded line");
        *out.entry(stack.to_string()).or_insert(0) += v.parse::<i64>().expect("count");
    }
    out
}

fn ember(args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .output()
        .expect("run ember");
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn push(server: &Server, pod: &str, path: &Path) {
    let body = push_request(
        &[("service_name", "cli-app"), ("pod", pod)],
        &std::fs::read(path).unwrap(),
    );
    let (s, b) = server.push(&body);
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
}

#[test]
fn ember_query_cli_and_diff_against_a_running_server() {
    let dir = temp_dir("query-cli");
    let dir = dir.path();
    let server = Server::start(&dir.join("data"), &[]);
    let url = format!("http://{}", server.addr);
    let (p, q) = (corpus(P), corpus(Q));
    // base: P once; new: P twice and Q once.
    push(&server, "base", &p);
    push(&server, "new", &p);
    push(&server, "new", &p);
    push(&server, "new", &q);
    let (sp, sq) = (cpu_stacks(&p), cpu_stacks(&q));
    let mut base = BTreeMap::new();
    add(&mut base, &sp, 1);
    let mut new = BTreeMap::new();
    add(&mut new, &sp, 2);
    add(&mut new, &sq, 1);

    let sel_new = r#"{service_name="cli-app", pod="new"}"#;
    let sel_base = r#"{service_name="cli-app", pod="base"}"#;
    let common = [
        "--type", "cpu", "--from", "0", "--until", "now", "--server", &url,
    ];

    // Merged selection: folded, pprof, svg, top.
    let (ok, out, err) = ember(&[&["query", sel_new, "--format", "folded"], &common[..]].concat());
    assert!(ok, "{err}");
    assert_eq!(parse_folded(&String::from_utf8(out).unwrap()), new);

    let pprof_path = dir.join("new.pb.gz");
    let args = [
        &["query", sel_new, "--format", "pprof", "-o"],
        &[pprof_path.to_str().unwrap()][..],
        &common[..],
    ]
    .concat();
    let (ok, _, err) = ember(&args);
    assert!(ok, "{err}");
    let merged = ember_pprof::read_file(&pprof_path).unwrap();
    let got: BTreeMap<String, i64> = ember_pprof::folded_stacks(&merged, 0).into_iter().collect();
    assert_eq!(got, new);

    let (ok, svg, err) = ember(&[&["query", sel_new, "--format", "svg"], &common[..]].concat());
    assert!(ok, "{err}");
    let svg = String::from_utf8(svg).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg"),
        "{}",
        &svg[..200]
    );
    assert!(
        !svg.contains("%; "),
        "a plain flame graph has no delta tooltips"
    );

    let (ok, top, err) = ember(&[&["query", sel_new], &common[..]].concat());
    assert!(ok, "{err}");
    let top = String::from_utf8(top).unwrap();
    let heaviest_leaf = new
        .iter()
        .max_by_key(|(_, v)| **v)
        .map(|(k, _)| k.rsplit(';').next().unwrap().to_string())
        .unwrap();
    assert!(top.contains("flat%"), "{top}");
    assert!(
        top.contains(&heaviest_leaf),
        "{heaviest_leaf} not in\n{top}"
    );

    // Diff: pprof is new minus base, exactly.
    let mut expected = new.clone();
    add(&mut expected, &base, -1);
    let diff_path = dir.join("diff.pb.gz");
    let args = [
        &[
            "query",
            sel_new,
            "--baseline",
            sel_base,
            "--format",
            "pprof",
        ],
        &["-o", diff_path.to_str().unwrap()][..],
        &common[..],
    ]
    .concat();
    let (ok, _, err) = ember(&args);
    assert!(ok, "{err}");
    let diff = ember_pprof::read_file(&diff_path).unwrap();
    let got: BTreeMap<String, i64> = ember_pprof::folded_stacks(&diff, 0).into_iter().collect();
    assert_eq!(got, expected);

    // Diff as 3-column folded: baseline column, then this selection's column.
    let (ok, out, err) = ember(
        &[
            &[
                "query",
                sel_new,
                "--baseline",
                sel_base,
                "--format",
                "folded",
            ],
            &common[..],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    let (mut left, mut right) = (BTreeMap::new(), BTreeMap::new());
    for l in String::from_utf8(out).unwrap().lines() {
        let mut parts = l.rsplitn(3, ' ');
        let b: i64 = parts.next().unwrap().parse().unwrap();
        let a: i64 = parts.next().unwrap().parse().unwrap();
        let stack = parts.next().unwrap().to_string();
        if a != 0 {
            left.insert(stack.clone(), a);
        }
        if b != 0 {
            right.insert(stack, b);
        }
    }
    assert_eq!(left, base);
    assert_eq!(right, new);

    // Diff as a differential flame graph: tooltips carry the delta percentage.
    let (ok, svg, err) = ember(
        &[
            &["query", sel_new, "--baseline", sel_base, "--format", "svg"],
            &common[..],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    let svg = String::from_utf8(svg).unwrap();
    assert!(
        svg.contains("<svg") && svg.contains("%; +"),
        "no delta tooltips"
    );

    // The same route over HTTP, comparing two time ranges of one selector: the corpus
    // profiles are years old, so "now-1h" is empty and everything counts as removed.
    let (s, text) = server.get(
        &format!(
            "/api/v1/diff?query={}&type=cpu&leftFrom=0&leftUntil=now&rightFrom=now-1h&rightUntil=now&format=folded",
            enc(sel_new)
        ),
        &[],
    );
    assert_eq!(s, 200, "{text}");
    assert!(text.lines().all(|l| l.ends_with(" 0")), "{text}");
    let (s, json) = server.get(
        &format!(
            "/api/v1/diff?leftQuery={}&rightQuery={}&type=cpu&from=0&format=flamebearer",
            enc(sel_base),
            enc(sel_new)
        ),
        &[],
    );
    assert_eq!(s, 200, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["metadata"]["format"], "double");
    assert_eq!(v["leftTicks"].as_i64().unwrap(), base.values().sum::<i64>());
    assert_eq!(v["rightTicks"].as_i64().unwrap(), new.values().sum::<i64>());

    // Errors are clear: nothing matches, a bad selector, an unknown format.
    let (ok, _, err) = ember(
        &[
            &["query", r#"{service_name="nope"}"#, "--format", "folded"],
            &common[..],
        ]
        .concat(),
    );
    assert!(
        !ok && err.contains("404") && err.contains("no profiles"),
        "{err}"
    );
    let (ok, _, err) = ember(
        &[
            &["query", "{service_name=", "--format", "folded"],
            &common[..],
        ]
        .concat(),
    );
    assert!(!ok && err.contains("400"), "{err}");
    let (s, body) = server.get("/api/v1/diff?query=%7B%7D&format=png", &[]);
    assert_eq!(s, 400, "{body}");
    let (ok, _, err) = ember(&["query", "{}", "--server", "http://127.0.0.1:1"]);
    assert!(!ok && err.contains("cannot connect"), "{err}");

    // --help documents every option with its default.
    let (ok, help, _) = ember(&["query", "--help"]);
    assert!(ok);
    let help = String::from_utf8(help).unwrap();
    for needle in [
        "--type",
        "--from",
        "[default: now-1h]",
        "--until",
        "[default: now]",
        "--format",
        "[default: top]",
        "--server",
        "[default: http://127.0.0.1:4040]",
        "--baseline",
        "--output",
    ] {
        assert!(
            help.contains(needle),
            "{needle} missing from --help:\n{help}"
        );
    }
    drop(server);
}

#[test]
fn server_help_states_the_listen_and_data_dir_defaults() {
    let (ok, stdout, stderr) = ember(&["server", "--help"]);
    assert!(ok, "{stderr}");
    let help = String::from_utf8_lossy(&stdout);
    for default in ["[default: 127.0.0.1:4040]", "[default: ./ember-data]"] {
        assert!(help.contains(default), "{default} missing from:\n{help}");
    }
}
