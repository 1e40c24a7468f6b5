//! Writing a block: [`BlockWriter`] (what a flush and a compaction write, section by
//! section, in the layout of the parent module) and [`compact`].
//!
//! What a flush pays for, per profile, is mostly here: the head's encoding, its rollup and
//! time chunks, and zstd over all three. The writer keeps its buffers and one zstd context
//! for the whole block, folds values onto frames without sorting ([`super::fold`]), and
//! keeps the compressed pieces as they come out of zstd, written in order by one put:
//! gathering them into one growing buffer copied the whole block two or three times over as
//! the buffer doubled, and faulted in fresh pages for each copy.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::fold::SlotSums;
use super::{Block, BlockName, MAGIC, Section, corrupt, read_index};
use crate::StoreError;
use crate::chunks::ChunkWriter;
use crate::encoding::{put_deltas, put_labels, put_signed, put_str, put_varint};
use crate::head::TenantHead;
use crate::objects::Objects;
use crate::section_codec::Compressor;

/// Compressed pieces below this size (time chunks, small sections) are gathered into a
/// shared part rather than kept as parts of their own: a compacted day holds thousands of
/// chunks, and each part is one write.
const SMALL_PIECE: usize = 256 << 10;

/// The size a part of gathered small pieces grows to before the next one starts.
const GATHERED_PART: usize = 1 << 20;

/// Builds a block one tenant head at a time (so compaction holds one merged head, not all).
pub(crate) struct BlockWriter {
    /// The file's bytes so far, in order: large compressed pieces as zstd returned them,
    /// small ones gathered (see [`SMALL_PIECE`]); the last part is still being gathered.
    parts: Vec<Vec<u8>>,
    /// Bytes in `parts`.
    len: u64,
    index: Vec<u8>,
    sections: u64,
    range: Option<(i64, i64)>,
    /// The raw bytes of the piece being encoded (reused).
    encoded: Vec<u8>,
    chunk_writer: ChunkWriter,
    /// Scratch of the rollups' sums per frame.
    sums: SlotSums,
    compressor: Compressor,
    /// File names of the blocks this one replaces (compaction).
    pub(super) replaces: Vec<String>,
}

impl BlockWriter {
    /// An empty block.
    pub(crate) fn new() -> Self {
        let mut first = Vec::with_capacity(GATHERED_PART);
        first.extend_from_slice(MAGIC);
        BlockWriter {
            len: first.len() as u64,
            parts: vec![first],
            index: Vec::new(),
            sections: 0,
            range: None,
            encoded: Vec::new(),
            chunk_writer: ChunkWriter::default(),
            sums: SlotSums::default(),
            compressor: Compressor::new(),
            replaces: Vec::new(),
        }
    }

