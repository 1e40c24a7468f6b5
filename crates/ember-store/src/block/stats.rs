//! What a block's bytes are spent on ([`breakdown`]): for measuring the storage cost of
//! each part of the layout (`examples/block_stats.rs`), not used by the store itself.

use object_store::path::Path as ObjPath;

use super::{MAGIC, MAGIC_V4, TRAILER, read_index};
use crate::encoding::Reader;
use crate::head::TenantHead;
use crate::section_codec::{Compressor, decompress};

/// Bytes of one block file by part: each section's compressed head split between its parts
/// (symbol tables, stack tree, series, and in the fourth format the per-profile columns and
/// sample labels) in proportion to what each part compresses to on its own, then rollups,
/// time chunks (their frame trees with names; in the current format the map from their
/// stack nodes to frames; their profiles), and index with trailer. Parts are summed over the
/// block's sections. `None` when the file is not a readable block of the current or the
/// fourth format.
pub fn breakdown(file: &[u8]) -> Option<Vec<(String, u64)>> {
    let size = file.len() as u64;
    let trailer = file.get(file.len().checked_sub(TRAILER as usize)?..)?;
    let version = match &trailer[16..] {
        m if m == MAGIC => super::CURRENT_FORMAT,
        m if m == MAGIC_V4 => 4,
        _ => return None,
    };
    let columns = version >= 5;
    let word = |at: usize| u64::from_le_bytes(trailer[at..at + 8].try_into().unwrap_or([0; 8]));
    let (index_at, index_len) = (word(0), word(8));
    let index = file.get(index_at as usize..(index_at + index_len) as usize)?;
    let (sections, _) = read_index(index, &ObjPath::from("stats"), index_at, version)?;
    let names: Vec<&str> = if columns {
        let mut n = TenantHead::PART_NAMES[..5].to_vec();
        n.push("series, times and the sample label set table");
        n
    } else {
        TenantHead::PART_NAMES.to_vec()
    };
    let mut parts = vec![0f64; names.len()];
    let mut rollups = 0u64;
    // Time chunks: their frame trees with names, node maps, and profiles' entries.
    let mut chunk_parts = [0f64; 3];
    let mut compressor = Compressor::new();
    for s in &sections {
        let piece = file.get(s.offset as usize..(s.offset + s.len) as usize)?;
        let raw = decompress(piece).ok()?;
        let ranges = if columns {
            let ends = TenantHead::table_ends(&raw)?;
            let mut r = Vec::with_capacity(6);
            let mut start = 0;
            for end in ends.into_iter().chain([raw.len()]) {
                r.push(start..end);
                start = end;
            }
            r
        } else {
            TenantHead::encoded_parts(&raw)?
        };
        let alone: Vec<f64> = ranges
            .iter()
            .map(|r| {
                let bytes = &raw[r.clone()];
                if bytes.is_empty() {
                    0.0
                } else {
                    compressor.compress(bytes).map_or(0, |c| c.len()) as f64
                }
            })
            .collect();
        let sum: f64 = alone.iter().sum::<f64>().max(1.0);
        for (p, a) in parts.iter_mut().zip(&alone) {
            *p += a / sum * s.len as f64;
        }
        rollups += s.rollup.map_or(0, |r| r.1);
        for c in &s.chunks {
            let piece = file.get(c.offset as usize..(c.offset + c.len) as usize)?;
            let raw = decompress(piece).ok()?;
            let (tree, map) = chunk_splits(&raw, columns)?;
            let mut alone = |b: &[u8]| {
                if b.is_empty() {
                    0.0
                } else {
                    compressor.compress(b).map_or(0, |c| c.len()) as f64
                }
            };
            let sizes = [
                alone(&raw[..tree]),
                alone(&raw[tree..map]),
                alone(&raw[map..]),
            ];
            let sum = sizes.iter().sum::<f64>().max(1.0);
            for (p, a) in chunk_parts.iter_mut().zip(sizes) {
                *p += a / sum * c.len as f64;
            }
        }
    }
    let heads: u64 = sections.iter().map(|s| s.len).sum();
    let mut out: Vec<(String, u64)> = names
        .iter()
        .zip(parts)
        .map(|(n, p)| (format!("head: {n}"), p.round() as u64))
        .collect();
    out.push(("rollups".into(), rollups));
    let chunk_names = [
        "time chunks: names and frame trees",
        "time chunks: stack node to frame maps",
        if columns {
            "time chunks: profile columns (nodes, values, set ids)"
        } else {
            "time chunks: profile entries"
        },
    ];
    for (n, p) in chunk_names.iter().zip(chunk_parts) {
        out.push((n.to_string(), p.round() as u64));
    }
    let chunks = chunk_parts.iter().sum::<f64>().round() as u64;
    out.push((
        "index, magic and trailer".into(),
        size.saturating_sub(heads + rollups + chunks),
    ));
    Some(out)
}

/// Where a time chunk's names and frame tree end, and where its node map ends (the same
/// place in the fourth format, which has none; see [`crate::chunks`]'s format).
fn chunk_splits(raw: &[u8], columns: bool) -> Option<(usize, usize)> {
    let mut r = Reader::new(raw);
    let names = r.count()?;
    for _ in 0..names {
        r.str()?;
    }
    let frames = r.count()?;
    for _ in 0..2 * frames {
        r.varint()?;
    }
    let tree = r.position();
    if columns {
        let nodes = r.count()?;
        for _ in 0..2 * nodes {
            r.varint()?;
        }
    }
    Some((tree, r.position()))
}
