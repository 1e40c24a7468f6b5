//! `ember top` and `ember convert` over several inputs: the merge agrees with
//! `go tool pprof -top a b ...`, survives a round trip through `ember convert`, sums folded
//! stacks, names the file at fault on every error, never leaves a half-written output, and
//! reads thousands of inputs in memory that follows the merged result, not the inputs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

fn pyroscope(rel: &str) -> PathBuf {
    corpora().join("pyroscope/pkg").join(rel)
}

/// Four Go CPU profiles (samples/count, cpu/nanoseconds) from different programs.
fn go_cpu() -> Vec<PathBuf> {
    [
        "og/convert/pprof/testdata/cpu.pb.gz",
        "og/convert/testdata/cpu.pprof",
        "pprof/testdata/go.cpu.labels.pprof",
        "og/convert/pprof/testdata/cpu-exemplars.pb.gz",
    ]
    .iter()
    .map(|p| pyroscope(p))
    .collect()
}

/// Four Go heap profiles (alloc/inuse objects/space), one of them a delta with negative values.
fn go_heap() -> Vec<PathBuf> {
    [
        "og/convert/pprof/testdata/heap.pb.gz",
        "og/convert/pprof/testdata/req_5.pprof",
        "pprof/testdata/heap",
        "pprof/testdata/heap_delta",
    ]
    .iter()
    .map(|p| pyroscope(p))
    .collect()
}

/// Every JFR wall-clock profile of `dump2` (wall/nanoseconds, 9 files).
fn jfr_wall() -> Vec<PathBuf> {
    let dir = pyroscope("og/convert/jfr/testdata");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("dump2.jfr.gz.wall_") && name.ends_with(".pb.gz")
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 9, "JFR wall profiles in {}", dir.display());
    files
}

fn ember(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ember")
}

fn args_of(files: &[PathBuf]) -> Vec<&str> {
    files.iter().map(|p| p.to_str().unwrap()).collect()
}

fn stdout_ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn stderr_failed(out: Output, what: &str) -> String {
    assert!(!out.status.success(), "{what}: succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-merge-{name}-"))
        .tempdir()
        .expect("temp dir")
}

fn find_go() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("EMBER_GO").map(PathBuf::from),
        Some(PathBuf::from("/usr/lib/go-1.19/bin/go")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_file())
}

