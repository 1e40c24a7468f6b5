//! `decode` reads the string table itself (invalid UTF-8 repaired to U+FFFD) and hands every
//! other field to prost. Checked against a reference, prost decoding the same bytes into a copy
//! of `Profile` whose string table is `bytes` and repairing it afterwards (what `decode` did
//! before it read the strings itself): on layouts prost never writes (strings between other
//! fields, unknown fields and groups, a string-table entry of the wrong wire type) and on
//! every cut and thousands of corrupted variants of them. Results and error texts must match.

use ember_pprof::{PprofError, Profile, ProfileBuilder, SampleLabel, decode, encode, validate};
use prost::Message;

mod reference {
    use ember_pprof::{Function, Location, Mapping, Sample, ValueType};

    /// `ember_pprof::Profile` with the string table as bytes. Named `Profile` so that prost's
    /// error texts name the message as `decode`'s do.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(bytes = "vec", repeated, tag = "6")]
        pub string_table: Vec<Vec<u8>>,
        #[prost(int64, tag = "7")]
        pub drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
        #[prost(int64, tag = "15")]
        pub doc_url: i64,
    }
}

/// The reference decoder's answer for `raw`: the profile, or the error's text.
fn reference(raw: &[u8]) -> Result<Profile, String> {
    let r = reference::Profile::decode(raw).map_err(|e| PprofError::from(e).to_string())?;
    let p = Profile {
        sample_type: r.sample_type,
        sample: r.sample,
        mapping: r.mapping,
        location: r.location,
        function: r.function,
        string_table: (r.string_table.iter())
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect(),
        drop_frames: r.drop_frames,
        keep_frames: r.keep_frames,
        time_nanos: r.time_nanos,
        duration_nanos: r.duration_nanos,
        period_type: r.period_type,
        period: r.period,
        comment: r.comment,
        default_sample_type: r.default_sample_type,
        doc_url: r.doc_url,
    };
    validate(&p).map_err(|e| e.to_string())?;
    Ok(p)
}

/// Asserts `decode` agrees with the reference on `raw`; returns whether it decoded.
fn agrees(raw: &[u8]) -> bool {
    match (decode(raw), reference(raw)) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "{raw:x?}");
            true
        }
        (Err(a), Err(b)) => {
            // The pre-proto and text detections come before any protobuf decoding.
            if !matches!(a, PprofError::LegacyFormat { .. }) {
                assert_eq!(a.to_string(), b, "{raw:x?}");
            }
            false
        }
        (a, b) => panic!("decode {a:?}, reference {b:?} for {raw:x?}"),
    }
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A top-level length-delimited field.
fn len_field(field: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(field << 3 | 2, &mut out);
    varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

/// A small profile with labels, a mapping, inlined lines and a comment.
fn profile() -> Profile {
    let mut b = ProfileBuilder::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
    b.set_period(("cpu", "nanoseconds"), 10_000_000);
    b.add_folded_stack(&["main", "work", "leaf"], &[3, 30_000_000]);
    let f = b.function("helper", "helper", "lib.rs");
    let g = b.function("inlined", "inlined", "lib.rs");
    let loc = b.location(0, 0x1234, &[(g, 3), (f, 7)]);
    b.add_sample(
        &[loc],
        &[2, 20_000_000],
        &[SampleLabel::Str("thread", "worker")],
    );
    let mut p = b.build();
    p.comment.push(1);
    p
}

/// `p` encoded with its string table spread between its other fields, a string of invalid
/// UTF-8 among them, and unknown fields (a varint and a group holding a string) prost skips.
fn scattered(p: &Profile) -> Vec<u8> {
    let strings: Vec<Vec<u8>> = (p.string_table.iter())
        .map(|s| len_field(6, s.as_bytes()))
        .collect();
    let mut rest = p.clone();
    rest.string_table.clear();
    let parts = [
        Profile {
            sample_type: std::mem::take(&mut rest.sample_type),
            ..Profile::default()
        },
        Profile {
            sample: std::mem::take(&mut rest.sample),
            ..Profile::default()
        },
        Profile {
            location: std::mem::take(&mut rest.location),
            function: std::mem::take(&mut rest.function),
            ..Profile::default()
        },
        rest,
    ];
    let mut out = Vec::new();
    let mut next = strings.iter();
    for part in &parts {
        out.extend(encode(part));
        out.extend(next.next().into_iter().flatten());
        out.extend(next.next().into_iter().flatten());
    }
    // Unknown field 20 (varint) and group 21 holding a length-delimited field.
    varint(20 << 3, &mut out);
    varint(150, &mut out);
    varint(21 << 3 | 3, &mut out);
    out.extend(len_field(1, b"in a group"));
    varint(21 << 3 | 4, &mut out);
    out.extend(len_field(6, b"bad \xff\xfe utf-8"));
    for s in next {
        out.extend(s);
    }
    out
}

#[test]
fn strings_anywhere_decode_like_the_reference() {
    let p = profile();
    let raw = scattered(&p);
    assert!(agrees(&encode(&p)));
    assert!(agrees(&raw));
    let decoded = decode(&raw).expect("scattered layout decodes");
    assert!(
        decoded
            .string_table
            .contains(&"bad \u{fffd}\u{fffd} utf-8".to_string())
    );
    assert_eq!(decoded.sample, p.sample);
    assert_eq!(decoded.string_table.len(), p.string_table.len() + 1);
}

#[test]
fn malformed_inputs_fail_like_the_reference_and_name_profile() {
    let p = profile();
    let raw = scattered(&p);
    // A string-table entry of the wrong wire type, and one cut short.
    let mut wrong = raw.clone();
    wrong.extend([6 << 3, 0x01]);
    assert!(!agrees(&wrong));
    let mut short = raw.clone();
    short.extend([6 << 3 | 2, 0x05, b'a']);
    assert!(!agrees(&short));
    // The messages name the public type's fields, not a private mirror's.
    let err = decode(&wrong).expect_err("wrong wire type").to_string();
    assert!(err.contains("Profile.string_table"), "{err}");
    let at = raw.len() - 20;
    let cut = decode(&raw[..at]).expect_err("cut").to_string();
    assert!(!cut.contains("Bytes"), "{cut}");
    for cut in 0..raw.len() {
        agrees(&raw[..cut]);
    }
}

#[test]
fn corrupted_inputs_decode_like_the_reference() {
    let raw = scattered(&profile());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..4000 {
        let mut bytes = raw.clone();
        for _ in 0..1 + next() % 3 {
            let at = (next() % bytes.len() as u64) as usize;
            match next() % 3 {
                0 => bytes[at] = next() as u8,
                1 => bytes[at] ^= 1 << (next() % 8),
                _ => bytes.insert(at, next() as u8),
            }
        }
        if agrees(&bytes) {
            ok += 1;
        } else {
            failed += 1;
        }
    }
    // Both outcomes must be exercised for the comparison to mean anything.
    assert!(ok > 100 && failed > 100, "ok {ok}, failed {failed}");
}
