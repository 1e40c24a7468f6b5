//! `ProfileView` (the borrowed ingest decoder) against the owned decoder: the same inputs are
//! accepted, with the same content, and rejected with the same error, on every corpus profile
//! and on truncated, bit-flipped and unusually encoded variants of them.

mod common;

use ember_pprof::{
    DecodeLimits, Line, PprofError, Profile, ProfileView, decode, decompress, encode, encode_gzip,
};

/// Asserts parity of the two decoders on `bytes` (gzip'd or raw); returns whether it decoded.
fn parity(bytes: &[u8]) -> bool {
    let owned = decode(bytes);
    let raw = match decompress(bytes, &DecodeLimits::default()) {
        Ok(raw) => raw,
        Err(e) => {
            assert_eq!(
                owned.expect_err("decompress failed").to_string(),
                e.to_string()
            );
            return false;
        }
    };
    match (owned, ProfileView::parse(&raw)) {
        (Ok(p), Ok(v)) => {
            assert_eq!(v.to_profile(), p, "view content differs from decode");
            true
        }
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            false
        }
        (Ok(_), Err(e)) => panic!("view rejected what decode accepts: {e}"),
        (Err(e), Ok(_)) => panic!("view accepted what decode rejects: {e}"),
    }
}

#[test]
fn every_corpus_profile_decodes_the_same() {
    let mut decoded = 0;
    for case in common::cases() {
        if parity(&case.bytes()) {
            decoded += 1;
        }
    }
    assert!(decoded >= common::good_cases().len(), "decoded {decoded}");
}

