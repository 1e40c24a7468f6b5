//! What the web UI asks of the server, over HTTP: the page at `/` (or, in a build without the
//! `ui` feature, a plain-text note instead of an empty 404: `cargo test -p ember-server
//! --no-default-features --test server_ui`), the speedscope export and the diff's `focus`.

mod util;

use util::{Server, enc, temp_dir};

#[test]
fn the_page_or_a_note_that_the_ui_was_left_out() {
    let dir = temp_dir("ui-page");
    let server = Server::start(&dir, &[]);
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
    let _ = std::fs::remove_dir_all(&dir);
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
    let server = Server::start(&dir, &[]);
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
    let _ = std::fs::remove_dir_all(&dir);
}
