//! Validation and decoding limits, exercised on real corpus profiles that are
//! corrupted in one specific field at a time.

mod common;

use std::io::Write;

use ember_pprof::{
    DecodeLimits, PprofError, Profile, ProfileView, decode, decode_with_limits, decompress, encode,
    encode_gzip, validate,
};

const SAMPLE_CPU: &str = "pprof/internal/report/testdata/sample.cpu";

fn base() -> Profile {
    common::read_case(SAMPLE_CPU)
}

/// Corrupts a profile, checks `validate` and the full decode path both report
/// exactly `expected`.
fn expect_malformed(expected: &str, corrupt: impl FnOnce(&mut Profile)) {
    let mut p = base();
    corrupt(&mut p);
    let direct = validate(&p).expect_err(expected).to_string();
    assert_eq!(direct, format!("malformed profile: {expected}"));
    let decoded = decode(&encode(&p)).expect_err(expected);
    assert!(matches!(decoded, PprofError::Malformed { .. }));
    assert_eq!(decoded.to_string(), direct);
    let viewed = ProfileView::parse(&encode(&p)).expect_err(expected);
    assert_eq!(viewed.to_string(), direct);
}

#[test]
fn base_profile_is_valid() {
    let p = base();
    assert!(
        p.sample.len() > 3
            && p.location.len() > 2
            && !p.function.is_empty()
            && !p.mapping.is_empty()
    );
    validate(&p).unwrap();
}

#[test]
fn dangling_sample_location() {
    expect_malformed(
        "sample[3].location_id[1]: location id 99999 does not exist",
        |p| p.sample[3].location_id[1] = 99999,
    );
    expect_malformed(
        "sample[0].location_id[0]: location id 0 does not exist",
        |p| p.sample[0].location_id[0] = 0,
    );
}

#[test]
fn zero_and_duplicate_ids() {
    expect_malformed("function[0].id: found function with reserved ID=0", |p| {
        p.function[0].id = 0
    });
    expect_malformed("location[2].id: found location with reserved ID=0", |p| {
        p.location[2].id = 0
    });
    expect_malformed("mapping[0].id: found mapping with reserved ID=0", |p| {
        p.mapping[0].id = 0
    });
    expect_malformed("function[1].id: duplicate function id 7", |p| {
        // Renumber so that positions 0 and 1 collide on id 7.
        let old0 = p.function[0].id;
        let old1 = p.function[1].id;
        for loc in &mut p.location {
            for l in &mut loc.line {
                if l.function_id == old0 || l.function_id == old1 {
                    l.function_id = 7;
                }
            }
        }
        p.function[0].id = 7;
        p.function[1].id = 7;
        // Keep ids elsewhere distinct from 7.
        for f in p.function.iter_mut().skip(2) {
            if f.id == 7 {
                f.id = 1_000_000;
            }
        }
    });
}

#[test]
fn dangling_mapping_and_function_references() {
    expect_malformed(
        "location[1].mapping_id: mapping id 4242 does not exist",
        |p| p.location[1].mapping_id = 4242,
    );
    expect_malformed(
        "location[0].line[0].function_id: function id 4242 does not exist",
        |p| p.location[0].line[0].function_id = 4242,
    );
}

#[test]
fn function_string_index_out_of_range() {
    let mut p = base();
    let n = p.string_table.len();
    p.function[2].name = 100_000;
    assert_eq!(
        validate(&p).unwrap_err().to_string(),
        format!(
            "malformed profile: function[2].name: string index 100000 out of range (string table has {n} entries)"
        )
    );
}

#[test]
fn string_index_messages_carry_table_size() {
    let mut p = base();
    let n = p.string_table.len();
    p.sample[1].label.push(ember_pprof::Label {
        key: n as i64,
        str: 0,
        num: 1,
        num_unit: 0,
    });
    assert_eq!(
        validate(&p).unwrap_err().to_string(),
        format!(
            "malformed profile: sample[1].label[0].key: string index {n} out of range (string table has {n} entries)"
        )
    );
    let mut p = base();
    p.sample_type[0].unit = -1;
    assert!(
        validate(&p)
            .unwrap_err()
            .to_string()
            .starts_with("malformed profile: sample_type[0].unit: string index -1")
    );
    let mut p = base();
    p.string_table[0] = "x".into();
    assert_eq!(
        validate(&p).unwrap_err().to_string(),
        "malformed profile: string_table[0]: must be \"\", found \"x\""
    );
    let mut p = base();
    p.string_table.clear();
    assert!(
        validate(&p)
            .unwrap_err()
            .to_string()
            .starts_with("malformed profile: string_table:")
    );
}

