//! The on-disk format of a log segment, and reading one back.
//!
//! A segment of the current format (version 2) starts with the 8 bytes [`SEGMENT_MAGIC`],
//! then holds records framed so that a reader can find the next record after damage:
//!
//! ```text
//! record = magic (4 bytes E7 5A 1C 93) · payload length (u32 LE) · crc32 of the payload
//!          (u32 LE) · crc32 of the 12 bytes before (u32 LE) · payload
//! ```
//!
//! The header's own checksum means a damaged length is never believed: a reader that meets
//! a record that does not check out searches forward for the next magic whose header and
//! payload both check, and goes on from there. A record torn by a crash or a failed write,
//! or bytes flipped on disk, cost only the records they touch.
//!
//! Segments written before this format (version 1: records of `u32 length`, `u32 crc32`,
//! payload, no segment header) are still read, up to their first damaged record (their
//! framing has nothing to resynchronise on). A version-1 segment never starts with
//! [`SEGMENT_MAGIC`]: read as a length, its first four bytes exceed [`MAX_RECORD`].

/// First bytes of every segment of the current format.
pub(crate) const SEGMENT_MAGIC: [u8; 8] = *b"EMBRWAL2";

/// First bytes of every record of the current format.
const RECORD_MAGIC: [u8; 4] = [0xE7, 0x5A, 0x1C, 0x93];

/// Bytes of a record header of the current format.
pub(crate) const HEADER: usize = 16;

/// Largest accepted record; a longer one in a segment is treated as damage.
pub(crate) const MAX_RECORD: u32 = 1 << 30;

/// Appends `payload` to `buf`, framed as one record of the current format.
#[cfg(test)]
pub(crate) fn put_record(buf: &mut Vec<u8>, payload: &[u8]) {
    let start = buf.len();
    buf.resize(start + HEADER, 0);
    buf.extend_from_slice(payload);
    frame(&mut buf[start..]);
}

/// Makes `record` one framed record of the current format: its first [`HEADER`] bytes
/// (reserved by the caller, their content ignored) become the header of the payload that
/// follows them. Framing in place spares a copy of the payload into a second buffer.
///
/// # Panics
/// If `record` is shorter than [`HEADER`] or its payload longer than `u32::MAX` bytes
/// (the store's decompression limits keep records far below).
pub(crate) fn frame(record: &mut [u8]) {
    let (header, payload) = record.split_at_mut(HEADER);
    let len = u32::try_from(payload.len()).expect("a log record under 4 GiB");
    header[..4].copy_from_slice(&RECORD_MAGIC);
    header[4..8].copy_from_slice(&len.to_le_bytes());
    header[8..12].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let header_crc = crc32fast::hash(&header[..12]);
    header[12..].copy_from_slice(&header_crc.to_le_bytes());
}

/// A run of bytes a segment read skipped: a torn or corrupt record (or several).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Damage {
    /// Offset of the first skipped byte in the segment.
    pub(crate) offset: usize,
    /// Bytes skipped.
    pub(crate) len: usize,
    /// Records the skipped bytes held, as far as their headers still tell (at least 1).
    pub(crate) records: usize,
    /// Whether the damage runs to the end of the segment (a torn tail: what a crash or a
    /// failed write leaves; only unacknowledged records are lost there).
    pub(crate) tail: bool,
}

fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// What is at `pos` of a current-format segment.
enum At {
    /// An intact record: its payload range.
    Record(std::ops::Range<usize>),
    /// A header that checks out but a payload that does not (flipped bits, or cut short).
    BadPayload,
    /// No record header here.
    Nothing,
}

fn record_at(bytes: &[u8], pos: usize) -> At {
    let Some(h) = bytes.get(pos..pos + HEADER) else {
        return At::Nothing;
    };
    if h[..4] != RECORD_MAGIC || crc32fast::hash(&h[..12]) != word(h, 12) {
        return At::Nothing;
    }
    let len = word(h, 4);
    let start = pos + HEADER;
    match bytes.get(start..start + len as usize) {
        Some(p) if len <= MAX_RECORD && crc32fast::hash(p) == word(h, 8) => {
            At::Record(start..start + len as usize)
        }
        _ => At::BadPayload,
    }
}

/// Reads every intact record of one segment's bytes, in order, calling `f` with each
/// record's offset and payload; returns the damaged runs it skipped, in order.
pub(crate) fn scan(bytes: &[u8], mut f: impl FnMut(usize, &[u8])) -> Vec<Damage> {
    if bytes.starts_with(&SEGMENT_MAGIC) {
        scan_v2(bytes, &mut f)
    } else {
        scan_v1(bytes, &mut f)
    }
}