#[test]
fn truncated_and_flipped_inputs_agree() {
    for case in common::good_cases() {
        let bytes = case.bytes();
        let raw = decompress(&bytes, &DecodeLimits::default())
            .expect("good case decompresses")
            .into_owned();
        // Every cut of small profiles, a spread of cuts of big ones.
        let step = (raw.len() / 150).max(1);
        for cut in (0..raw.len()).step_by(step) {
            parity(&raw[..cut]);
        }
        for (stride, mask) in [(97, 0x5a), (31, 0x01), (13, 0x80)] {
            let mut flipped = raw.clone();
            for i in (0..flipped.len()).step_by(stride) {
                flipped[i] ^= mask;
            }
            parity(&flipped);
        }
    }
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(out: &mut Vec<u8>, number: u64, wire: u64) {
    varint(out, number << 3 | wire);
}

fn nested(out: &mut Vec<u8>, number: u64, body: &[u8]) {
    field(out, number, 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// A small profile written by hand in encodings prost never produces but must accept:
/// unpacked repeated fields, a sample's fields interleaved, `period_type` split over two
/// occurrences, unknown fields of every wire type (a nested group too), a scalar repeated
/// (last wins).
fn unusual_encoding() -> Vec<u8> {
    let mut p = Vec::new();
    for s in ["", "cpu", "nanoseconds", "main", "main.go"] {
        nested(&mut p, 6, s.as_bytes());
    }
    let mut st = Vec::new();
    field(&mut st, 1, 0);
    varint(&mut st, 1);
    field(&mut st, 2, 0);
    varint(&mut st, 2);
    nested(&mut p, 1, &st);
    let mut pt = Vec::new();
    field(&mut pt, 1, 0);
    varint(&mut pt, 1);
    nested(&mut p, 11, &pt);
    let mut pt = Vec::new();
    field(&mut pt, 2, 0);
    varint(&mut pt, 2);
    nested(&mut p, 11, &pt);
    let mut f = Vec::new();
    field(&mut f, 1, 0);
    varint(&mut f, 7);
    field(&mut f, 2, 0);
    varint(&mut f, 3);
    field(&mut f, 4, 0);
    varint(&mut f, 4);
    nested(&mut p, 5, &f);
    for (id, line) in [(1u64, 10u64), (2, 20)] {
        let mut l = Vec::new();
        field(&mut l, 1, 0);
        varint(&mut l, id);
        let mut ln = Vec::new();
        field(&mut ln, 1, 0);
        varint(&mut ln, 7);
        field(&mut ln, 2, 0);
        varint(&mut ln, line);
        nested(&mut l, 4, &ln);
        nested(&mut p, 4, &l);
    }
    // Sample: location 1 unpacked, a value, location 2 packed, an unknown fixed32.
    let mut s = Vec::new();
    field(&mut s, 1, 0);
    varint(&mut s, 1);
    field(&mut s, 2, 0);
    varint(&mut s, 30);
    nested(&mut s, 1, &[2]);
    field(&mut s, 9, 5);
    s.extend_from_slice(&[1, 2, 3, 4]);
    nested(&mut p, 2, &s);
    // Unknown fields: fixed64, and a group holding a nested group and a varint.
    field(&mut p, 40, 1);
    p.extend_from_slice(&[0; 8]);
    field(&mut p, 41, 3);
    field(&mut p, 42, 3);
    field(&mut p, 1, 0);
    varint(&mut p, 5);
    field(&mut p, 42, 4);
    field(&mut p, 41, 4);
    // period twice: the last one counts.
    field(&mut p, 12, 0);
    varint(&mut p, 1);
    field(&mut p, 12, 0);
    varint(&mut p, 10_000_000);
    p
}

#[test]
fn unusual_but_valid_encodings_are_read_like_prost() {
    let bytes = unusual_encoding();
    assert!(parity(&bytes));
    let v = ProfileView::parse(&bytes).expect("valid");
    assert_eq!(v.period, 10_000_000);
    let pt = v.period_type.expect("period type");
    assert_eq!(
        (v.string(pt.r#type), v.string(pt.unit)),
        ("cpu".into(), "nanoseconds".into())
    );
    let sample = &v.sample[0];
    assert_eq!(v.sample_data(sample), (&[1u64, 2][..], &[30i64][..]));
    let loc = &v.location[v.location_position(2).expect("location 2")];
    assert_eq!(
        v.location_lines(loc),
        &[Line {
            function_id: 7,
            line: 20,
            column: 0
        }]
    );
    let f = &v.function[v.function_position(7).expect("function 7")];
    assert_eq!(v.string(f.name), "main");
    // A mismatched end group is a wire error on both paths.
    let mut bad = bytes.clone();
    field(&mut bad, 50, 3);
    field(&mut bad, 51, 4);
    assert!(!parity(&bad));
}

#[test]
fn packed_varints_are_read_like_prost() {
    // One more sample (location 2) whose packed value is encoded as `body`.
    let with_value = |body: &[u8]| {
        let mut p = unusual_encoding();
        let mut s = Vec::new();
        nested(&mut s, 1, &[2]);
        nested(&mut s, 2, body);
        nested(&mut p, 2, &s);
        p
    };
    let value = |body: &[u8]| {
        let bytes = with_value(body);
        assert!(parity(&bytes));
        let v = ProfileView::parse(&bytes).expect("valid");
        v.sample_data(&v.sample[1]).1.to_vec()
    };
    let mut max = vec![0xff; 9];
    max.push(0x01);
    assert_eq!(value(&max), [-1]);
    assert_eq!(value(&[0x80, 0x80, 0x00]), [0]);
    assert_eq!(value(&[0x81, 0x01]), [129]);
    // Around the one- and two-byte fast paths: the largest of each, the first of three
    // bytes, a two-byte encoding of a small value.
    assert_eq!(value(&[0x7f]), [127]);
    assert_eq!(value(&[0xff, 0x7f]), [16383]);
    assert_eq!(value(&[0x80, 0x80, 0x01]), [16384]);
    assert_eq!(value(&[0x85, 0x00]), [5]);
    let mut over = vec![0xff; 9];
    over.push(0x02);
    let mut eleven = vec![0xff; 10];
    eleven.push(0x01);
    for bad in [&over[..], &eleven, &[0x80], &[0x05, 0x80], &[0x80, 0x81]] {
        assert!(!parity(&with_value(bad)), "{bad:x?} accepted");
    }
}

#[test]
fn invalid_utf8_is_repaired_like_decode() {
    let mut p: Profile = common::read_case("pprof/internal/report/testdata/sample.cpu");
    p.string_table.push("marker-Q".into());
    let mut bytes = encode(&p);
    // Turn the marker's "Q" into a lone continuation byte.
    let at = bytes
        .windows(8)
        .position(|w| w == b"marker-Q")
        .expect("marker encoded");
    bytes[at + 7] = 0x80;
    assert!(parity(&bytes));
    let v = ProfileView::parse(&bytes).expect("valid");
    assert_eq!(v.string(v.string_count() as i64 - 1), "marker-\u{fffd}");
    assert_eq!(v.string(-1), "");
    assert_eq!(v.string(1 << 40), "");
}

#[test]
fn gzip_and_limits_match_decode() {
    let p: Profile = common::read_case("pprof/internal/report/testdata/sample.cpu");
    assert!(parity(&encode_gzip(&p)));
    let raw = encode(&p);
    let limits = DecodeLimits {
        max_decompressed_bytes: raw.len() as u64 - 1,
    };
    for bytes in [raw.clone(), encode_gzip(&p)] {
        assert!(matches!(
            decompress(&bytes, &limits),
            Err(PprofError::TooLarge { .. })
        ));
    }
    let exact = DecodeLimits {
        max_decompressed_bytes: raw.len() as u64,
    };
    assert_eq!(
        &*decompress(&encode_gzip(&p), &exact).expect("fits"),
        &raw[..]
    );
}

/// Deterministic random edits (overwrite, insert, delete a few bytes) of small corpus
/// profiles: a fuzz-style sweep of the parity contract that runs with the normal tests.
#[test]
fn random_edits_agree() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    let mut accepted = 0;
    for path in [
        "pprof/internal/report/testdata/sample.cpu",
        "pyroscope/pkg/og/convert/pprof/testdata/cpu.pb.gz",
    ] {
        let bytes = std::fs::read(common::corpus().join(path)).expect("corpus file");
        let raw = decompress(&bytes, &DecodeLimits::default())
            .expect("decompresses")
            .into_owned();
        for _ in 0..1500 {
            let mut m = raw.clone();
            for _ in 0..1 + next(3) {
                let at = next(m.len());
                match next(3) {
                    0 => m[at] = next(256) as u8,
                    1 => m.insert(at, next(256) as u8),
                    _ => {
                        m.remove(at);
                    }
                }
            }
            if parity(&m) {
                accepted += 1;
            }
        }
    }
    // Many edits land in values and keep the profile valid: both paths must read those.
    assert!(accepted > 100, "only {accepted} edited profiles decoded");
}

/// The checks after the walk read each large table in one pass without an early exit (the
/// largest string index, the largest id): the edge cases of that arithmetic, each accepted
/// or refused as `decode` does.
#[test]
fn index_checks_at_their_edges_agree() {
    let base: Profile = common::read_case("pprof/internal/report/testdata/sample.cpu");
    let last = base.string_table.len() as i64 - 1;
    let n_loc = base.location.len() as u64;
    type Edit = (&'static str, bool, fn(&mut Profile, i64, u64));
    let edits: [Edit; 16] = [
        ("last string index", true, |p, last, _| {
            p.function[0].name = last
        }),
        ("one past the strings", false, |p, last, _| {
            p.function[0].filename = last + 1
        }),
        (
            "a negative string index beside large ones",
            false,
            |p, last, _| {
                p.function[0].name = last;
                p.function[1].system_name = -1;
            },
        ),
        ("i64::MIN as a string index", false, |p, _, _| {
            p.function[0].name = i64::MIN
        }),
        ("a negative label key", false, |p, _, _| {
            p.sample[0].label.push(ember_pprof::Label {
                key: -5,
                ..Default::default()
            })
        }),
        ("a negative mapping filename", false, |p, _, _| {
            if let Some(m) = p.mapping.first_mut() {
                m.filename = -1;
            } else {
                p.function[0].name = -1;
            }
        }),
        ("no mapping (id 0)", true, |p, _, _| {
            p.location[0].mapping_id = 0
        }),
        ("a mapping id past the table", false, |p, _, _| {
            p.location[0].mapping_id = p.mapping.len() as u64 + 1
        }),
        ("no function (id 0) on a line", true, |p, _, _| {
            p.location[0].line[0].function_id = 0
        }),
        ("a function id past the table", false, |p, _, _| {
            p.location[0].line[0].function_id = p.function.len() as u64 + 1
        }),
        ("u64::MAX as a function id", false, |p, _, _| {
            p.location[0].line[0].function_id = u64::MAX
        }),
        ("the last location id", true, |p, _, n| {
            p.sample[0].location_id[0] = n
        }),
        ("location id 0 in a sample", false, |p, _, _| {
            p.sample[0].location_id[0] = 0
        }),
        ("a location id past the table", false, |p, _, n| {
            p.sample[0].location_id[0] = n + 1
        }),
        ("u64::MAX as a location id", false, |p, _, _| {
            p.sample[0].location_id[0] = u64::MAX
        }),
        ("sparse location ids", true, |p, _, n| {
            // Renumber one location out of the dense run, and its uses.
            let old = p.location[0].id;
            p.location[0].id = n + 1000;
            for s in &mut p.sample {
                for id in &mut s.location_id {
                    if *id == old {
                        *id = n + 1000;
                    }
                }
            }
        }),
    ];
    for (what, accepted, edit) in edits {
        let mut p = base.clone();
        edit(&mut p, last, n_loc);
        assert_eq!(parity(&encode(&p)), accepted, "{what}");
    }
    // Sparse ids with a sample pointing at one that does not exist.
    let mut p = base.clone();
    p.location[0].id = n_loc + 1000;
    p.sample[0].location_id[0] = n_loc + 999;
    assert!(!parity(&encode(&p)), "sparse ids, missing location");
}

/// The largest sample location id is folded in while the ids are decoded, carried from
/// sample to sample: a bad id in any sample, not only the first, and in either encoding
/// (packed, or one varint field per id), is refused as `decode` refuses it, and a
/// view's check does not carry over to the next profile parsed.
#[test]
fn a_bad_location_id_in_a_later_sample_is_refused_like_decode() {
    let base: Profile = common::read_case("pprof/internal/report/testdata/sample.cpu");
    let n = base.location.len() as u64;
    assert!(base.sample.len() > 2, "the case needs several samples");
    for (sample, id, accepted) in [
        (base.sample.len() - 1, n, true),
        (base.sample.len() - 1, n + 1, false),
        (base.sample.len() - 1, 0, false),
        (base.sample.len() / 2, u64::MAX, false),
        (1, n + 1, false),
    ] {
        let mut p = base.clone();
        let ids = &mut p.sample[sample].location_id;
        let at = ids.len() - 1;
        ids[at] = id;
        assert_eq!(
            parity(&encode(&p)),
            accepted,
            "sample {sample}, location id {id}"
        );
    }
    // Unpacked: each id of one sample as its own varint field.
    let mut raw = Vec::new();
    for s in ["", "cpu", "nanoseconds", "main"] {
        nested(&mut raw, 6, s.as_bytes());
    }
    let mut st = Vec::new();
    field(&mut st, 1, 0);
    varint(&mut st, 1);
    field(&mut st, 2, 0);
    varint(&mut st, 2);
    nested(&mut raw, 1, &st);
    let mut func = Vec::new();
    field(&mut func, 1, 0);
    varint(&mut func, 1);
    field(&mut func, 2, 0);
    varint(&mut func, 3);
    nested(&mut raw, 5, &func);
    let mut line = Vec::new();
    field(&mut line, 1, 0);
    varint(&mut line, 1);
    let mut loc = Vec::new();
    field(&mut loc, 1, 0);
    varint(&mut loc, 1);
    nested(&mut loc, 4, &line);
    nested(&mut raw, 4, &loc);
    let sample = |ids: &[u64]| {
        let mut s = Vec::new();
        for &id in ids {
            field(&mut s, 1, 0);
            varint(&mut s, id);
        }
        field(&mut s, 2, 0);
        varint(&mut s, 7);
        s
    };
    let mut good = raw.clone();
    nested(&mut good, 2, &sample(&[1, 1]));
    assert!(parity(&good), "unpacked ids of the one location");
    for bad in [[1, 2], [0, 1], [1, u64::MAX]] {
        let mut p = good.clone();
        nested(&mut p, 2, &sample(&bad));
        assert!(!parity(&p), "unpacked ids {bad:?} in the second sample");
    }
    // A refused profile's largest id does not stay with the tables of the next parse.
    let mut bad = good.clone();
    nested(&mut bad, 2, &sample(&[5]));
    let mut tables = ember_pprof::ViewTables::default();
    for raw in [&good, &bad, &good] {
        let fresh = ProfileView::parse(raw).is_ok();
        match ProfileView::parse_reusing(raw, u64::MAX, tables) {
            Ok(v) => {
                assert!(fresh);
                tables = v.into_tables();
            }
            Err(_) => {
                assert!(!fresh);
                tables = ember_pprof::ViewTables::default();
            }
        }
    }
}