#[test]
fn value_count_must_match_sample_types() {
    let mut p = base();
    p.sample[5].value.push(1);
    assert_eq!(
        validate(&p).unwrap_err().to_string(),
        "malformed profile: sample[5].value: has 3 values but the profile has 2 sample types"
    );
}

#[test]
fn size_limit_is_exact_for_gzip_and_raw() {
    let p = base();
    let raw = encode(&p);
    let gz = encode_gzip(&p);
    let exact = DecodeLimits {
        max_decompressed_bytes: raw.len() as u64,
    };
    let short = DecodeLimits {
        max_decompressed_bytes: raw.len() as u64 - 1,
    };
    assert!(decode_with_limits(&gz, &exact).unwrap() == p);
    assert!(decode_with_limits(&raw, &exact).unwrap() == p);
    for input in [&gz, &raw] {
        match decode_with_limits(input, &short) {
            Err(PprofError::TooLarge { limit }) => assert_eq!(limit, raw.len() as u64 - 1),
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }
    assert_eq!(
        DecodeLimits::default().max_decompressed_bytes,
        256 * 1024 * 1024
    );
}

#[test]
fn gzip_bomb_is_an_error_not_an_allocation() {
    // 64 MiB of zeros compresses to ~64 KiB; with a 1 MiB cap we must stop early.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let chunk = vec![0u8; 1 << 20];
    for _ in 0..64 {
        enc.write_all(&chunk).unwrap();
    }
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 1 << 20);
    let limits = DecodeLimits {
        max_decompressed_bytes: 1 << 20,
    };
    assert!(matches!(
        decode_with_limits(&bomb, &limits),
        Err(PprofError::TooLarge { .. })
    ));
}

#[test]
fn concatenated_gzip_members_decode_as_one() {
    let p = base();
    let raw = encode(&p);
    let gz = |part: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(part).unwrap();
        e.finish().unwrap()
    };
    let (a, b) = raw.split_at(raw.len() / 3);
    let mut two = gz(a);
    two.extend(gz(b));
    assert!(decode(&two).unwrap() == p);
    // Many small members and an empty one; the last member's ISIZE is no size hint.
    let mut many: Vec<u8> = raw.chunks(1000).flat_map(gz).collect();
    many.extend(gz(&[]));
    assert!(decode(&many).unwrap() == p);
    // The limit counts every member.
    let limit = |n: usize| DecodeLimits {
        max_decompressed_bytes: n as u64,
    };
    assert_eq!(
        decompress(&two, &limit(raw.len())).unwrap().len(),
        raw.len()
    );
    assert!(matches!(
        decompress(&two, &limit(raw.len() - 1)),
        Err(PprofError::TooLarge { .. })
    ));
    // Anything after a member must be another member, whole, with the right checksum.
    let mut garbage = two.clone();
    garbage.extend_from_slice(&[0, 0, 0, 0]);
    assert!(matches!(decode(&garbage), Err(PprofError::Gzip(_))));
    assert!(matches!(
        decode(&two[..two.len() - 3]),
        Err(PprofError::Gzip(_))
    ));
    let mut bad_crc = gz(&raw);
    let at = bad_crc.len() - 8;
    bad_crc[at] ^= 1;
    assert!(matches!(decode(&bad_crc), Err(PprofError::Gzip(_))));
}

#[test]
fn corrupt_inputs_never_panic() {
    for case in common::good_cases() {
        let bytes = case.bytes();
        let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
            common::gunzip(&common::corpus().join(&case.path))
        } else {
            bytes.clone()
        };
        // Truncations of both encodings must error (or, rarely, still parse),
        // but never panic.
        for cut in [
            1,
            2,
            10,
            raw.len() / 3,
            raw.len() / 2,
            raw.len().saturating_sub(1),
        ] {
            let _ = decode(&raw[..cut.min(raw.len())]);
            let _ = decode(&bytes[..cut.min(bytes.len())]);
        }
        let mut flipped = raw.clone();
        for i in (0..flipped.len()).step_by(97) {
            flipped[i] ^= 0x5a;
        }
        let _ = decode(&flipped);
    }
    let truncated_gzip = &encode_gzip(&base())[..40];
    assert!(matches!(decode(truncated_gzip), Err(PprofError::Gzip(_))));
    let raw = encode(&base());
    assert!(matches!(
        decode(&raw[..raw.len() / 2]),
        Err(PprofError::Decode(_))
    ));
}
