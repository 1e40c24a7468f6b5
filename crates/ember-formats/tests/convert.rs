//! Conversions on the real corpora: pprof → folded → pprof keeps every stack and total,
//! speedscope output parses, has one profile per sample type with the right totals and the same
//! stacks as the folded view, and matches the structure of speedscope files in the wild.

use ember_formats::convert::folded_to_profile;
use ember_formats::detect::{Input, decode as detect};
use ember_formats::speedscope::{File, SCHEMA};
use ember_formats::{Folded, FoldedLine};
use ember_formats::{
    TopOptions, folded_to_speedscope, profile_to_speedscope, select_sample_index, top,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

/// Every valid profile.proto file of the manifest (legacy and broken files excluded).
fn proto_files() -> Vec<PathBuf> {
    let tsv = std::fs::read_to_string(corpora().join("pprof-cases.tsv")).unwrap();
    tsv.lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c.len() > 3 && !c[3].is_empty() && !c[2].contains("BROKEN"))
        .map(|c| corpora().join(c[0]))
        .collect()
}

fn load(path: &Path) -> ember_pprof::Profile {
    ember_pprof::read_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn pprof_to_folded_to_pprof_keeps_stacks_and_totals() {
    let files = proto_files();
    assert!(files.len() >= 70);
    for path in files {
        let profile = load(&path);
        let index = select_sample_index(&profile, None).unwrap();
        let stacks = ember_pprof::folded_stacks(&profile, index);
        let folded = Folded {
            lines: stacks
                .iter()
                .map(|(s, v)| FoldedLine {
                    stack: s.clone().into(),
                    count: *v as f64,
                    second_count: None,
                })
                .collect(),
            ignored_lines: 0,
            has_fractional: false,
        };
        let (rebuilt, fractional) = folded_to_profile(&folded, ("samples", "count"));
        assert_eq!(fractional, 0);
        // Through the wire format too, so the written file is a valid profile.
        let rebuilt = ember_pprof::decode(&ember_pprof::encode_gzip(&rebuilt))
            .unwrap_or_else(|e| panic!("{}: rebuilt profile invalid: {e}", path.display()));
        let again = ember_pprof::folded_stacks(&rebuilt, 0);
        assert_eq!(again, stacks, "{}", path.display());
        let total: i64 = profile.sample.iter().map(|s| s.value[index]).sum();
        let rebuilt_total: i64 = rebuilt.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(rebuilt_total, total, "{}", path.display());
    }
}

#[test]
fn speedscope_from_every_profile_has_right_types_totals_and_stacks() {
    for path in proto_files() {
        let name = path.display().to_string();
        let profile = load(&path);
        let file = profile_to_speedscope(&profile, None, "corpus").unwrap();
        let json = file.to_json();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["$schema"], SCHEMA);
        let profiles = value["profiles"].as_array().unwrap();
        assert_eq!(profiles.len(), profile.sample_type.len(), "{name}");
        let frames = value["shared"]["frames"].as_array().unwrap();
        let default = select_sample_index(&profile, None).unwrap();
        assert_eq!(value["activeProfileIndex"], default, "{name}");
        for (i, p) in profiles.iter().enumerate() {
            assert_eq!(p["type"], "sampled");
            let positive: i64 = profile
                .sample
                .iter()
                .map(|s| s.value[i])
                .filter(|&v| v > 0)
                .sum();
            assert_eq!(
                p["endValue"].as_f64().unwrap(),
                positive as f64,
                "{name} type {i}"
            );
            let samples = p["samples"].as_array().unwrap();
            let weights = p["weights"].as_array().unwrap();
            assert_eq!(samples.len(), weights.len());
            // Same stacks as the folded view, when the type has no negative values.
            let mut sums: BTreeMap<String, i64> = BTreeMap::new();
            for (stack, w) in samples.iter().zip(weights) {
                let names: Vec<&str> = stack
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| {
                        frames[f.as_u64().unwrap() as usize]["name"]
                            .as_str()
                            .unwrap()
                    })
                    .collect();
                *sums.entry(names.join(";")).or_default() += w.as_f64().unwrap() as i64;
            }
            if profile.sample.iter().all(|s| s.value[i] >= 0) {
                let folded: BTreeMap<String, i64> = ember_pprof::folded_stacks(&profile, i)
                    .into_iter()
                    .collect();
                assert_eq!(sums, folded, "{name} type {i}");
            }
        }
        // Our own structs read the file back.
        let back: File = serde_json::from_str(&json).unwrap();
        assert_eq!(back, file);
    }
}

#[test]
fn speedscope_structure_matches_files_in_the_wild() {
    let dir = corpora().join("pyroscope/pkg/og/convert/speedscope/testdata");
    let ours =
        serde_json::to_value(profile_to_speedscope(&load(&proto_files()[0]), None, "x").unwrap())
            .unwrap();
    for name in [
        "two-sampled.speedscope.json",
        "two-sampled-bytes.speedscope.json",
        "duplicates.speedscope.json",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let theirs: serde_json::Value = serde_json::from_str(&text).unwrap();
        // The same top-level and per-profile keys as speedscope's own exporter writes.
        let keys =
            |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&ours), keys(&theirs), "{name}");
        assert_eq!(
            keys(&ours["profiles"][0]),
            keys(&theirs["profiles"][0]),
            "{name}"
        );
        // And our reader understands their files.
        let parsed: File = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let weights: f64 = parsed.profiles[0].weights.iter().sum();
        assert_eq!(weights, parsed.profiles[0].end_value, "{name}");
    }
}

#[test]
fn folded_corpus_to_speedscope_and_top() {
    let path =
        corpora().join("FlameGraph/test/results/perf-cycles-instructions-01-collapsed-all.txt");
    let bytes = std::fs::read(&path).unwrap();
    let Ok(Input::Folded(folded)) = detect(&bytes) else {
        panic!(
            "folded file not detected as folded: {:?}",
            detect(&bytes).err()
        );
    };
    let total: f64 = folded.lines.iter().map(|l| l.count).sum();
    assert!(total > 0.0);
    let file = folded_to_speedscope(&folded, "perf");
    assert_eq!(file.profiles.len(), 1);
    assert_eq!(file.profiles[0].end_value, total);
    assert_eq!(file.profiles[0].samples.len(), folded.lines.len());
    let (profile, _) = folded_to_profile(&folded, ("samples", "count"));
    let table = top(&profile, &TopOptions::default()).unwrap();
    assert_eq!(table.total as f64, total);
    assert!(
        table
            .labels
            .iter()
            .any(|l| l.starts_with("Showing nodes accounting for"))
    );
}

#[test]
fn detection_by_content() {
    for path in proto_files() {
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            matches!(detect(&bytes), Ok(Input::Pprof(_))),
            "{}",
            path.display()
        );
    }
    // Legacy (pre-proto) profiles and broken profiles are errors, not folded text.
    for legacy in [
        "pprof/profile/testdata/cppbench.cpu",
        "pyroscope/pkg/og/convert/pprof/testdata/dotnet-pprof-3.pb.gz",
    ] {
        let bytes = std::fs::read(corpora().join(legacy)).unwrap();
        assert!(detect(&bytes).is_err(), "{legacy}");
    }
}
