//! One unit vocabulary (issue 14, item 7): a flame graph of one profile names its values the
//! same way whoever draws it: `ember flamegraph`, `ember diff --svg`, and the server's SVG
//! (`ember query --format svg`). CPU time is `nanoseconds`, heap bytes `bytes`, a count its
//! sample type; folded stacks count `samples`.

mod server_util;

use std::process::Command;

const EMBER: &str = env!("CARGO_BIN_EXE_ember");

fn ember(args: &[&str]) -> String {
    let out = Command::new(EMBER).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ember {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The root frame's tooltip: `all (1,234 nanoseconds, 100%)`.
fn root_title(svg: &str) -> String {
    let start = svg
        .find("<title>all (")
        .unwrap_or_else(|| panic!("no root frame: {}", &svg[..svg.len().min(400)]));
    let end = start + svg[start..].find("</title>").unwrap();
    svg[start + "<title>".len()..end].to_string()
}

/// The value name inside a root tooltip: `all (1,234 nanoseconds, 100%)` → `nanoseconds`.
fn unit_of(title: &str) -> &str {
    title
        .trim_start_matches("all (")
        .split(' ')
        .nth(1)
        .unwrap()
        .trim_end_matches(',')
}

#[test]
fn every_flame_graph_names_values_alike() {
    let dir = server_util::temp_dir("units-vocabulary");
    let dir = dir.path();
    let server = server_util::Server::start(&dir.join("data"), &[]);
    let url = format!("http://{}", server.endpoint.addr);
    let cpu = server_util::corpus("pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz");
    let heap = server_util::corpus("pyroscope/pkg/og/convert/pprof/testdata/heap.pb.gz");
    let cpu = cpu.to_str().unwrap();
    let heap = heap.to_str().unwrap();
    for (file, service) in [(cpu, "units-cpu"), (heap, "units-heap")] {
        ember(&["push", file, "--service", service, "--server", &url]);
    }
    for (file, service, sample_type, unit) in [
        (cpu, "units-cpu", "cpu", "nanoseconds"),
        (cpu, "units-cpu", "samples", "samples"),
        (heap, "units-heap", "inuse_space", "bytes"),
        (heap, "units-heap", "alloc_objects", "alloc_objects"),
    ] {
        let drawn = root_title(&ember(&["flamegraph", "--sample-type", sample_type, file]));
        let served = root_title(&ember(&[
            "query",
            &format!("{{service_name=\"{service}\"}}"),
            "--type",
            sample_type,
            "--from",
            "0",
            "--format",
            "svg",
            "--server",
            &url,
        ]));
        // The same profile: the same total in the same words.
        assert_eq!(drawn, served, "{sample_type}");
        assert_eq!(unit_of(&drawn), unit, "{drawn}");
        let diffed = root_title(&ember(&[
            "diff",
            "--svg",
            "--sample-index",
            sample_type,
            file,
            file,
        ]));
        assert_eq!(unit_of(&diffed), unit, "{diffed}");
        let served_diff = root_title(&ember(&[
            "query",
            &format!("{{service_name=\"{service}\"}}"),
            "--type",
            sample_type,
            "--from",
            "0",
            "--baseline-from",
            "0",
            "--format",
            "svg",
            "--server",
            &url,
        ]));
        assert_eq!(unit_of(&served_diff), unit, "{served_diff}");
    }
    // Folded stacks carry no unit: samples, as flamegraph.pl says.
    let folded = dir.join("a.folded");
    std::fs::write(&folded, "main;work 3\nmain 1\n").unwrap();
    let drawn = root_title(&ember(&["flamegraph", folded.to_str().unwrap()]));
    assert_eq!(drawn, "all (4 samples, 100%)");
}
