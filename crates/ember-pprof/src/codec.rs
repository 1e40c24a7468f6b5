//! Reading and writing profile.proto bytes: gzip detection, size limits,
//! legacy-format detection, and file helpers.

use std::borrow::Cow;
use std::io::{ErrorKind, Write};
use std::path::Path;

use prost::Message;
use prost::encoding::{DecodeContext, WireType, decode_key};

use crate::error::PprofError;
use crate::proto::Profile;
use crate::validate::validate;

/// Limits applied while decoding untrusted input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest accepted size of the protobuf message after gzip
    /// decompression (and of raw, uncompressed input). Decompression stops as
    /// soon as this is exceeded, so a gzip bomb costs at most this much memory.
    pub max_decompressed_bytes: u64,
}

impl Default for DecodeLimits {
    /// 256 MiB.
    fn default() -> Self {
        DecodeLimits {
            max_decompressed_bytes: 256 * 1024 * 1024,
        }
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Decodes a gzip'd or raw profile with [`DecodeLimits::default`] and
/// validates it (see [`validate`]).
pub fn decode(bytes: &[u8]) -> Result<Profile, PprofError> {
    decode_with_limits(bytes, &DecodeLimits::default())
}

/// Decodes a gzip'd or raw profile (detected by the gzip magic bytes) under
/// `limits` and validates it. Invalid UTF-8 in the string table is replaced
/// by U+FFFD rather than rejected, because Go producers may emit it.
pub fn decode_with_limits(bytes: &[u8], limits: &DecodeLimits) -> Result<Profile, PprofError> {
    decode_raw(&decompress(bytes, limits)?)
}

/// Undoes gzip (detected by the magic bytes) under `limits`; raw input is borrowed as is
/// (and must itself be within the limit). Decompression stops one byte past the limit, so
/// a gzip bomb costs at most that much memory.
pub fn decompress<'a>(bytes: &'a [u8], limits: &DecodeLimits) -> Result<Cow<'a, [u8]>, PprofError> {
    let limit = limits.max_decompressed_bytes;
    if !bytes.starts_with(&GZIP_MAGIC) {
        if bytes.len() as u64 > limit {
            return Err(PprofError::TooLarge { limit });
        }
        return Ok(Cow::Borrowed(bytes));
    }
    // Size the output once: the gzip trailer's ISIZE is the (single-member) uncompressed
    // size mod 2^32. It is only a hint from the client, so it is capped by what deflate can
    // expand to (1032:1), by the limit and by 64 MiB: it must not become the allocation a
    // bomb wants. Without a usable hint, guess 4x expansion.
    let isize_hint = bytes
        .len()
        .checked_sub(4)
        .and_then(|at| bytes.get(at..))
        .and_then(|t| <[u8; 4]>::try_from(t).ok())
        .map(|t| u32::from_le_bytes(t) as usize)
        .filter(|&n| n > 0 && n <= bytes.len().saturating_mul(1032));
    let guess = isize_hint
        .unwrap_or_else(|| bytes.len().saturating_mul(4))
        .min(64 << 20);
    // One byte past the limit tells "exactly at" from "over"; the output never grows beyond.
    let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let mut out = Vec::with_capacity(guess.min(cap));
    let mut rest = bytes;
    // Every member (gzip files may be concatenations), each inflated straight into `out`
    // in as few calls as its size allows: no copy of the input through a read buffer, and
    // no copy of the output into a window while it all fits.
    while !rest.is_empty() {
        let mut member = flate2::Decompress::new_gzip(15);
        loop {
            if out.len() == out.capacity() {
                if out.len() >= cap {
                    return Err(PprofError::TooLarge { limit });
                }
                out.reserve_exact(out.len().max(64 << 10).min(cap - out.len()));
            }
            let (read, written) = (member.total_in(), out.len());
            let input = usize::try_from(read)
                .ok()
                .and_then(|r| rest.get(r..))
                .unwrap_or(&[]);
            let status = member
                .decompress_vec(input, &mut out, flate2::FlushDecompress::Finish)
                .map_err(|e| PprofError::Gzip(std::io::Error::new(ErrorKind::InvalidData, e)))?;
            if status == flate2::Status::StreamEnd {
                let consumed = usize::try_from(member.total_in()).unwrap_or(usize::MAX);
                rest = rest.get(consumed..).unwrap_or(&[]);
                break;
            }
            // Not at the member's end: either `out` is full (grow it above), or the input
            // ran out.
            let stuck = member.total_in() == read && out.len() == written;
            if out.len() < out.capacity() || stuck {
                return Err(PprofError::Gzip(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "gzip stream ends before its last member does",
                )));
            }
        }
    }
    if out.len() as u64 > limit {
        return Err(PprofError::TooLarge { limit });
    }
    Ok(Cow::Owned(out))
}

