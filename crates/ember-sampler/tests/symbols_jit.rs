//! JIT perf maps (`/tmp/perf-PID.map`) from the real runtimes: Node (`--perf-basic-prof`),
//! the JVM (`-XX:+DumpPerfMapAtExit`, written when it exits) and CPython 3.12+ (`-X perf`,
//! its trampolines). Each runtime runs a hot function for a second under `--call-graph
//! auto`; the function's name must come from the runtime's map (the frame's module is the
//! map file) in most of the runtime's samples.
//!
//! A test whose runtime is not installed says so and passes: `node` and `javac`/`java`
//! come from Debian packages (.ci/setup installs them); CPython 3.12+ is no Debian 12
//! package, so it is looked for on the PATH (`python3.13`, `python3.12`) and among pyenv's
//! versions. Needs perf_event_open (root in CI).

use ember_sampler::{CallGraph, Options, Target};
use ember_samples::{Recording, Resolver, Symbolizer};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

fn work_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("symbols-jit-{test}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The program `name` if it runs (`--version` or `-version` succeeds).
fn runnable(name: &str, version_flag: &str) -> Option<PathBuf> {
    let ok = Command::new(name)
        .arg(version_flag)
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then(|| PathBuf::from(name))
}

fn record(argv: Vec<OsString>) -> Recording {
    let mut opts = Options::new(Target::Command(argv));
    opts.call_graph = CallGraph::Auto;
    opts.frequency = 499;
    ember_sampler::record(&opts, |_| {}).expect("recording (run as root)")
}

/// Samples of the recording, those with a frame whose name contains `function` and whose
/// module is a perf map, and an example stack (root first) of the others.
fn jit_named(rec: &Recording, function: &str) -> (u64, u64, Option<String>) {
    let mut sym = Symbolizer::new();
    let mut resolver = Resolver::new(rec, &mut sym);
    let (mut all, mut named, mut example) = (0, 0, None);
    let mut maps = Vec::new();
    for (key, value) in rec.stacks() {
        all += value.count;
        let frames: Vec<_> = key.frames.iter().map(|f| resolver.resolve(f)).collect();
        let from_map = frames.iter().find(|f| {
            f.name.contains(function)
                && f.module.starts_with("/tmp/perf-")
                && f.module.ends_with(".map")
        });
        match from_map {
            Some(f) => {
                named += value.count;
                maps.push(f.module.to_string());
            }
            None if example.is_none() => {
                let names: Vec<&str> = frames.iter().rev().map(|f| &*f.name).collect();
                example = Some(names.join(";"));
            }
            None => {}
        }
    }
    maps.sort();
    maps.dedup();
    for map in maps {
        let _ = std::fs::remove_file(map);
    }
    (all, named, example)
}

/// At least a third of the samples name the hot function from the map (the rest are the
/// runtime starting, compiling and exiting).
fn check(runtime: &str, rec: &Recording, function: &str) {
    let (all, named, example) = jit_named(rec, function);
    eprintln!("{runtime}: {named}/{all} samples name {function} from a perf map");
    assert!(
        all > 50 && named * 3 >= all,
        "{runtime}: {named}/{all} samples name {function} from the perf map; e.g. {example:?}"
    );
}

#[test]
fn node_perf_basic_prof_names_js_functions() {
    let Some(node) = runnable("node", "--version") else {
        eprintln!("SKIPPED: node is not installed (apt-get install nodejs)");
        return;
    };
    let dir = work_dir("node");
    let script = dir.join("hot.js");
    std::fs::write(
        &script,
        "function emberHotLoop(n) { let x = 0; for (let i = 0; i < n; i++) { x = (x * 31 + i) % 1000003; } return x; }\n\
         const end = Date.now() + 1000; let acc = 0;\n\
         while (Date.now() < end) acc += emberHotLoop(100000);\n\
         console.log(acc);\n",
    )
    .unwrap();
    // --perf-basic-prof also writes V8's log, by default as isolate-*.log in the working
    // directory (the crate's source folder under cargo test): keep it in the test's folder.
    let mut logfile = OsString::from("--logfile=");
    logfile.push(dir.join("v8.log"));
    let rec = record(vec![
        node.into(),
        "--perf-basic-prof".into(),
        logfile,
        "--no-logfile-per-isolate".into(),
        script.into(),
    ]);
    check("node", &rec, "emberHotLoop");
}

#[test]
fn jvm_perf_map_at_exit_names_java_methods() {
    let (Some(javac), Some(java)) = (runnable("javac", "-version"), runnable("java", "-version"))
    else {
        eprintln!("SKIPPED: no JDK (apt-get install openjdk-17-jdk-headless)");
        return;
    };
    let dir = work_dir("jvm");
    std::fs::write(
        dir.join("EmberHot.java"),
        "public class EmberHot {\n\
           static long emberHotLoop(long x, int n) {\n\
             for (int i = 0; i < n; i++) { x = (x * 6364136223846793005L + i) ^ (x >>> 29); }\n\
             return x;\n\
           }\n\
           public static void main(String[] args) {\n\
             long end = System.currentTimeMillis() + 1000, acc = 0, seed = 0;\n\
             while (System.currentTimeMillis() < end) acc ^= emberHotLoop(seed++, 100000);\n\
             System.out.println(acc);\n\
           }\n\
         }\n",
    )
    .unwrap();
    let status = Command::new(javac)
        .current_dir(&dir)
        .arg("EmberHot.java")
        .status()
        .unwrap();
    assert!(status.success(), "javac failed");
    let rec = record(vec![
        java.into(),
        "-XX:+UnlockDiagnosticVMOptions".into(),
        "-XX:+DumpPerfMapAtExit".into(),
        "-cp".into(),
        dir.clone().into(),
        "EmberHot".into(),
    ]);
    check("jvm", &rec, "EmberHot.emberHotLoop");
}

/// A CPython of version 3.12 or later (the first with `-X perf`).
fn python_with_perf_support() -> Option<PathBuf> {
    for name in ["python3.14", "python3.13", "python3.12"] {
        if let Some(p) = runnable(name, "--version") {
            return Some(p);
        }
    }
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")))?;
    let mut versions: Vec<PathBuf> = std::fs::read_dir(root.join("versions"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let mut parts = name.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
            (parts.next(), parts.next()) >= (Some(3), Some(12))
        })
        .map(|p| p.join("bin/python3"))
        .filter(|p| p.is_file())
        .collect();
    versions.sort();
    versions.pop()
}

#[test]
fn cpython_x_perf_names_python_functions() {
    let Some(python) = python_with_perf_support() else {
        eprintln!(
            "SKIPPED: no CPython 3.12 or later (-X perf); Debian 12 packages 3.11 only, \
             pyenv install 3.12 provides one"
        );
        return;
    };
    let dir = work_dir("python");
    let script = dir.join("hot.py");
    std::fs::write(
        &script,
        "import time\n\
         def ember_hot_loop(n):\n\
         \x20   x = 0\n\
         \x20   for i in range(n):\n\
         \x20       x = (x * 31 + i) % 1000003\n\
         \x20   return x\n\
         end = time.time() + 1.0\n\
         acc = 0\n\
         while time.time() < end:\n\
         \x20   acc += ember_hot_loop(20000)\n\
         print(acc)\n",
    )
    .unwrap();
    eprintln!("python: {}", python.display());
    let rec = record(vec![
        python.into(),
        "-X".into(),
        "perf".into(),
        script.into(),
    ]);
    check("python", &rec, "py::ember_hot_loop");
}