fn scan_v2(bytes: &[u8], f: &mut impl FnMut(usize, &[u8])) -> Vec<Damage> {
    let mut damage = Vec::new();
    let mut pos = SEGMENT_MAGIC.len();
    while pos < bytes.len() {
        match record_at(bytes, pos) {
            At::Record(payload) => {
                f(pos, &bytes[payload.clone()]);
                pos = payload.end;
            }
            bad => {
                // Resynchronise: the next offset holding an intact record. Headers that
                // check out but whose payloads do not are counted as lost records.
                let start = pos;
                let mut records = usize::from(matches!(bad, At::BadPayload));
                let mut next = None;
                let mut at = pos + 1;
                while let Some(found) = bytes[at.min(bytes.len())..]
                    .windows(RECORD_MAGIC.len())
                    .position(|w| w == RECORD_MAGIC)
                {
                    let candidate = at + found;
                    match record_at(bytes, candidate) {
                        At::Record(_) => {
                            next = Some(candidate);
                            break;
                        }
                        At::BadPayload => records += 1,
                        At::Nothing => {}
                    }
                    at = candidate + 1;
                }
                let end = next.unwrap_or(bytes.len());
                damage.push(Damage {
                    offset: start,
                    len: end - start,
                    records: records.max(1),
                    tail: next.is_none(),
                });
                pos = end;
            }
        }
    }
    damage
}

fn scan_v1(bytes: &[u8], f: &mut impl FnMut(usize, &[u8])) -> Vec<Damage> {
    let mut pos = 0usize;
    while pos < bytes.len() {
        let Some(h) = bytes.get(pos..pos + 8) else {
            break;
        };
        let (len, crc) = (word(h, 0), word(h, 4));
        let end = pos + 8 + len as usize;
        match bytes.get(pos + 8..end) {
            Some(p) if len <= MAX_RECORD && crc32fast::hash(p) == crc => f(pos, p),
            _ => break,
        }
        pos = end;
    }
    if pos < bytes.len() {
        // Nothing to resynchronise on: the rest of the segment is lost.
        return vec![Damage {
            offset: pos,
            len: bytes.len() - pos,
            records: 1,
            tail: true,
        }];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(payloads: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
        let mut buf = SEGMENT_MAGIC.to_vec();
        let mut offsets = Vec::new();
        for p in payloads {
            offsets.push(buf.len());
            put_record(&mut buf, p);
        }
        (buf, offsets)
    }

    fn read(bytes: &[u8]) -> (Vec<Vec<u8>>, Vec<Damage>) {
        let mut out = Vec::new();
        let damage = scan(bytes, |_, p| out.push(p.to_vec()));
        (out, damage)
    }

    #[test]
    fn intact_segments_read_back_every_record() {
        let (bytes, _) = segment(&[b"one", b"", b"three"]);
        let (got, damage) = read(&bytes);
        assert_eq!(got, vec![b"one".to_vec(), Vec::new(), b"three".to_vec()]);
        assert!(damage.is_empty());
    }

    #[test]
    fn a_flipped_length_or_payload_costs_one_record() {
        let (clean, offsets) = segment(&[b"first record", b"second record", b"third record"]);
        // A bit flipped in the payload, then one in the length of the same record.
        for at in [offsets[1] + HEADER + 3, offsets[1] + 5] {
            let mut bytes = clean.clone();
            bytes[at] ^= 0x10;
            let (got, damage) = read(&bytes);
            assert_eq!(
                got,
                vec![b"first record".to_vec(), b"third record".to_vec()]
            );
            assert_eq!(damage.len(), 1, "{damage:?}");
            assert_eq!(damage[0].offset, offsets[1]);
            assert_eq!(damage[0].len, offsets[2] - offsets[1]);
            assert!(!damage[0].tail);
        }
    }

    #[test]
    fn a_torn_record_in_the_middle_and_a_torn_tail_are_skipped() {
        let (clean, offsets) = segment(&[b"a", b"bbbbbbbbbbbbbbbbbbbbbbbb", b"c"]);
        // Record b cut short (as a failed write left it) with c written after it.
        let mut bytes = clean[..offsets[1] + HEADER + 5].to_vec();
        bytes.extend_from_slice(&clean[offsets[2]..]);
        // And a tail torn inside a header.
        bytes.extend_from_slice(&clean[offsets[1]..offsets[1] + 7]);
        let (got, damage) = read(&bytes);
        assert_eq!(got, vec![b"a".to_vec(), b"c".to_vec()]);
        assert_eq!(damage.len(), 2, "{damage:?}");
        assert!(!damage[0].tail && damage[1].tail);
        assert_eq!(damage[1].len, 7);
    }

    #[test]
    fn version_one_segments_read_up_to_their_first_damage() {
        let mut bytes = Vec::new();
        for p in [&b"old one"[..], b"old two"] {
            bytes.extend_from_slice(&(p.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32fast::hash(p).to_le_bytes());
            bytes.extend_from_slice(p);
        }
        let (got, damage) = read(&bytes);
        assert_eq!(got, vec![b"old one".to_vec(), b"old two".to_vec()]);
        assert!(damage.is_empty());
        bytes.extend_from_slice(&[1, 2, 3]);
        let (got, damage) = read(&bytes);
        assert_eq!(got.len(), 2);
        assert_eq!(damage.len(), 1);
        assert!(word(&SEGMENT_MAGIC, 0) > MAX_RECORD);
    }
}
