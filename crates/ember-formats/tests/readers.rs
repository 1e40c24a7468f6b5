//! The one input detector reads every format Ember knows: speedscope JSON from other programs
//! (sampled and evented, pyroscope's test files), `perf script` text (folded as `ember
//! collapse` folds it, whichever program wrote it), and round trips through Ember's own
//! writers keep every stack and value.

use std::path::{Path, PathBuf};

use ember_formats::{Input, profile_to_speedscope, read_input, speedscope_to_profile};
use ember_pprof::{Profile, folded_stacks};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn speedscope_file(name: &str) -> PathBuf {
    repo("tests/data/corpora/pyroscope/pkg/og/convert/speedscope/testdata").join(name)
}

fn profile(path: &Path) -> Profile {
    match read_input(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        Input::Pprof(p) => *p,
        Input::Folded(_) => panic!("{}: read as folded", path.display()),
    }
}

fn folded(profile: &Profile, index: usize) -> Vec<(String, i64)> {
    folded_stacks(profile, index)
}

fn stacks(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|&(s, v)| (s.to_owned(), v)).collect()
}

#[test]
fn speedscope_evented_profiles_weigh_each_stack_by_its_time() {
    // simple.speedscope.json: a;b;c open 0..2 and 6..9, a;b;d 2..6, a;b alone 9..14.
    let p = profile(&speedscope_file("simple.speedscope.json"));
    assert_eq!(
        ember_pprof::type_name(&p, &p.sample_type[0]),
        "samples/count"
    );
    assert_eq!(
        folded(&p, 0),
        stacks(&[("a;b", 5), ("a;b;c", 5), ("a;b;d", 4)])
    );
}

#[test]
fn speedscope_sampled_profiles_keep_units_and_profile_names() {
    for (file, sample_type, copies) in [
        ("two-sampled.speedscope.json", "time/seconds", 2),
        ("two-sampled-bytes.speedscope.json", "space/bytes", 2),
        ("duplicates.speedscope.json", "time/seconds", 3),
    ] {
        let p = profile(&speedscope_file(file));
        assert_eq!(p.sample_type.len(), 1, "{file}");
        assert_eq!(ember_pprof::type_name(&p, &p.sample_type[0]), sample_type);
        assert_eq!(
            folded(&p, 0),
            stacks(&[
                ("a;b", 5 * copies),
                ("a;b;c", 5 * copies),
                ("a;b;d", 4 * copies)
            ]),
            "{file}"
        );
        // Each sample says which speedscope profile it came from.
        let key = p.string_table.iter().position(|s| s == "profile").unwrap() as i64;
        assert!(
            p.sample
                .iter()
                .all(|s| s.label.iter().any(|l| l.key == key))
        );
    }
}

#[test]
fn speedscope_that_breaks_the_schema_is_an_error_naming_why() {
    let bad = br#"{"shared":{"frames":[{"name":"a"}]},"profiles":[{"type":"sampled","name":"x","unit":"none","startValue":0,"endValue":1,"samples":[[0,3]],"weights":[1]}]}"#;
    let err = speedscope_to_profile(bad).unwrap_err();
    assert!(err.contains("frame 3"), "{err}");
    let bad = br#"{"shared":{"frames":[{"name":"a"},{"name":"b"}]},"profiles":[{"type":"evented","name":"x","unit":"none","startValue":0,"endValue":1,"events":[{"type":"O","at":0,"frame":0},{"type":"C","at":1,"frame":1}]}]}"#;
    let err = speedscope_to_profile(bad).unwrap_err();
    assert!(err.contains("does not match"), "{err}");
}

#[test]
fn pprof_round_trips_through_speedscope() {
    for rel in [
        "tests/data/corpora/pprof/internal/report/testdata/sample.cpu",
        "tests/data/corpora/pyroscope/pkg/og/convert/pprof/testdata/heap.pb",
    ] {
        let original = profile(&repo(rel));
        let json = profile_to_speedscope(&original, None, "x")
            .unwrap()
            .to_json();
        let back = speedscope_to_profile(json.as_bytes()).unwrap();
        for (i, vt) in original.sample_type.iter().enumerate() {
            let unit = ember_pprof::string(&original, vt.unit);
            let j = back
                .sample_type
                .iter()
                .position(|t| ember_pprof::string(&back, t.unit) == unit)
                .unwrap_or_else(|| panic!("{rel}: no {unit} type back"));
            // Speedscope has no zero or negative weights: only positive stacks travel.
            let positive: Vec<_> = folded(&original, i)
                .into_iter()
                .filter(|(_, v)| *v > 0)
                .collect();
            // Types sharing a unit (alloc_space and inuse_space) come back summed.
            let same_unit = original
                .sample_type
                .iter()
                .filter(|t| ember_pprof::string(&original, t.unit) == unit)
                .count();
            if same_unit == 1 {
                assert_eq!(folded(&back, j), positive, "{rel} type {i}");
            } else {
                let total: i64 = positive.iter().map(|(_, v)| v).sum();
                assert!(folded(&back, j).iter().map(|(_, v)| v).sum::<i64>() >= total);
            }
        }
    }
}

#[test]
fn perf_script_from_any_producer_is_folded_like_ember_collapse() {
    for (input, expected) in [
        (
            "tests/data/corpora/inferno/tests/data/collapse-perf/go-stacks.txt",
            "tests/data/corpora/inferno/tests/data/collapse-perf/results/go-stacks-collapsed.txt",
        ),
        (
            "crates/ember-collapse/tests/data/producers/simpleperf-report-sample.txt",
            "crates/ember-collapse/tests/data/producers/expected/simpleperf-report-sample-default.txt",
        ),
    ] {
        let Input::Folded(f) = read_input(&repo(input)).unwrap() else {
            panic!("{input}: not folded");
        };
        let mut text = String::new();
        for line in &f.lines {
            text.push_str(&format!("{} {}\n", line.stack, line.count));
        }
        assert_eq!(
            text,
            std::fs::read_to_string(repo(expected)).unwrap(),
            "{input}"
        );
    }
}