/// `go tool pprof -top` over `files` (merged by Go), or its error output.
fn go_top(go: &Path, args: &[&str], files: &[PathBuf]) -> Result<String, String> {
    let out = Command::new(go)
        .args(["tool", "pprof", "-top", "-symbolize=none"])
        .args(args)
        .args(files)
        .env("TZ", "UTC")
        .env("PPROF_TMPDIR", std::env::temp_dir())
        .output()
        .map_err(|e| format!("running go: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn top_of_several_profiles_matches_go_tool_pprof() {
    let Some(go) = find_go() else {
        if std::env::var_os("CI").is_some() {
            panic!("go (Go 1.19, /usr/lib/go-1.19/bin/go) is required in CI: run .ci/setup");
        }
        eprintln!(
            "\n!!!!!!!! SKIPPING top_of_several_profiles_matches_go_tool_pprof: Go 1.19 not found (install golang-1.19-go) !!!!!!!!\n"
        );
        return;
    };
    let cpu = go_cpu();
    let heap = go_heap();
    let twice = vec![cpu[2].clone(), cpu[2].clone()];
    let scripting = vec![
        pyroscope("pprof/testdata/profile_python"),
        pyroscope("og/convert/pprof/testdata/pyspy-1.pb.gz"),
        pyroscope("pprof/testdata/profile_ruby"),
    ];
    // (inputs, go flags, the same for ember)
    let cases: Vec<(&[PathBuf], Vec<&str>, Vec<&str>)> = vec![
        (&cpu, vec![], vec![]),
        (&cpu, vec!["-sample_index=0"], vec!["--sample-index", "0"]),
        (&cpu, vec!["-cum"], vec!["--sort", "cum"]),
        (&cpu, vec!["-nodecount=5"], vec!["--nodecount", "5"]),
        (&heap, vec![], vec![]),
        (&heap, vec!["-sample_index=0"], vec!["--sample-index", "0"]),
        (
            &heap,
            vec!["-sample_index=inuse_space"],
            vec!["--sample-index", "inuse_space"],
        ),
        (&twice, vec![], vec![]),
        (&scripting, vec![], vec![]),
    ];
    let wall = jfr_wall();
    let mut failures = Vec::new();
    let mut runs = 0;
    for (files, go_args, ember_args) in cases.into_iter().chain([(wall.as_slice(), vec![], vec![])])
    {
        runs += 1;
        let expected =
            go_top(&go, &go_args, files).unwrap_or_else(|e| panic!("{go_args:?}: go failed: {e}"));
        let mut args = vec!["top"];
        args.extend(&ember_args);
        args.extend(args_of(files));
        let got = stdout_ok(ember(&args), &format!("{args:?}"));
        if got != expected {
            failures.push(format!(
                "=== {} files {go_args:?}\n--- go\n{expected}\n--- ember\n{got}",
                files.len()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} runs differ:\n{}",
        failures.len(),
        failures.join("\n")
    );

    // Go refuses to merge profiles of different sample types; so does Ember, naming both files.
    let mixed = vec![cpu[0].clone(), heap[0].clone()];
    assert!(go_top(&go, &[], &mixed).is_err(), "go merged cpu with heap");
    let err = stderr_failed(
        ember(&{
            let mut a = vec!["top"];
            a.extend(args_of(&mixed));
            a
        }),
        "cpu + heap",
    );
    assert!(
        err.contains(mixed[1].to_str().unwrap())
            && err.contains(mixed[0].to_str().unwrap())
            && err.contains("sample types"),
        "{err}"
    );
}

/// Folded text as `stack → count`.
fn folded_map(text: &str) -> BTreeMap<String, u64> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        *map.entry(stack.to_owned()).or_default() += count.parse::<u64>().unwrap();
    }
    map
}

fn convert(inputs: &[PathBuf], out: &Path, extra: &[&str]) {
    let mut args = vec!["convert"];
    args.extend(args_of(inputs));
    args.extend(["-o", out.to_str().unwrap()]);
    args.extend(extra);
    stdout_ok(ember(&args), &format!("{args:?}"));
}

#[test]
fn convert_merges_what_top_merges_and_folded_output_sums() {
    let dir = temp_dir("convert");
    let dir = dir.path();
    for (name, files) in [("cpu", go_cpu()), ("heap", go_heap()), ("wall", jfr_wall())] {
        let merged = dir.join(format!("{name}.pb.gz"));
        convert(&files, &merged, &[]);
        for flags in [&[][..], &["--sort", "cum"], &["--sample-index", "0"]] {
            let mut of_files = vec!["top"];
            of_files.extend(flags);
            of_files.extend(args_of(&files));
            let mut of_merged = vec!["top"];
            of_merged.extend(flags);
            of_merged.push(merged.to_str().unwrap());
            assert_eq!(
                stdout_ok(ember(&of_merged), "top of the converted merge"),
                stdout_ok(ember(&of_files), "top of the inputs"),
                "{name} {flags:?}"
            );
        }
    }

    // Folded output of a merge is the sum of the inputs' folded outputs, with a folded input
    // mixed in (it counts as samples/count, the sample type of these scripting profiles).
    let ruby_folded = dir.join("ruby.folded");
    convert(
        &[pyroscope("pprof/testdata/profile_ruby")],
        &ruby_folded,
        &[],
    );
    let python = pyroscope("pprof/testdata/profile_python");
    let inputs = [python.clone(), ruby_folded, python];
    let merged = dir.join("mixed.folded");
    convert(&inputs, &merged, &[]);
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (i, input) in inputs.iter().enumerate() {
        let one = dir.join(format!("one-{i}.folded"));
        convert(std::slice::from_ref(input), &one, &[]);
        for (stack, count) in folded_map(&std::fs::read_to_string(&one).unwrap()) {
            *expected.entry(stack).or_default() += count;
        }
    }
    assert_eq!(
        folded_map(&std::fs::read_to_string(&merged).unwrap()),
        expected
    );
    // The same through pprof output, for the CPU profiles and a chosen sample type.
    let cpu = go_cpu();
    let merged = dir.join("cpu.folded");
    convert(&cpu, &merged, &["--sample-index", "cpu"]);
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for (i, input) in cpu.iter().enumerate() {
        let one = dir.join(format!("cpu-{i}.folded"));
        convert(
            std::slice::from_ref(input),
            &one,
            &["--sample-index", "cpu"],
        );
        for (stack, count) in folded_map(&std::fs::read_to_string(&one).unwrap()) {
            *expected.entry(stack).or_default() += count;
        }
    }
    assert_eq!(
        folded_map(&std::fs::read_to_string(&merged).unwrap()),
        expected
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn one_input_is_converted_as_before() {
    // A single input is not merged: pprof → pprof writes the decoded profile re-encoded as is.
    let dir = temp_dir("one");
    let dir = dir.path();
    let input = go_cpu().remove(2);
    let out = dir.join("out.pb.gz");
    convert(std::slice::from_ref(&input), &out, &[]);
    let profile = ember_pprof::read_file(&input).unwrap();
    assert!(std::fs::read(&out).unwrap() == ember_pprof::encode_gzip(&profile));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn errors_name_the_file_and_leave_the_output_alone() {
    let dir = temp_dir("errors");
    let dir = dir.path();
    let good = go_cpu().remove(0);
    let missing = dir.join("missing.pb.gz");
    let corrupt = dir.join("corrupt.pb.gz");
    // Valid gzip around bytes that are no profile.proto message.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&[0x0a, 0xff, 0xff, 0xff, 0x0f, 1, 2, 3])
        .unwrap();
    std::fs::write(&corrupt, gz.finish().unwrap()).unwrap();
    let out = dir.join("out.pb.gz");
    std::fs::write(&out, b"previous").unwrap();

    for (bad, reason) in [(&missing, "No such file"), (&corrupt, "pprof")] {
        let pair = vec![good.clone(), bad.clone()];
        let err = stderr_failed(
            ember(&[&["top"][..], &args_of(&pair)].concat()),
            "top with a bad input",
        );
        assert!(
            err.contains(bad.to_str().unwrap()) && err.contains(reason),
            "{err}"
        );
        let mut args = vec!["convert"];
        args.extend(args_of(&pair));
        args.extend(["-o", out.to_str().unwrap()]);
        let err = stderr_failed(ember(&args), "convert with a bad input");
        assert!(err.contains(bad.to_str().unwrap()), "{err}");
        assert_eq!(std::fs::read(&out).unwrap(), b"previous");
    }
    // Nothing but what the test wrote is left in the output's directory.
    let mut left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["corrupt.pb.gz", "out.pb.gz"]);

    for cmd in ["top", "convert"] {
        let help = stdout_ok(ember(&[cmd, "--help"]), "--help");
        // clap wraps long help to the terminal width.
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            help.contains("Several inputs") && help.contains("one at a time"),
            "{cmd} --help: {help}"
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `VmHWM` (peak resident set) of a running process, in kB.
fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs ember, polling its peak RSS until it exits: (stdout, peak kB). The last reading
/// taken before the exit is a lower bound of the true peak, close to it because the peak is
/// reached while merging, which takes far longer than the polling interval.
fn ember_with_peak(args: &[&str]) -> (String, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ember"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ember");
    let mut peak = 0;
    // Read stdout on a thread so that a large output cannot block the child.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    loop {
        if let Some(kb) = peak_rss_kb(child.id()) {
            peak = peak.max(kb);
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (reader.join().unwrap(), peak)
}

/// A profile whose decoded size is mostly symbols (long, Go-like function names) and stacks,
/// both of which every variant shares: the merge of any number of variants is as big as one.
fn generated_base() -> ember_pprof::Profile {
    let mut b = ember_pprof::ProfileBuilder::new(&[("samples", "count")]);
    let names: Vec<String> = (0..3000)
        .map(|i| {
            format!(
                "github.com/example/fleet/internal/service{:02}/handlers/v{}.(*Server{:03}).HandleRequestWithRetriesAndTracing{i:04}",
                i % 37,
                i % 5,
                i % 211
            )
        })
        .collect();
    // A fixed linear congruential sequence: deterministic, no dependency.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as usize % n
    };
    for stack in 0..1500 {
        let frames: Vec<&str> = (0..12).map(|_| names[next(names.len())].as_str()).collect();
        b.add_folded_stack(&frames, &[1 + (stack % 17) as i64]);
    }
    b.build()
}

#[test]
fn thousands_of_inputs_merge_in_memory_of_the_result() {
    const N: usize = 2000;
    let dir = temp_dir("memory");
    let dir = dir.path();
    let mut profile = generated_base();
    let base_values: Vec<i64> = profile.sample.iter().map(|s| s.value[0]).collect();
    let base_total: i64 = base_values.iter().sum();
    let decoded_len = ember_pprof::encode(&profile).len() as u64;
    let mut expected_total = 0;
    let mut paths = Vec::with_capacity(N);
    for i in 0..N {
        // Every variant has its own values (so the sum proves each was read) and time.
        let factor = (i % 7 + 1) as i64;
        for (s, v) in profile.sample.iter_mut().zip(&base_values) {
            s.value[0] = v * factor;
        }
        profile.time_nanos = 1_700_000_000_000_000_000 + i as i64 * 10_000_000_000;
        expected_total += base_total * factor;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&ember_pprof::encode(&profile)).unwrap();
        let path = dir.join(format!("p{i:04}.pb.gz"));
        std::fs::write(&path, gz.finish().unwrap()).unwrap();
        paths.push(path);
    }
    let sum_decoded_kb = N as u64 * decoded_len / 1024;

    let (_, one_kb) = ember_with_peak(&["top", "--nodecount", "3", paths[0].to_str().unwrap()]);
    let mut args = vec!["top", "--nodecount", "3"];
    args.extend(args_of(&paths));
    let (table, all_kb) = ember_with_peak(&args);
    let total_line = table
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for "))
        .unwrap_or_else(|| panic!("no total in\n{table}"));
    assert!(
        total_line.ends_with(&format!(" of {expected_total} total")),
        "{total_line} (expected {expected_total})"
    );
    eprintln!(
        "{N} inputs of {decoded_len} bytes decoded ({sum_decoded_kb} kB in all): peak RSS \
         {all_kb} kB merging all, {one_kb} kB for one"
    );
    // Holding the inputs would take at least their decoded bytes; merging as they are read
    // takes about what one input takes.
    assert!(
        all_kb * 10 < sum_decoded_kb,
        "peak {all_kb} kB is not far below the inputs' {sum_decoded_kb} kB"
    );
    assert!(
        all_kb < 2 * one_kb + 32 * 1024,
        "peak {all_kb} kB over {N} inputs vs {one_kb} kB for one"
    );
    std::fs::remove_dir_all(dir).unwrap();
}
