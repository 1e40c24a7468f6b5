//! A real Pyroscope client against the server (run in-process): the `pyroscope-io` Python package (installed
//! by `.ci/setup`) profiles a small Python workload and pushes to the server; the test then
//! queries the server and finds the workload's Python function names.

mod util;

use std::process::Command;

use util::{Server, enc, temp_dir};

const WORKLOAD: &str = r#"
import sys, time
import pyroscope

pyroscope.configure(
    application_name="ember.pyworkload",
    server_address="http://" + sys.argv[1],
    tags={"region": "eu-1"},
)

def ember_hot_function():
    x = 0
    for i in range(200_000):
        x += i * i
    return x

def ember_warm_function():
    return sorted(str(i) for i in range(20_000))

end = time.time() + float(sys.argv[2])
while time.time() < end:
    ember_hot_function()
    ember_warm_function()
pyroscope.shutdown()
"#;

#[test]
fn pyroscope_io_python_client_pushes_and_functions_are_queryable() {
    let probe = Command::new("python3")
        .args(["-c", "import pyroscope"])
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "pyroscope-io is not installed (run .ci/setup): {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("python3 not found: {e}"),
    }
    let dir = temp_dir("pyroscope-io");
    let dir = dir.path();
    let script = dir.join("workload.py");
    std::fs::write(&script, WORKLOAD).unwrap();
    let server = Server::start(&dir.join("data"), &[]);
    let out = Command::new("timeout")
        .args(["120", "python3"])
        .arg(&script)
        .args([server.addr.as_str(), "4"])
        .output()
        .expect("run python workload");
    assert!(
        out.status.success(),
        "workload failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let selector = enc("{service_name=\"ember.pyworkload\", region=\"eu-1\"}");
    let (s, folded) = server.get(
        &format!("/api/v1/query?query={selector}&type=cpu&from=now-1h&format=folded"),
        &[],
    );
    assert_eq!(s, 200, "{folded}");
    for f in ["ember_hot_function", "ember_warm_function"] {
        assert!(folded.contains(f), "{f} missing from:\n{folded}");
    }
    let hot: i64 = folded
        .lines()
        .filter(|l| l.contains("ember_hot_function"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<i64>().ok())
        .sum();
    assert!(hot > 0);
    // The same data through the Pyroscope render API.
    let v = server.get_json(
        &format!(
            "/pyroscope/render?query={}&from=now-1h&until=now",
            enc("process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"ember.pyworkload\"}")
        ),
        &[],
    );
    let names = v["flamebearer"]["names"].as_array().unwrap();
    assert!(names.iter().any(|n| n == "ember_hot_function"), "{v}");
    let types = server.get_json("/api/v1/profile_types", &[]);
    eprintln!("pyroscope-io pushed profile types {types}; ember_hot_function = {hot} ns");
    drop(server);
}
