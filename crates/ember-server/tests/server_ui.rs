//! What the web UI asks of the server, over HTTP: the page at `/` (or, in a build without the
//! `ui` feature, a plain-text note instead of an empty 404: `cargo test -p ember-server
//! --no-default-features --test server_ui`), the speedscope export and the diff's `focus`,
//! and the binary flame graph (`format=flamebearer-bin`) the page draws.

mod util;

use util::{Server, enc, temp_dir};

#[test]
fn the_page_or_a_note_that_the_ui_was_left_out() {
    let dir = temp_dir("ui-page");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    let (status, body) = server.get("/", &[]);
    if cfg!(feature = "ui") {
        assert_eq!(status, 200);
        assert!(body.contains("<canvas"), "{body}");
    } else {
        assert_eq!(status, 404);
        assert!(
            body.contains("without its web UI") && body.contains("/api/v1/query"),
            "{body}"
        );
    }
    // The API answers either way.
    assert_eq!(server.get("/api/v1/profile_types", &[]).0, 200);
}

fn ingest(server: &Server, at: i64, body: &str) {
    let path = format!(
        "/ingest?name=shop.cpu&format=folded&from={at}&until={}",
        at + 10
    );
    let (s, b) = server.request("POST", &path, &[], body.as_bytes());
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
}