    /// Adds `head` as a section of `tenant` (nothing when it is empty).
    pub(crate) fn add(&mut self, tenant: &str, head: &TenantHead) {
        let Some((lo, hi)) = head.time_range() else {
            return;
        };
        self.range = Some(self.range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        self.encoded.clear();
        self.encoded.reserve(head.encoded_size_hint());
        head.encode(&mut self.encoded);
        let (offset, len) = self.append_compressed();
        let series: Vec<_> = head
            .all_series()
            .filter(|s| !s.profiles.is_empty())
            .collect();
        // The section's rollup, compressed on its own right after it.
        self.encoded.clear();
        crate::rollup::encode(head, &series, &mut self.encoded, &mut self.sums);
        let (rollup_at, rollup_len) = self.append_compressed();
        // The time chunks, service by service (averaged series have none: `crate::chunks`).
        let planned = crate::chunks::plan(&series);
        let mut chunks: Vec<(u64, u64)> = Vec::with_capacity(planned.len());
        for chunk in &planned {
            self.chunk_writer.encode(head, chunk, &mut self.encoded);
            chunks.push(self.append_compressed());
        }
        let index = &mut self.index;
        put_str(index, tenant);
        put_varint(index, offset);
        put_varint(index, len);
        put_signed(index, lo);
        put_signed(index, hi);
        put_varint(index, head.profiles);
        put_varint(index, series.len() as u64);
        for s in series {
            put_labels(index, &s.labels);
            put_varint(index, s.profiles.len() as u64);
            put_deltas(index, s.profiles.iter().map(|p| p.time_nanos));
            for p in &s.profiles {
                put_signed(index, p.total());
            }
        }
        let keys: std::collections::BTreeSet<&str> = head.sample_label_names().collect();
        put_varint(index, keys.len() as u64);
        for k in keys {
            put_str(index, k);
        }
        put_varint(index, rollup_at);
        put_varint(index, rollup_len);
        put_varint(index, chunks.len() as u64);
        for ((at, len), chunk) in chunks.into_iter().zip(&planned) {
            put_varint(index, at);
            put_varint(index, len);
            put_varint(index, chunk.runs.len() as u64);
            for (s, _, profiles) in &chunk.runs {
                put_varint(index, u64::from(*s));
                put_varint(index, profiles.len() as u64);
            }
        }
        self.sections += 1;
    }

    /// Appends `self.encoded`, compressed ([`crate::section_codec`]), to the file; returns
    /// where it starts and its length.
    fn append_compressed(&mut self) -> (u64, u64) {
        // zstd fails only on a failed allocation; the bytes are then stored raw, which the
        // reader refuses as corrupt (never silently wrong).
        let piece = self
            .compressor
            .compress(&self.encoded)
            .unwrap_or_else(|_| self.encoded.clone());
        let at = self.len;
        let n = piece.len();
        let gathering = self
            .parts
            .last_mut()
            .filter(|p| n < SMALL_PIECE && p.len() < GATHERED_PART && p.capacity() >= p.len() + n);
        match gathering {
            Some(part) => part.extend_from_slice(&piece),
            None if n < SMALL_PIECE => {
                let mut part = Vec::with_capacity(GATHERED_PART.max(n));
                part.extend_from_slice(&piece);
                self.parts.push(part);
            }
            None => self.parts.push(piece),
        }
        self.len += n as u64;
        (at, n as u64)
    }

    /// Writes the block as covering log segments up to `covered`; `None` when every head
    /// added was empty.
    pub(crate) fn finish(
        self,
        objects: &Objects,
        covered: u64,
    ) -> Result<Option<Block>, StoreError> {
        let Some((min_time, max_time)) = self.range else {
            return Ok(None);
        };
        let name = BlockName {
            covered,
            min_time,
            max_time,
        };
        let key = objects.key(&name.file_name());
        let mut replaces = self.replaces;
        // A compacted block can take the name of one of its inputs; it never replaces itself.
        replaces.retain(|r| *r != name.file_name());
        let mut index = Vec::new();
        put_varint(&mut index, self.sections);
        index.extend_from_slice(&self.index);
        put_varint(&mut index, replaces.len() as u64);
        for r in &replaces {
            put_str(&mut index, r);
        }
        let index_at = self.len;
        let (sections, replaces) =
            read_index(&index, &key, index_at, 4).ok_or_else(|| corrupt(&key, "index"))?;
        let index_len = index.len() as u64;
        index.extend_from_slice(&index_at.to_le_bytes());
        index.extend_from_slice(&index_len.to_le_bytes());
        index.extend_from_slice(MAGIC);
        let size = index_at + index.len() as u64;
        let mut parts = self.parts;
        parts.push(index);
        objects.put_parts(&key, parts)?;
        Ok(Some(Block {
            name,
            key,
            size,
            sections,
            replaces,
        }))
    }
}

/// Merges the heads of `blocks` tenant by tenant into one new block (compaction); the
/// caller swaps it in and deletes the inputs. Holds one tenant's merged head at a time.
pub(crate) fn compact(objects: &Objects, blocks: &[Block]) -> Result<Option<Block>, StoreError> {
    let covered = blocks.iter().map(|b| b.name.covered).max().unwrap_or(0);
    let mut by_tenant: BTreeMap<&str, Vec<&Arc<Section>>> = BTreeMap::new();
    for b in blocks {
        for s in &b.sections {
            by_tenant.entry(s.tenant.as_str()).or_default().push(s);
        }
    }
    let mut w = BlockWriter::new();
    for (tenant, sections) in by_tenant {
        let mut head = TenantHead::new();
        for s in sections {
            head.merge_encoded(&s.raw(objects)?)
                .ok_or_else(|| corrupt(&s.key, "bad head encoding"))?;
        }
        // Merged: its interning tables (a third or more of its memory) are not needed to
        // write it, and freed first the writer's buffers reuse their memory.
        w.add(tenant, &head.into_read_only());
    }
    // Transitively: an input whose own inputs could not all be deleted still vouches for
    // them through this block.
    w.replaces = blocks
        .iter()
        .flat_map(|b| std::iter::once(b.name.file_name()).chain(b.replaces.iter().cloned()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    w.finish(objects, covered)
}
