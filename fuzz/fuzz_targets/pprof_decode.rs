//! Fuzz target: `ember_pprof::decode` and the ingest decoder `ProfileView` on arbitrary bytes,
//! raw and gzip-wrapped.
//!
//! Beyond "no panic", it checks the properties the rest of Ember relies on for anything `decode`
//! accepts: the profile validates, its folded view can be computed for every sample type, and
//! encoding it (raw and gzip) and decoding again gives the same profile back. `ProfileView`
//! must accept exactly what `decode` accepts, hold the same content, and fail with the same
//! error.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;

/// Properties every successfully decoded profile must have.
fn check(profile: &ember_pprof::Profile) {
    ember_pprof::validate(profile).expect("decode returned a profile that does not validate");
    // Errors are fine here (e.g. no sample types); panics are not.
    let _ = ember_pprof::sample_index(profile, None);
    let _ = ember_pprof::sample_index(profile, Some("cpu"));
    for index in 0..profile.sample_type.len() {
        let _ = ember_pprof::folded_stacks(profile, index);
    }
    let again = ember_pprof::decode(&ember_pprof::encode(profile))
        .expect("re-decoding an encoded profile failed");
    assert_eq!(
        &again, profile,
        "raw encode/decode round trip changed the profile"
    );
    let again = ember_pprof::decode(&ember_pprof::encode_gzip(profile))
        .expect("re-decoding a gzip-encoded profile failed");
    assert_eq!(
        &again, profile,
        "gzip encode/decode round trip changed the profile"
    );
}

/// `ProfileView` (after `decompress`) agrees with `decode` on `bytes`.
fn check_view(bytes: &[u8], limits: &ember_pprof::DecodeLimits) {
    let owned = ember_pprof::decode_with_limits(bytes, limits);
    let viewed = ember_pprof::decompress(bytes, limits).and_then(|raw| {
        ember_pprof::ProfileView::parse(&raw).map(|v| {
            // Exercise the accessors the store uses on every location and sample.
            for loc in &v.location {
                let _ = v.location_lines(loc);
                let _ = v.mapping_position(loc.mapping_id);
            }
            for s in &v.sample {
                let (ids, _) = v.sample_data(s);
                for id in ids {
                    assert!(v.location_position(*id).is_some(), "validated id not found");
                }
            }
            v.to_profile()
        })
    });
    match (owned, viewed) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "ProfileView content differs from decode"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "different errors"),
        (Ok(_), Err(e)) => panic!("ProfileView rejected what decode accepts: {e}"),
        (Err(e), Ok(_)) => panic!("ProfileView accepted what decode rejects: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(profile) = ember_pprof::decode(data) {
        check(&profile);
    }
    check_view(data, &ember_pprof::DecodeLimits::default());
    // Most real profiles arrive gzip'd: the same bytes behind a gzip header must behave the same
    // way (decoding through the decompressor, and the size limit, are separate code paths).
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).expect("writing to a Vec cannot fail");
    let wrapped = gz.finish().expect("writing to a Vec cannot fail");
    if let Ok(profile) = ember_pprof::decode(&wrapped) {
        check(&profile);
    }
    // A tiny decompression limit must give an error, never a panic or a partial profile.
    let limits = ember_pprof::DecodeLimits {
        max_decompressed_bytes: 64,
    };
    if let Ok(profile) = ember_pprof::decode_with_limits(&wrapped, &limits) {
        check(&profile);
    }
    check_view(&wrapped, &limits);
});