#[test]
fn speedscope_export_and_a_focused_diff() {
    let dir = temp_dir("ui-export");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    ingest(
        &server,
        1_700_000_000,
        "main;a;x 10\nmain;a;y 5\nmain;b 20\n",
    );
    ingest(
        &server,
        1_700_000_100,
        "main;a;x 30\nmain;a;z 5\nmain;b 20\n",
    );
    let sel = enc("{service_name=\"shop\"}");
    let file = server.get_json(
        &format!("/api/v1/query?query={sel}&from=1699999000&until=1700001000&format=speedscope"),
        &[],
    );
    assert_eq!(
        file["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let weights: f64 = file["profiles"][0]["weights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_f64().unwrap())
        .sum();
    // 90 samples at the legacy default of 100 Hz: 10 ms each, in nanoseconds.
    assert_eq!(weights, 90.0 * 1e7);
    assert_eq!(file["profiles"][0]["endValue"].as_f64(), Some(90.0 * 1e7));
    // The diff focused on main;a: both sides' subtree only, cut after the focus.
    let sides =
        "leftFrom=1699999000&leftUntil=1700000050&rightFrom=1700000050&rightUntil=1700001000";
    let focus = enc(r#"["main","a"]"#);
    let fb = server.get_json(
        &format!("/api/v1/diff?query={sel}&{sides}&focus={focus}&maxNodes=5"),
        &[],
    );
    assert_eq!(
        (fb["leftTicks"].as_i64(), fb["rightTicks"].as_i64()),
        (Some(15 * 10_000_000), Some(35 * 10_000_000)),
        "{fb}"
    );
    let names: Vec<&str> = fb["flamebearer"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(!names.contains(&"b"), "{names:?}");
    let ss = server.get_json(
        &format!("/api/v1/diff?query={sel}&{sides}&focus={focus}&format=speedscope"),
        &[],
    );
    let names: Vec<&str> = ss["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{ss}");
    let (status, body) = server.get(
        &format!("/api/v1/diff?query={sel}&{sides}&focus=main;a"),
        &[],
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("focus"), "{body}");
}

/// A `flamebearer-bin` answer read back into the JSON flamebearer's shape: the header, the
/// names, and per depth the levels (`single`: `[x offset, total, self, name]` per node;
/// `double`: `[left x, left total, left self, right x, right total, right self, name]`).
fn read_binary(bytes: &[u8]) -> (serde_json::Value, Vec<String>, Vec<Vec<i64>>) {
    assert_eq!(&bytes[..4], b"EMFG", "magic");
    let h = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + h]).unwrap();
    let counts: Vec<usize> = header["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap() as usize)
        .collect();
    let n: usize = counts.iter().sum();
    let sides = if header["format"] == "double" { 2 } else { 1 };
    let mut at = (8 + h).div_ceil(8) * 8;
    // Value columns: `u32` multiples of `scale`, or `f64`.
    let scale = header["scale"].as_f64().unwrap();
    let width = if header["values"] == "u32" { 4 } else { 8 };
    let mut f64s = || {
        let v: Vec<f64> = bytes[at..at + width * n]
            .chunks(width)
            .map(|c| match width {
                4 => f64::from(u32::from_le_bytes(c.try_into().unwrap())) * scale,
                _ => f64::from_le_bytes(c.try_into().unwrap()),
            })
            .collect();
        at += width * n;
        v
    };
    let floats: Vec<Vec<f64>> = (0..2 * sides).map(|_| f64s()).collect();
    let mut u32s = |k: usize| {
        let v: Vec<u32> = bytes[at..at + 4 * k]
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        at += 4 * k;
        v
    };
    let (name, parent) = (u32s(n), u32s(n));
    let lengths = u32s(header["names"].as_u64().unwrap() as usize);
    let text: Vec<u16> = std::str::from_utf8(&bytes[at..])
        .unwrap()
        .encode_utf16()
        .collect();
    let mut names = Vec::new();
    let mut from = 0;
    for len in lengths {
        names.push(String::from_utf16(&text[from..from + len as usize]).unwrap());
        from += len as usize;
    }
    // Per side, each node's absolute x: its parent's, plus its earlier siblings' totals.
    let mut levels: Vec<Vec<i64>> = Vec::new();
    let (mut start, mut up) = (0, 0);
    let mut xs = vec![vec![0.0; n]; sides];
    for (depth, &count) in counts.iter().enumerate() {
        let mut row = Vec::new();
        let mut ends = vec![0.0; sides];
        for i in start..start + count {
            for side in 0..sides {
                let total = &floats[2 * side];
                let x = if depth == 0 {
                    0.0
                } else if i > start && parent[i] == parent[i - 1] {
                    xs[side][i - 1] + total[i - 1]
                } else {
                    xs[side][up + parent[i] as usize]
                };
                xs[side][i] = x;
                row.extend([
                    (x - ends[side]) as i64,
                    total[i] as i64,
                    floats[2 * side + 1][i] as i64,
                ]);
                ends[side] = x + total[i];
            }
            row.push(i64::from(name[i]));
        }
        levels.push(row);
        up = start;
        start += count;
    }
    (header, names, levels)
}

/// The JSON flamebearer's names and levels.
fn json_levels(fb: &serde_json::Value) -> (Vec<String>, Vec<Vec<i64>>) {
    let names = fb["flamebearer"]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let levels = fb["flamebearer"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            l.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect()
        })
        .collect();
    (names, levels)
}

#[test]
fn the_binary_flame_graph_is_the_flamebearer_in_columns() {
    let dir = temp_dir("ui-binary");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    // Names of every width in UTF-8 and UTF-16 (the page slices names by UTF-16 length).
    ingest(
        &server,
        1_700_000_000,
        "main;a;x 10\nmain;a;y 5\nmain;b 20\nmain;café::crème;𝄞::clef 7\n",
    );
    ingest(
        &server,
        1_700_000_100,
        "main;a;x 30\nmain;a;z 5\nmain;b 20\nmain;café::crème 3\n",
    );
    let sel = enc("{service_name=\"shop\"}");
    let range = "from=1699999000&until=1700001000";
    let sides =
        "leftFrom=1699999000&leftUntil=1700000050&rightFrom=1700000050&rightUntil=1700001000";
    let cases = [
        format!("/api/v1/query?query={sel}&{range}&maxNodes=0"),
        // Cut at the node limit: the same "other" nodes in both.
        format!("/api/v1/query?query={sel}&{range}&maxNodes=3"),
        format!(
            "/api/v1/query?query={sel}&{range}&focus={}",
            enc(r#"["main","a"]"#)
        ),
        format!("/api/v1/diff?query={sel}&{sides}&maxNodes=0"),
        format!("/api/v1/diff?query={sel}&{sides}&maxNodes=4"),
    ];
    for path in &cases {
        let fb = server.get_json(&format!("{path}&format=flamebearer"), &[]);
        let (status, bytes) =
            server.request("GET", &format!("{path}&format=flamebearer-bin"), &[], b"");
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&bytes));
        let (header, names, levels) = read_binary(&bytes);
        let (want_names, want_levels) = json_levels(&fb);
        assert_eq!(names, want_names, "{path}");
        assert_eq!(levels, want_levels, "{path}");
        assert_eq!(header["numTicks"], fb["flamebearer"]["numTicks"], "{path}");
        assert_eq!(header["maxSelf"], fb["flamebearer"]["maxSelf"], "{path}");
        assert_eq!(header["format"], fb["metadata"]["format"], "{path}");
        assert_eq!(header["units"], fb["metadata"]["units"], "{path}");
        if header["format"] == "double" {
            assert_eq!(header["leftTicks"], fb["leftTicks"], "{path}");
            assert_eq!(header["rightTicks"], fb["rightTicks"], "{path}");
        }
    }
    assert!(
        read_binary(
            &server
                .request(
                    "GET",
                    &format!("{}&format=flamebearer-bin", cases[1]),
                    &[],
                    b""
                )
                .1
        )
        .1
        .contains(&"other".to_string()),
        "the cut graph has an other node"
    );
    // An empty selection is an empty graph, as in JSON; an unknown format names the new one.
    let (status, bytes) = server.request(
        "GET",
        &format!(
            "/api/v1/query?query={}&{range}&format=flamebearer-bin",
            enc("{service_name=\"none\"}")
        ),
        &[],
        b"",
    );
    assert_eq!(status, 200);
    assert_eq!(read_binary(&bytes).0["numTicks"], 0);
    let (status, body) = server.get(
        &format!("/api/v1/query?query={sel}&format=flamebearer-binary"),
        &[],
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("flamebearer-bin"), "{body}");
}

