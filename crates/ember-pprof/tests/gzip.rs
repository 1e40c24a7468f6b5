//! `decompress` on gzip bodies whose size hint lies, of several members, over the limit
//! when added up, with bytes after the last member, or with a header checksum: the result
//! and the error kind of each are pinned, so that a faster inflater (libdeflate was tried,
//! see BENCHMARKS.md, session 17) cannot change what is accepted or how it is refused.

mod common;

use std::io::{ErrorKind, Write};

use ember_pprof::{DecodeLimits, PprofError, decompress, encode};

fn raw() -> Vec<u8> {
    encode(&common::read_case(
        "pprof/internal/report/testdata/sample.cpu",
    ))
}

fn gz(part: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(part).unwrap();
    e.finish().unwrap()
}

fn limit(n: usize) -> DecodeLimits {
    DecodeLimits {
        max_decompressed_bytes: n as u64,
    }
}

/// The body with its last four bytes (the last member's ISIZE) set to `size`.
fn with_isize(mut body: Vec<u8>, size: u32) -> Vec<u8> {
    let at = body.len() - 4;
    body[at..].copy_from_slice(&size.to_le_bytes());
    body
}

/// The I/O error kind of a `Gzip` error, panicking on anything else.
fn gzip_kind(r: Result<std::borrow::Cow<'_, [u8]>, PprofError>) -> ErrorKind {
    match r {
        Err(PprofError::Gzip(e)) => e.kind(),
        other => panic!("expected a gzip error, got {:?}", other.map(|b| b.len())),
    }
}

fn too_large(r: Result<std::borrow::Cow<'_, [u8]>, PprofError>) -> bool {
    matches!(r, Err(PprofError::TooLarge { .. }))
}

#[test]
fn a_member_whose_isize_lies_is_refused_as_corrupt_whichever_way_it_lies() {
    let raw = raw();
    let n = raw.len() as u32;
    // gzip checks ISIZE against what the member decoded to: a lie either way is a corrupt
    // member, never a shorter or longer result, never "too large".
    for lie in [0, 1, n / 2, n - 1, n + 1, n * 2, n * 1000, u32::MAX] {
        let body = with_isize(gz(&raw), lie);
        let kind = gzip_kind(decompress(&body, &DecodeLimits::default()));
        assert_eq!(kind, ErrorKind::InvalidData, "ISIZE {lie}");
        // Under a limit between the truth and the lie, too.
        let kind = gzip_kind(decompress(&body, &limit(raw.len() + 10)));
        assert_eq!(kind, ErrorKind::InvalidData, "ISIZE {lie} under a limit");
    }
    // Over the limit, the limit speaks first, whatever the hint says.
    for lie in [1, n / 2, n * 2, u32::MAX] {
        let body = with_isize(gz(&raw), lie);
        assert!(
            too_large(decompress(&body, &limit(raw.len() / 2))),
            "ISIZE {lie}"
        );
    }
}

#[test]
fn a_size_hint_smaller_or_larger_than_the_body_decodes_the_same() {
    let raw = raw();
    // The hint is the last member's ISIZE: here far smaller than the whole ...
    let (big, small) = raw.split_at(raw.len() - 10);
    let mut body = gz(big);
    body.extend(gz(small));
    assert_eq!(
        &*decompress(&body, &DecodeLimits::default()).unwrap(),
        &raw[..]
    );
    assert_eq!(&*decompress(&body, &limit(raw.len())).unwrap(), &raw[..]);
    assert!(too_large(decompress(&body, &limit(raw.len() - 1))));
    // ... and here larger than the first member (which then has room to spare).
    let (small, big) = raw.split_at(10);
    let mut body = gz(small);
    body.extend(gz(big));
    assert_eq!(
        &*decompress(&body, &DecodeLimits::default()).unwrap(),
        &raw[..]
    );
    assert!(too_large(decompress(&body, &limit(raw.len() - 1))));
    // An empty last member: no hint at all.
    let mut body = gz(&raw);
    body.extend(gz(&[]));
    assert_eq!(
        &*decompress(&body, &DecodeLimits::default()).unwrap(),
        &raw[..]
    );
}

#[test]
fn a_bomb_whose_isize_claims_little_is_still_cut_at_the_limit() {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for _ in 0..16 {
        e.write_all(&vec![0u8; 1 << 20]).unwrap();
    }
    let bomb = e.finish().unwrap();
    for lie in [1, 1000, 1 << 20, 16 << 20] {
        let body = with_isize(bomb.clone(), lie);
        assert!(too_large(decompress(&body, &limit(1 << 20))), "ISIZE {lie}");
    }
    // Honest, and at exactly its size: decodes; one byte less: refused.
    assert_eq!(decompress(&bomb, &limit(16 << 20)).unwrap().len(), 16 << 20);
    assert!(too_large(decompress(&bomb, &limit((16 << 20) - 1))));
}

