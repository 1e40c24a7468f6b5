//! What a block's bytes are spent on ([`breakdown`]): for measuring the storage cost of
//! each part of the layout (`examples/block_stats.rs`), not used by the store itself.

use object_store::path::Path as ObjPath;

use super::{MAGIC, TRAILER, read_index};
use crate::encoding::Reader;
use crate::head::TenantHead;
use crate::section_codec::{Compressor, decompress};

/// Bytes of one block file by part: each section's compressed head split between its parts
/// (symbol tables, stack tree, per-profile columns, sample labels) in proportion to what
/// each part compresses to on its own, then rollups, time chunks, and index with trailer.
/// Parts are summed over the block's sections. `None` when the file is not a readable
/// block of the current format.
pub fn breakdown(file: &[u8]) -> Option<Vec<(String, u64)>> {
    let size = file.len() as u64;
    let trailer = file.get(file.len().checked_sub(TRAILER as usize)?..)?;
    if &trailer[16..] != MAGIC {
        return None;
    }
    let word = |at: usize| u64::from_le_bytes(trailer[at..at + 8].try_into().unwrap_or([0; 8]));
    let (index_at, index_len) = (word(0), word(8));
    let index = file.get(index_at as usize..(index_at + index_len) as usize)?;
    let (sections, _) = read_index(index, &ObjPath::from("stats"), index_at, 4)?;
    let names = TenantHead::PART_NAMES;
    let mut parts = vec![0f64; names.len()];
    let mut rollups = 0u64;
    // Time chunks: their frame trees with names, and their profiles' entries.
    let (mut chunk_trees, mut chunk_entries) = (0f64, 0f64);
    let mut compressor = Compressor::new();
    for s in &sections {
        let piece = file.get(s.offset as usize..(s.offset + s.len) as usize)?;
        let raw = decompress(piece).ok()?;
        let ranges = TenantHead::encoded_parts(&raw)?;
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
            let split = tree_end(&raw)?;
            let mut alone = |b: &[u8]| compressor.compress(b).map_or(0, |c| c.len()) as f64;
            let (tree, entries) = (alone(&raw[..split]), alone(&raw[split..]));
            let share = tree / (tree + entries).max(1.0);
            chunk_trees += share * c.len as f64;
            chunk_entries += (1.0 - share) * c.len as f64;
        }
    }
    let heads: u64 = sections.iter().map(|s| s.len).sum();
    let mut out: Vec<(String, u64)> = names
        .iter()
        .zip(parts)
        .map(|(n, p)| (format!("head: {n}"), p.round() as u64))
        .collect();
    out.push(("rollups".into(), rollups));
    out.push((
        "time chunks: names and frame trees".into(),
        chunk_trees.round() as u64,
    ));
    out.push((
        "time chunks: profile entries".into(),
        chunk_entries.round() as u64,
    ));
    let chunks = (chunk_trees + chunk_entries).round() as u64;
    out.push((
        "index, magic and trailer".into(),
        size.saturating_sub(heads + rollups + chunks),
    ));
    Some(out)
}

/// Where a time chunk's names and frame tree end (see [`crate::chunks`]'s format).
fn tree_end(raw: &[u8]) -> Option<usize> {
    let mut r = Reader::new(raw);
    let names = r.count()?;
    for _ in 0..names {
        r.str()?;
    }
    let frames = r.count()?;
    for _ in 0..2 * frames {
        r.varint()?;
    }
    Some(r.position())
}
