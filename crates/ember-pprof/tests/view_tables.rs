//! `ProfileView::parse_reusing` (a parse into the emptied tables of an earlier view) against
//! a fresh `ProfileView::parse`: the same content and the same errors on every corpus
//! profile, handed tables that held the profile before it, and on truncated and bit-flipped
//! variants, whatever the tables held.

mod common;

use ember_pprof::{DecodeLimits, ProfileView, ViewTables, decompress};

/// Parses `raw` fresh and into `tables`; asserts both agree; returns the tables to reuse.
fn agree(raw: &[u8], tables: ViewTables) -> ViewTables {
    let fresh = ProfileView::parse(raw);
    let reused = ProfileView::parse_reusing(raw, u64::MAX, tables);
    match (fresh, reused) {
        (Ok(f), Ok(r)) => {
            assert_eq!(
                r.to_profile(),
                f.to_profile(),
                "reused tables changed the content"
            );
            assert_eq!(r.decoded_bytes(), f.decoded_bytes());
            r.into_tables()
        }
        (Err(f), Err(r)) => {
            assert_eq!(r.to_string(), f.to_string());
            ViewTables::default()
        }
        (f, r) => panic!(
            "fresh parse {:?}, reused {:?}",
            f.map(|_| ()),
            r.map(|_| ())
        ),
    }
}

/// The good corpus cases, decompressed.
fn good_raws() -> Vec<Vec<u8>> {
    common::good_cases()
        .iter()
        .map(|c| {
            decompress(&c.bytes(), &DecodeLimits::default())
                .expect("good case decompresses")
                .into_owned()
        })
        .collect()
}

#[test]
fn every_corpus_profile_parses_the_same_into_reused_tables() {
    let mut tables = ViewTables::default();
    let mut reused_nonempty = 0;
    for case in common::cases() {
        let bytes = case.bytes();
        let Ok(raw) = decompress(&bytes, &DecodeLimits::default()) else {
            continue;
        };
        if tables.capacity_bytes() > 0 {
            reused_nonempty += 1;
        }
        tables = agree(&raw, tables);
    }
    assert!(
        reused_nonempty > 10,
        "only {reused_nonempty} parses reused tables"
    );
}

#[test]
fn damaged_inputs_get_the_same_errors_with_reused_tables() {
    // Tables of the largest good profile: every damaged parse starts with full columns.
    let raws = good_raws();
    let largest = raws.iter().max_by_key(|r| r.len()).expect("good cases");
    for raw in &raws {
        let step = (raw.len() / 20).max(1);
        for cut in (0..raw.len()).step_by(step) {
            let full = ProfileView::parse(largest).unwrap().into_tables();
            agree(&raw[..cut], full);
        }
        let mut flipped = raw.clone();
        for i in (0..flipped.len()).step_by(61) {
            flipped[i] ^= 0x5a;
        }
        let full = ProfileView::parse(largest).unwrap().into_tables();
        agree(&flipped, full);
    }
}

#[test]
fn the_decoded_size_limit_counts_content_not_reused_capacity() {
    let raws = good_raws();
    let largest = raws.iter().max_by_key(|r| r.len()).expect("good cases");
    for raw in &raws {
        let need = ProfileView::parse(raw).unwrap().decoded_bytes();
        // Under, at and over what the content takes: the same answer as a fresh parse,
        // although the reused tables' capacity is far above every one of these limits.
        for limit in [need / 2, need, need.saturating_mul(2)] {
            let big = ProfileView::parse(largest).unwrap().into_tables();
            let fresh = ProfileView::parse_within(raw, limit).map(|v| v.to_profile());
            let reused = ProfileView::parse_reusing(raw, limit, big).map(|v| v.to_profile());
            match (fresh, reused) {
                (Ok(f), Ok(r)) => assert_eq!(f, r),
                (Err(f), Err(r)) => assert_eq!(f.to_string(), r.to_string()),
                (f, r) => panic!(
                    "limit {limit}: fresh {:?}, reused {:?}",
                    f.is_ok(),
                    r.is_ok()
                ),
            }
        }
    }
}

/// The string table is handed on with the other tables: a profile of many strings and
/// little else leaves its string table's room to the next parse (each parse grew it from
/// nothing before, ~1,800 strings a realistic profile), and a parse into that room reads
/// the next profile's strings, not the previous one's.
#[test]
fn the_string_table_is_handed_on_with_the_other_tables() {
    use ember_pprof::{Function, Profile, ValueType, encode};
    let profile = |prefix: &str, n: usize| {
        let mut string_table = vec![String::new(), "cpu".into(), "ns".into()];
        string_table.extend((0..n).map(|i| format!("{prefix}{i}")));
        Profile {
            sample_type: vec![ValueType { r#type: 1, unit: 2 }],
            function: vec![Function {
                id: 1,
                name: 3,
                ..Default::default()
            }],
            string_table,
            ..Default::default()
        }
    };
    let many = encode(&profile("a", 4000));
    let view = ProfileView::parse(&many).unwrap();
    assert_eq!(view.string_count(), 4003);
    let tables = view.into_tables();
    assert!(
        tables.capacity_bytes() >= 4003 * 16,
        "the string table's room was not kept: {} bytes",
        tables.capacity_bytes()
    );
    let few = encode(&profile("b", 10));
    let tables = agree(&few, tables);
    let view = ProfileView::parse_reusing(&few, u64::MAX, tables).unwrap();
    assert_eq!(view.string_count(), 13);
    assert_eq!(view.string(3), "b0");
    assert_eq!(view.string(12), "b9");
    assert_eq!(view.string(13), "", "past the table");
    assert_eq!(view.string_bytes(12), b"b9");
}
