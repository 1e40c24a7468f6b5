//! Every file of the pprof corpus: decoding, rejection of broken and legacy
//! files, round-trips, and folded stacks against the Go-derived goldens.

mod common;

use common::{Case, cases, good_cases, gunzip};
use ember_pprof::{
    PprofError, decode, encode, encode_gzip, folded_stacks, folded_to_string, sample_index, string,
};

#[test]
fn decodes_every_proto_file_with_manifest_counts() {
    let mut n = 0;
    for case in good_cases() {
        let p = decode(&case.bytes()).unwrap_or_else(|e| panic!("{}: {e}", case.path));
        assert_eq!(p.sample.len(), case.samples, "{}: samples", case.path);
        assert_eq!(p.location.len(), case.locations, "{}: locations", case.path);
        assert_eq!(p.function.len(), case.functions, "{}: functions", case.path);
        assert_eq!(p.mapping.len(), case.mappings, "{}: mappings", case.path);
        n += 1;
    }
    assert_eq!(
        n,
        cases().len() - 16,
        "every proto row except the two broken .NET files"
    );
}

#[test]
fn broken_dotnet_files_are_rejected_like_go() {
    let broken: Vec<Case> = cases().into_iter().filter(Case::is_broken).collect();
    assert_eq!(broken.len(), 2);
    for case in broken {
        let err = decode(&case.bytes()).expect_err(&case.path);
        let golden_path = common::corpus().join(format!(
            "derived/go-pprof-goldens/{}.parse-error.txt",
            case.path
        ));
        let go_msg = std::fs::read_to_string(&golden_path).expect("parse-error golden");
        let go_msg = go_msg.trim();
        // Go: "malformed profile: found function with reserved ID=0"; ours adds the field path.
        let ours = err.to_string();
        assert!(
            matches!(err, PprofError::Malformed { .. }),
            "{}: {ours}",
            case.path
        );
        let go_detail = go_msg.trim_start_matches("malformed profile: ");
        assert!(
            ours.starts_with("malformed profile: function["),
            "{}: {ours}",
            case.path
        );
        assert!(
            ours.ends_with(go_detail),
            "{}: {ours} vs Go {go_msg}",
            case.path
        );
    }
}

#[test]
fn legacy_files_are_rejected_with_a_clear_error() {
    let legacy: Vec<Case> = cases().into_iter().filter(Case::is_legacy).collect();
    assert_eq!(legacy.len(), 14);
    for case in legacy {
        match decode(&case.bytes()) {
            Err(e @ PprofError::LegacyFormat { .. }) => {
                assert!(
                    e.to_string().contains("not a profile.proto file (legacy"),
                    "{}: {e}",
                    case.path
                )
            }
            other => panic!(
                "{}: expected a legacy-format error, got {other:?}",
                case.path
            ),
        }
    }
}

#[test]
fn invalid_utf8_file_is_read() {
    let case = good_cases()
        .into_iter()
        .find(|c| c.path.ends_with("invalid_utf8.pb.gz"))
        .expect("invalid_utf8 row");
    let raw = common::gunzip(&common::corpus().join(&case.path));
    // The premise: prost's strict String decoding really rejects this file.
    use prost::Message;
    assert!(ember_pprof::Profile::decode(raw.as_slice()).is_err());
    let p = decode(&case.bytes()).expect("lossy decode");
    assert!(p.string_table.iter().any(|s| s.contains('\u{FFFD}')));
}

#[test]
fn round_trip_preserves_everything() {
    for case in good_cases() {
        let p = decode(&case.bytes()).unwrap();
        let raw = decode(&encode(&p)).unwrap_or_else(|e| panic!("{}: raw re-read: {e}", case.path));
        assert!(raw == p, "{}: raw round trip differs", case.path);
        let gz = encode_gzip(&p);
        assert_eq!(gz[..2], [0x1f, 0x8b]);
        let back = decode(&gz).unwrap_or_else(|e| panic!("{}: gzip re-read: {e}", case.path));
        assert!(back == p, "{}: gzip round trip differs", case.path);
    }
}

#[test]
fn write_file_then_read_file() {
    let case = &good_cases()[0];
    let p = decode(&case.bytes()).unwrap();
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let path = dir.join("out.pb.gz");
    ember_pprof::write_file(&p, &path).unwrap();
    let back = ember_pprof::read_file(&path).unwrap();
    std::fs::remove_dir_all(dir).ok();
    assert!(back == p);
    let missing = ember_pprof::read_file(&dir.join("nope.pb.gz")).unwrap_err();
    assert!(missing.to_string().contains("nope.pb.gz"));
}

/// Goldens: derived/go-pprof-goldens/<path>.folded.txt.gz, produced from Go's
/// parser with the rules of INDEX.md section 4 (default sample type, lines
/// last→first per location, `0x<addr>` for line-less locations, zero sums
/// dropped, byte order). Go keeps raw bytes where we substitute U+FFFD, so
/// the golden is compared after the same lossy conversion.
#[test]
fn folded_stacks_match_go_goldens() {
    let mut checked = 0;
    for case in good_cases() {
        let golden_path = case
            .golden(".folded.txt.gz")
            .unwrap_or_else(|| panic!("{}: no folded golden listed", case.path));
        let golden_bytes = gunzip(&golden_path);
        let golden = String::from_utf8_lossy(&golden_bytes);
        let (header, body) = golden.split_once('\n').expect("header line");
        let p = decode(&case.bytes()).unwrap();
        let idx = sample_index(&p, None).unwrap();
        let vt = p.sample_type[idx];
        let ours_header = format!(
            "# sample_type={}/{} index={idx}",
            string(&p, vt.r#type),
            string(&p, vt.unit)
        );
        assert_eq!(ours_header, header, "{}: default sample index", case.path);
        let ours = folded_to_string(&folded_stacks(&p, idx));
        if ours != body {
            let diff = ours
                .lines()
                .zip(body.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "{}: folded output differs at line {diff}: ours {:?} golden {:?}",
                case.path,
                ours.lines().nth(diff),
                body.lines().nth(diff)
            );
        }
        checked += 1;
    }
    assert_eq!(checked, cases().len() - 16);
}