#[test]
fn members_are_decoded_one_after_the_other_and_the_limit_counts_them_all() {
    let raw = raw();
    let third = raw.len() / 3;
    let parts = [&raw[..third], &raw[third..2 * third], &raw[2 * third..]];
    let body: Vec<u8> = parts.iter().flat_map(|p| gz(p)).collect();
    assert_eq!(
        &*decompress(&body, &DecodeLimits::default()).unwrap(),
        &raw[..]
    );
    // Every member alone is under the limit; together they are over it.
    let each_fits = limit(raw.len() / 2);
    assert!(parts.iter().all(|p| decompress(&gz(p), &each_fits).is_ok()));
    assert!(too_large(decompress(&body, &each_fits)));
    assert!(too_large(decompress(&body, &limit(raw.len() - 1))));
    assert_eq!(
        decompress(&body, &limit(raw.len())).unwrap().len(),
        raw.len()
    );
    // The same member twice is twice the content (not once: the trailers are equal).
    let mut twice = gz(&raw);
    twice.extend(gz(&raw));
    assert_eq!(
        &*decompress(&twice, &DecodeLimits::default()).unwrap(),
        &[&raw[..], &raw[..]].concat()[..]
    );
    // A hundred small members.
    let many: Vec<u8> = raw.chunks(100).flat_map(gz).collect();
    assert_eq!(
        &*decompress(&many, &DecodeLimits::default()).unwrap(),
        &raw[..]
    );
}

#[test]
fn bytes_after_the_last_member_are_an_error() {
    let raw = raw();
    let body = gz(&raw);
    let next = gz(&raw);
    let mut bad_crc = next.clone();
    let at = bad_crc.len() - 8;
    bad_crc[at] ^= 1;
    // What follows the member is read as another member: too short to be one is "ends
    // early", a wrong header or checksum is "invalid" (as the streaming decoder says).
    use ErrorKind::{InvalidData as Invalid, UnexpectedEof as Eof};
    let tails: [(&str, &[u8], ErrorKind); 9] = [
        ("one zero byte", &[0], Eof),
        ("eight zero bytes", &[0; 8], Invalid),
        ("text", b"trailing text", Invalid),
        ("the first magic byte", &[0x1f], Eof),
        ("the magic", &[0x1f, 0x8b], Eof),
        ("a header", &next[..10], Eof),
        ("half a member", &next[..next.len() / 2], Eof),
        ("a member less its last byte", &next[..next.len() - 1], Eof),
        ("a member with a wrong checksum", &bad_crc, Invalid),
    ];
    for (what, tail, kind) in tails {
        let b = [&body[..], tail].concat();
        assert_eq!(
            gzip_kind(decompress(&b, &DecodeLimits::default())),
            kind,
            "{what}"
        );
    }
    // The body itself cut short, in its header, its data and its trailer.
    for cut in [2, 5, 10, 11, body.len() / 2, body.len() - 5, body.len() - 1] {
        let kind = gzip_kind(decompress(&body[..cut], &DecodeLimits::default()));
        assert_eq!(kind, Eof, "cut at {cut}");
    }
}

#[test]
fn a_header_checksum_is_checked() {
    let raw = raw();
    let plain = gz(&raw);
    // The same member with FHCRC set and the header's CRC-16 after its ten bytes.
    let header_crc = |header: &[u8]| {
        let mut h = flate2::Crc::new();
        h.update(header);
        (h.sum() & 0xffff) as u16
    };
    let mut header = plain[..10].to_vec();
    header[3] |= 0x02;
    let mut good = header.clone();
    good.extend_from_slice(&header_crc(&header).to_le_bytes());
    good.extend_from_slice(&plain[10..]);
    assert_eq!(
        &*decompress(&good, &DecodeLimits::default()).unwrap(),
        &raw[..]
    );
    let mut bad = header.clone();
    bad.extend_from_slice(&(header_crc(&header) ^ 1).to_le_bytes());
    bad.extend_from_slice(&plain[10..]);
    assert_eq!(
        gzip_kind(decompress(&bad, &DecodeLimits::default())),
        ErrorKind::InvalidData
    );
}

#[test]
fn a_zlib_wrapped_body_is_not_gzip() {
    // Only the gzip magic means compressed; anything else is taken as it is (and a zlib
    // stream then fails as a profile, not here).
    let raw = raw();
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&raw).unwrap();
    let z = e.finish().unwrap();
    assert_eq!(&*decompress(&z, &DecodeLimits::default()).unwrap(), &z[..]);
}
