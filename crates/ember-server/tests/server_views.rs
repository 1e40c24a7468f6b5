//! The routes of the web UI's call graph and single-profile views, over HTTP (the server
//! in-process on 127.0.0.1:0): `/api/v1/query?format=callgraph` with its pruning parameters,
//! `/api/v1/profiles` and `/api/v1/profile`, their answers checked against the pushed folded
//! profiles, and their errors.

mod util;

use std::collections::BTreeMap;

use util::{Server, enc, temp_dir};

const T0: i64 = 1_700_000_000;

/// Three profiles of `web` ten seconds apart: `(time in s, folded text)`.
fn profiles() -> Vec<(i64, String)> {
    (0..3)
        .map(|k| {
            let text = format!(
                "main;handler;parse {}\nmain;handler;render 50\nmain;gc {}\nmain;log;render 5\n",
                10 * (k + 1),
                20 + k
            );
            (T0 + 10 * k, text)
        })
        .collect()
}

/// The legacy ingest's value of `samples` CPU samples at 100 Hz, in nanoseconds.
fn ns(samples: i64) -> i64 {
    samples * 10_000_000
}

/// A server on a fresh directory holding [`profiles`]; the directory is removed when the
/// returned guard drops (after the server: declare it first).
fn start(name: &str) -> (tempfile::TempDir, Server) {
    let dir = temp_dir(name);
    let server = Server::start(dir.path(), &[]);
    for (at, text) in profiles() {
        let (s, b) = server.request(
            "POST",
            &format!("/ingest?name=web.cpu&from={at}&until={}", at + 10),
            &[],
            text.as_bytes(),
        );
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    }
    (dir, server)
}

#[test]
fn call_graph_route_answers_the_graph_and_checks_its_parameters() {
    let (_dir, server) = start("views-graph");
    let range = format!("from={}&until={}", T0 - 100, T0 + 100);
    let q = enc("{service_name=\"web\"}");
    let g = server.get_json(
        &format!("/api/v1/query?query={q}&{range}&format=callgraph&nodeFraction=0&edgeFraction=0"),
        &[],
    );
    let nodes: BTreeMap<String, (i64, i64)> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let name = n["name"].as_str().unwrap().to_string();
            (
                name,
                (n["self"].as_i64().unwrap(), n["total"].as_i64().unwrap()),
            )
        })
        .collect();
    // Summed over the three profiles: parse 60, render 150 + 15, gc 63.
    let total = ns(60 + 150 + 63 + 15);
    assert_eq!(g["total"].as_i64(), Some(total));
    assert_eq!(nodes["main"], (0, total));
    assert_eq!(nodes["render"], (ns(165), ns(165)));
    assert_eq!(nodes["handler"], (0, ns(210)));
    // `render` is reached from two places: one node, two edges into it.
    let names: Vec<&str> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    let id = |n: &str| names.iter().position(|x| *x == n).unwrap() as i64;
    let into_render: BTreeMap<&str, i64> = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["to"].as_i64() == Some(id("render")))
        .map(|e| {
            (
                names[e["from"].as_i64().unwrap() as usize],
                e["weight"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        into_render,
        BTreeMap::from([("handler", ns(150)), ("log", ns(15))])
    );
    // The node count keeps the heaviest; the rest is counted as dropped.
    let two = server.get_json(
        &format!("/api/v1/query?query={q}&{range}&format=callgraph&nodeCount=2"),
        &[],
    );
    assert_eq!(two["nodes"].as_array().unwrap().len(), 2);
    // main, handler, parse, render, gc, log: four dropped.
    assert_eq!(two["dropped"]["nodes"].as_i64(), Some(4));
    // Focus: only the stacks through main;log.
    let focus = enc("[\"main\",\"log\"]");
    let f = server.get_json(
        &format!("/api/v1/query?query={q}&{range}&format=callgraph&focus={focus}"),
        &[],
    );
    assert_eq!(f["total"].as_i64(), Some(ns(15)));
    for bad in ["nodeFraction=2", "edgeFraction=x", "nodeCount=-1"] {
        let (s, body) = server.get(
            &format!("/api/v1/query?query={q}&{range}&format=callgraph&{bad}"),
            &[],
        );
        assert_eq!(s, 400, "{bad}: {body}");
    }
    // A diff has no call graph.
    let (s, _) = server.get(
        &format!("/api/v1/diff?query={q}&{range}&format=callgraph"),
        &[],
    );
    assert_eq!(s, 501);
    drop(server);
}

#[test]
fn profiles_are_listed_and_read_back_one_by_one() {
    let (_dir, server) = start("views-profiles");
    let range = format!("from={}&until={}", T0 - 100, T0 + 100);
    let q = enc("{service_name=\"web\"}");
    let list = server.get_json(&format!("/api/v1/profiles?query={q}&{range}"), &[]);
    assert_eq!(list["matched"].as_i64(), Some(3));
    let listed = list["profiles"].as_array().unwrap();
    let want = profiles();
    assert_eq!(listed.len(), 3);
    for (p, (at, text)) in listed.iter().zip(want.iter().rev()) {
        let samples: i64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
            .sum();
        assert_eq!(
            p["time"].as_str(),
            Some((at * 1_000_000_000).to_string().as_str())
        );
        assert_eq!(p["timeMs"].as_i64(), Some(at * 1000));
        assert_eq!(p["total"].as_i64(), Some(ns(samples)));
        assert_eq!(p["labels"]["service_name"].as_str(), Some("web"));
        // Read back alone: its own stacks, not the others'.
        let path = format!(
            "/api/v1/profile?series={}&time={}",
            enc(p["series"].as_str().unwrap()),
            p["time"].as_str().unwrap()
        );
        let fb = server.get_json(&path, &[]);
        assert_eq!(fb["flamebearer"]["numTicks"].as_i64(), Some(ns(samples)));
        assert_eq!(fb["profile"]["total"].as_i64(), Some(ns(samples)));
        let (s, folded) = server.get(&format!("{path}&format=folded"), &[]);
        assert_eq!(s, 200);
        let got: BTreeMap<&str, i64> = folded
            .lines()
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k, v.parse().unwrap())
            })
            .collect();
        let expected: BTreeMap<&str, i64> = text
            .lines()
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k, ns(v.parse().unwrap()))
            })
            .collect();
        assert_eq!(got, expected);
    }
    // Bounded: the newest one, and the count of all.
    let one = server.get_json(&format!("/api/v1/profiles?query={q}&{range}&limit=1"), &[]);
    assert_eq!(one["profiles"].as_array().unwrap().len(), 1);
    assert_eq!(
        one["profiles"][0]["timeMs"].as_i64(),
        Some((T0 + 20) * 1000)
    );
    assert_eq!(one["matched"].as_i64(), Some(3));
    // Errors: no profile then (404), a series that is not `=` labels (400), no time (400).
    let series = enc(listed[0]["series"].as_str().unwrap());
    let (s, _) = server.get(&format!("/api/v1/profile?series={series}&time=1"), &[]);
    assert_eq!(s, 404);
    let (s, _) = server.get(
        &format!("/api/v1/profile?series={}&time=1", enc("{a=~\"x\"}")),
        &[],
    );
    assert_eq!(s, 400);
    let (s, _) = server.get(&format!("/api/v1/profile?series={series}"), &[]);
    assert_eq!(s, 400);
    let (s, _) = server.get(&format!("/api/v1/profiles?query={q}&limit=x"), &[]);
    assert_eq!(s, 400);
    drop(server);
}