#[test]
fn a_min_share_leaves_out_the_thin_nodes_and_bad_ones_are_refused() {
    let dir = temp_dir("ui-min-share");
    let dir = dir.path();
    let server = Server::start(dir, &[]);
    ingest(
        &server,
        1_700_000_000,
        "main;a;x 10\nmain;a;y 1\nmain;b 20\n",
    );
    let base = format!(
        "/api/v1/query?query={}&from=1699999000&until=1700001000&format=flamebearer-bin&maxNodes=0",
        enc("{service_name=\"shop\"}")
    );
    let header = |bytes: &[u8]| -> serde_json::Value {
        let h = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
        serde_json::from_slice(&bytes[8..8 + h]).unwrap()
    };
    // 10 % of 31: `main;a;y` (1) goes; the whole tree has 6 nodes (the root included).
    let (status, bytes) = server.request("GET", &format!("{base}&minShare=0.1"), &[], b"");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let h = header(&bytes);
    assert_eq!(
        (h["x"].as_bool(), h["nodes"].as_u64()),
        (Some(true), Some(6))
    );
    assert_eq!(h["levels"], serde_json::json!([1, 1, 2, 1]));
    // Without it, the whole tree and no x column.
    let (status, bytes) = server.request("GET", &base, &[], b"");
    assert_eq!(status, 200);
    let h = header(&bytes);
    assert_eq!(h["levels"], serde_json::json!([1, 1, 2, 2]));
    assert!(h.get("x").is_none());
    for bad in ["abc", "2", "-0.1", "NaN"] {
        let (status, body) = server.get(&format!("{base}&minShare={bad}"), &[]);
        assert_eq!(status, 400, "minShare={bad}: {body}");
        assert!(
            body.contains("minShare") && body.contains("from 0 to 1"),
            "{body}"
        );
    }
}
