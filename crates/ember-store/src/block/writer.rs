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
use crate::chunks::ChunkWriter;
use crate::encoding::{put_deltas, put_labels, put_signed, put_str, put_varint};
use crate::head::TenantHead;
use crate::objects::Objects;
use crate::section_codec::Compressor;
use crate::{Labels, StoreError};

/// Compressed pieces below this size (time chunks, small sections) are gathered into a
/// shared part rather than kept as parts of their own: a compacted day holds thousands of
/// chunks, and each part is one write.
const SMALL_PIECE: usize = 256 << 10;

/// The size a part of gathered small pieces grows to before the next one starts.
const GATHERED_PART: usize = 1 << 20;

/// What the index says of one section (see the parent module's format).
pub(super) struct SectionIndex<'a> {
    pub(super) tenant: &'a str,
    /// Offset and length of the compressed head.
    pub(super) head: (u64, u64),
    /// Earliest and latest profile time.
    pub(super) range: (i64, i64),
    /// Profiles in the section.
    pub(super) profiles: u64,
    /// Per series (none empty): labels, profile times, profile totals.
    pub(super) series: Vec<(&'a Labels, &'a [i64], &'a [i64])>,
    /// Names of the sample labels its profiles carry.
    pub(super) sample_keys: std::collections::BTreeSet<&'a str>,
    /// Offset and length of the compressed rollup.
    pub(super) rollup: (u64, u64),
    /// Per time chunk: offset and length, and per run its series position and profiles.
    pub(super) chunks: Vec<IndexedChunk>,
}

/// A time chunk as the index lists it: offset and length in the block, and per run (the
/// profiles of one series in it) the series position and profile count.
pub(super) type IndexedChunk = ((u64, u64), Vec<(u32, usize)>);

/// Builds a block one tenant head at a time (so compaction holds one merged head, not all).
pub(crate) struct BlockWriter {
    /// The file's bytes so far, in order: large compressed pieces as zstd returned them,
    /// small ones gathered (see [`SMALL_PIECE`]); the last part is still being gathered.
    pub(super) parts: Vec<Vec<u8>>,
    /// Bytes in `parts`.
    pub(super) len: u64,
    pub(super) index: Vec<u8>,
    pub(super) sections: u64,
    pub(super) range: Option<(i64, i64)>,
    /// The raw bytes of the piece being encoded (reused).
    pub(super) encoded: Vec<u8>,
    pub(super) chunk_writer: ChunkWriter,
    /// Scratch of the rollups' sums per frame.
    pub(super) sums: SlotSums,
    pub(super) compressor: Compressor,
    /// The time chunks' compressor ([`Compressor::for_chunks`]).
    pub(super) chunk_compressor: Compressor,
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
            chunk_compressor: Compressor::for_chunks(),
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
        head.encode_section(&mut self.encoded);
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
            chunks.push(self.append_chunk());
        }
        let times: Vec<Vec<i64>> = series
            .iter()
            .map(|s| s.profiles.iter().map(|p| p.time_nanos).collect())
            .collect();
        let totals: Vec<Vec<i64>> = series
            .iter()
            .map(|s| s.profiles.iter().map(|p| p.total()).collect())
            .collect();
        let listed: Vec<(&Labels, &[i64], &[i64])> = series
            .iter()
            .zip(&times)
            .zip(&totals)
            .map(|((s, t), v)| (&s.labels, &t[..], &v[..]))
            .collect();
        let runs: Vec<Vec<(u32, usize)>> = planned
            .iter()
            .map(|c| c.runs.iter().map(|(s, _, p)| (*s, p.len())).collect())
            .collect();
        self.put_index(&SectionIndex {
            tenant,
            head: (offset, len),
            range: (lo, hi),
            profiles: head.profiles,
            series: listed,
            sample_keys: head.sample_label_names().collect(),
            rollup: (rollup_at, rollup_len),
            chunks: chunks.into_iter().zip(runs).collect(),
        });
    }

    /// Appends a section's entry to the index (see the parent module's format).
    pub(super) fn put_index(&mut self, s: &SectionIndex<'_>) {
        let index = &mut self.index;
        put_str(index, s.tenant);
        put_varint(index, s.head.0);
        put_varint(index, s.head.1);
        put_signed(index, s.range.0);
        put_signed(index, s.range.1);
        put_varint(index, s.profiles);
        put_varint(index, s.series.len() as u64);
        for (labels, times, totals) in &s.series {
            put_labels(index, labels);
            put_varint(index, times.len() as u64);
            put_deltas(index, times.iter().copied());
            for t in totals.iter() {
                put_signed(index, *t);
            }
        }
        put_varint(index, s.sample_keys.len() as u64);
        for k in &s.sample_keys {
            put_str(index, k);
        }
        put_varint(index, s.rollup.0);
        put_varint(index, s.rollup.1);
        put_varint(index, s.chunks.len() as u64);
        for ((at, len), runs) in &s.chunks {
            put_varint(index, *at);
            put_varint(index, *len);
            put_varint(index, runs.len() as u64);
            for (series, profiles) in runs {
                put_varint(index, u64::from(*series));
                put_varint(index, *profiles as u64);
            }
        }
        self.sections += 1;
    }

    /// Appends `self.encoded`, compressed ([`crate::section_codec`]), to the file; returns
    /// where it starts and its length.
    pub(super) fn append_compressed(&mut self) -> (u64, u64) {
        self.append_encoded(false)
    }

    /// Appends `self.encoded`, a time chunk, compressed at the chunks' level; returns where
    /// it starts and its length.
    pub(super) fn append_chunk(&mut self) -> (u64, u64) {
        self.append_encoded(true)
    }

    fn append_encoded(&mut self, chunk: bool) -> (u64, u64) {
        let compressor = if chunk {
            &mut self.chunk_compressor
        } else {
            &mut self.compressor
        };
        // zstd fails only on a failed allocation; the bytes are then stored raw, which the
        // reader refuses as corrupt (never silently wrong).
        let piece = compressor
            .compress(&self.encoded)
            .unwrap_or_else(|_| self.encoded.clone());
        self.append_piece(piece)
    }

    /// Appends a compressed piece to the file; returns where it starts and its length.
    pub(super) fn append_piece(&mut self, piece: Vec<u8>) -> (u64, u64) {
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
        let (sections, replaces) = read_index(&index, &key, index_at, super::CURRENT_FORMAT)
            .ok_or_else(|| corrupt(&key, "index"))?;
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
        // The merged symbols and stack tree in memory, each input's profiles left encoded
        // (`super::merge`).
        let mut head = TenantHead::new();
        let mut inputs = Vec::with_capacity(sections.len());
        for s in sections {
            let input = if s.columns_in_chunks {
                // The columns are read from the chunks as they are merged, not put back
                // into the section first (a decode and an encode of every profile less).
                let raw = s.unpack(objects, s.offset, s.len)?;
                let mut chunks = Vec::with_capacity(s.chunks.len());
                let all: Vec<usize> = (0..s.chunks.len()).collect();
                s.load_chunks(objects, &all, |_, c| chunks.push(c))?;
                super::merge::Input::read_chunked(&mut head, raw, s, chunks)
            } else {
                super::merge::Input::read(&mut head, s.raw(objects)?)
            };
            inputs.push(input.ok_or_else(|| corrupt(&s.key, "bad head encoding"))?);
        }
        // Writing looks nothing up: the interning maps (about half the merged head) go
        // before the output grows.
        let head = head.into_read_only();
        w.add_merged(tenant, &head, &inputs)?;
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