/// Decodes and validates a raw (not gzip'd) profile.proto message.
pub(crate) fn decode_raw(raw: &[u8]) -> Result<Profile, PprofError> {
    if let Some(kind) = legacy_kind(raw) {
        return Err(PprofError::LegacyFormat { kind });
    }
    let profile = match decode_lossy(raw) {
        Ok(p) => p,
        Err(e) => {
            // Only once protobuf parsing failed is "starts with a line of
            // text" a safe sign of some other text format.
            return Err(if looks_like_text(raw) {
                PprofError::LegacyFormat { kind: "text" }
            } else {
                PprofError::Decode(e)
            });
        }
    };
    validate(&profile)?;
    Ok(profile)
}

/// `Profile.string_table`'s field number.
const STRING_TABLE: u32 = 6;

/// prost's decoder for every field but the string table, whose entries are read here as
/// bytes and repaired (invalid UTF-8 becomes U+FFFD): prost's `string` fields reject a whole
/// profile for one such entry, and Go producers write them (Go strings are byte strings).
///
/// This is prost's own `Message::merge` loop with that one field taken out, so every other
/// byte, wire error and error text (which names the field) is prost's. `decode_key`,
/// `merge_field` and `DecodeContext` are the (doc-hidden) API prost's generated code is
/// built on; a prost upgrade that changes them fails to compile here, not silently.
fn decode_lossy(raw: &[u8]) -> Result<Profile, prost::DecodeError> {
    let mut profile = Profile::default();
    let mut buf = raw;
    while !buf.is_empty() {
        let (tag, wire) = decode_key(&mut buf)?;
        if tag == STRING_TABLE && wire == WireType::LengthDelimited {
            let at = buf;
            if let Some(entry) = length_delimited(&mut buf) {
                // `from_utf8`'s check is the fast one; the lossy walk only for repairs.
                let entry = match std::str::from_utf8(entry) {
                    Ok(s) => s.to_owned(),
                    Err(_) => String::from_utf8_lossy(entry).into_owned(),
                };
                profile.string_table.push(entry);
                continue;
            }
            // A bad length: prost reads the field again and reports it.
            buf = at;
        }
        profile.merge_field(tag, wire, &mut buf, DecodeContext::default())?;
    }
    Ok(profile)
}

/// The payload of a length-delimited field whose length `buf` starts with, or `None` when
/// the length is malformed or longer than what is left.
fn length_delimited<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = prost::decode_length_delimiter(&mut *buf).ok()?;
    let (payload, rest) = buf.split_at_checked(len)?;
    *buf = rest;
    Some(payload)
}

/// Recognises pprof's pre-proto inputs so users get a pointed message instead
/// of a protobuf wire error. A profile.proto message never starts with a zero
/// byte (field number 0 is invalid), and the known legacy text headers cannot
/// begin a valid message (their second byte breaks the wire type of the
/// field named by the first).
pub(crate) fn legacy_kind(raw: &[u8]) -> Option<&'static str> {
    if raw.len() >= 8 && raw[..4] == [0, 0, 0, 0] {
        return Some("binary CPU profile");
    }
    let head = &raw[..raw.len().min(64)];
    let text_start = |prefix: &str| head.starts_with(prefix.as_bytes());
    if text_start("heap profile:") || text_start("heap_v2/") || text_start("--- heapz") {
        return Some("text heap profile");
    }
    if text_start("--- contention") || text_start("--- mutex") || text_start("--- delay") {
        return Some("text contention profile");
    }
    if text_start("--- threadz")
        || text_start("threadcreate profile:")
        || text_start("goroutine profile:")
    {
        return Some("text thread profile");
    }
    if text_start("growth profile:") {
        return Some("text heap profile");
    }
    None
}

/// True when the input starts with a line of printable ASCII.
fn looks_like_text(raw: &[u8]) -> bool {
    let head = &raw[..raw.len().min(256)];
    head.iter()
        .position(|&b| b == b'\n')
        .is_some_and(|end| end >= 4 && head[..end].iter().all(|&b| (0x20..0x7f).contains(&b)))
}

/// Reads and decodes a profile file (gzip'd or raw) with default limits.
pub fn read_file(path: &Path) -> Result<Profile, PprofError> {
    let bytes = std::fs::read(path).map_err(|source| PprofError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode(&bytes)
}

/// Encodes `profile` as a raw (uncompressed) protobuf message.
pub fn encode(profile: &Profile) -> Vec<u8> {
    profile.encode_to_vec()
}

/// Encodes `profile` as a gzip'd protobuf message, the usual on-disk form.
pub fn encode_gzip(profile: &Profile) -> Vec<u8> {
    let raw = encode(profile);
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(raw.len() / 4 + 64),
        flate2::Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(&raw);
    enc.finish().unwrap_or_default()
}

/// Writes `profile` gzip'd to `path`.
pub fn write_file(profile: &Profile, path: &Path) -> Result<(), PprofError> {
    std::fs::write(path, encode_gzip(profile)).map_err(|source| PprofError::Io {
        path: path.to_path_buf(),
        source,
    })
}
