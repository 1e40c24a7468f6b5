//! Immutable blocks: what a flush writes, opened lazily through an index.
//!
//! A block holds the heads a flush froze (see [`crate::tenant`]), one **section** per tenant
//! head: the head's columnar encoding ([`TenantHead::encode`]: symbol tables, the stack tree,
//! then per series a delta-coded time column and per profile its sorted stack-node ids and
//! values divided by their gcd), compressed on its own ([`crate::section_codec`]: zstd;
//! gzip in blocks written before it, read as they are). After the sections comes the **index**,
//! then a fixed-size trailer:
//!
//! ```text
//! "EMBERBLK5\n" section… index trailer
//! section = compressed head without the columns and sample label set ids of the profiles
//!           its time chunks hold (every series but an averaged one: `block::columns`), then
//!           its compressed rollup (`crate::rollup`: per series the sum of its profiles as a
//!           frame tree), then its time chunks, each compressed on its own (`crate::chunks`:
//!           per service and ten-minute window, its profiles' columns with a map from their
//!           stack nodes to the chunk's frames)
//! index   = varint sections, per section: tenant, offset, length, min time, max time,
//!           profiles, series count, per series: labels, profile count, delta-coded
//!           times, each profile's total; then the names of the sample labels its
//!           profiles carry, the rollup's offset and length, and the chunks: count, per
//!           chunk its offset, length, run count and per run (the profiles of one series
//!           in it) the series position and profile count; then the names of the blocks it
//!           replaces
//! trailer = index offset (u64 LE), index length (u64 LE), "EMBERBLK5\n"
//! ```
//!
//! Each profile is stored once: in the fourth format (`EMBERBLK4`, the same layout) the
//! section held every profile's columns and its time chunk held the profile again, folded
//! onto frames (7,200 of the 11,200 bytes a profile of the realistic workload took). A read
//! of a whole section now reads the section and all its chunks and puts the columns back
//! (`block::columns`), so every full-fidelity reader decodes one encoding; a narrow read
//! reads only its chunks, as before, and maps each entry's stack node to its frame.
//!
//! Opening a store reads only trailers and indexes (two ranged reads per block, through
//! `object_store`, so the layout is the same on a local disk and in a bucket): series
//! listings, label names and values, totals over time (each profile's total is in the
//! index: a pre-merged rollup per series and profile) and the choice of which sections a
//! query must read come from the index alone. A query decodes just the sections whose tenant, time range and
//! series match, through a cache with a memory budget ([`crate::cache`]); memory no longer
//! grows with the days stored.
//!
//! Why not parquet: the layout above is what a parquet schema for profiles would hold
//! (Pyroscope's v1 store: a row per profile with a repeated `(stacktrace id, value)` list,
//! symbols in separate tables), while a repeated field there carries repetition/definition
//! levels next to every value plus page headers and statistics per column chunk, and no
//! parquet integer encoding knows "values are multiples of the sampling period" (the gcd
//! turns 4-byte CPU varints into 1-byte ones); the crate and arrow are a large dependency
//! tree for a 2-core CI. Reasoned from the format, not measured with a parquet writer.
//!
//! File name `<last covered WAL segment:010>-<min time ns>-<max time ns>.blk`: the first part
//! tells replay which segments blocks already hold (a crash between writing a block and
//! deleting its segments never double-counts); the times let retention delete whole files
//! without opening them. Blocks of the first format (`EMBERBLK1`: one gzip stream of every
//! tenant's head, read whole at start) are rewritten in this format the first time a store
//! opens them; blocks of the second (`EMBERBLK2`, before sample labels were kept), third
//! (`EMBERBLK3`, before time chunks: a read of part of a section decodes it whole) and fourth
//! (`EMBERBLK4`, profiles stored twice) are read as they are, and are rewritten in this
//! format when compaction merges them.
//!
//! Compaction ([`compact`], `merge`) merges sections without decoding their profiles: the
//! merged head holds the inputs' symbol tables and stack trees, and each input's profiles
//! are read from its encoded bytes one at a time as the merged section is written.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use object_store::path::Path as ObjPath;

use crate::chunks::{ChunkRef, Run};
use crate::encoding::Reader;
use crate::head::TenantHead;
use crate::objects::{Listed, Objects};
use crate::{Labels, StoreError};

mod columns;
pub(crate) mod fold;
mod merge;
pub(crate) mod stats;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use writer::{BlockWriter, compact};

const MAGIC_V1: &[u8] = b"EMBERBLK1\n";
/// The second format: as this one without the sample label names in the index (its
/// sections have no sample labels).
const MAGIC_V2: &[u8] = b"EMBERBLK2\n";
/// The third format: as this one without the time chunks in the index (its sections are
/// read whole for a part of their time range).
const MAGIC_V3: &[u8] = b"EMBERBLK3\n";
/// The fourth format: as this one with the time chunks holding their profiles folded onto
/// frames, next to the section's own columns of the same profiles (stored twice).
const MAGIC_V4: &[u8] = b"EMBERBLK4\n";
const MAGIC: &[u8] = b"EMBERBLK5\n";
const TRAILER: u64 = 16 + 10;

/// Gives every section a process-unique id (the cache's key).
static NEXT_SECTION: AtomicU64 = AtomicU64::new(1);

/// What a block's file name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockName {
    /// Highest write-ahead log segment the block holds.
    pub(crate) covered: u64,
    /// Earliest profile time.
    pub(crate) min_time: i64,
    /// Latest profile time.
    pub(crate) max_time: i64,
}

impl BlockName {
    fn parse(file_name: &str) -> Option<BlockName> {
        let stem = file_name.strip_suffix(".blk")?;
        let mut parts = stem.splitn(3, '-');
        Some(BlockName {
            covered: parts.next()?.parse().ok()?,
            min_time: parts.next()?.parse().ok()?,
            max_time: parts.next()?.parse().ok()?,
        })
    }

    fn file_name(&self) -> String {
        format!(
            "{:010}-{}-{}.blk",
            self.covered, self.min_time, self.max_time
        )
    }
}

/// One series of a section, as the index lists it: enough to list series and draw their
/// totals over time without decoding the section.
#[derive(Debug, Clone)]
pub(crate) struct IndexedSeries {
    /// Labels, sorted by name.
    pub(crate) labels: Labels,
    /// Time of each profile, ascending.
    pub(crate) times: Vec<i64>,
    /// Sum of each profile's values (same order).
    pub(crate) totals: Vec<i64>,
}

impl IndexedSeries {
    /// Positions of the profiles in `[start, end]`.
    pub(crate) fn in_range(&self, start: i64, end: i64) -> std::ops::Range<usize> {
        let lo = self.times.partition_point(|t| *t < start);
        let hi = self.times.partition_point(|t| *t <= end);
        lo..hi.max(lo)
    }
}

/// One tenant's part of a block: where its bytes are and what the index says of them.
#[derive(Debug)]
pub(crate) struct Section {
    /// Process-unique id (cache key).
    pub(crate) id: u64,
    /// The block object.
    pub(crate) key: ObjPath,
    /// Tenant.
    pub(crate) tenant: String,
    /// Byte range of the gzip'd head in the block.
    pub(crate) offset: u64,
    /// Length of that range.
    pub(crate) len: u64,
    /// Earliest profile time.
    pub(crate) min_time: i64,
    /// Latest profile time.
    pub(crate) max_time: i64,
    /// Series with their profiles' times and totals.
    pub(crate) series: Vec<IndexedSeries>,
    /// Names of the sample labels the section's profiles carry, sorted.
    pub(crate) sample_keys: Vec<String>,
    /// Byte range of the section's gzip'd rollup ([`crate::rollup`]); `None` in blocks of
    /// the second format.
    pub(crate) rollup: Option<(u64, u64)>,
    /// The section's time chunks ([`crate::chunks`]), by service then time; empty in blocks
    /// written before them.
    pub(crate) chunks: Vec<ChunkRef>,
    /// Per series of `series`, its runs of profiles in `chunks`, in time order; empty for
    /// an averaged series and in blocks without chunks.
    pub(crate) runs: Vec<Vec<Run>>,
    /// Whether the chunks hold their profiles' columns, which the section then lacks (the
    /// current format), rather than the profiles folded onto frames (the fourth).
    pub(crate) columns_in_chunks: bool,
}

impl Section {
    /// The runs of series `series` in the chunks that hold its profiles at positions
    /// `profiles`; `None` when that series has no chunks.
    pub(crate) fn runs_of(
        &self,
        series: usize,
        profiles: std::ops::Range<usize>,
    ) -> Option<&[Run]> {
        let own = self.runs.get(series).filter(|r| !r.is_empty())?;
        let first = own.partition_point(|r| (r.first + r.count) as usize <= profiles.start);
        let last = own.partition_point(|r| (r.first as usize) < profiles.end);
        Some(&own[first..last.max(first)])
    }

    /// Reads and decodes the chunks at positions `wanted` (ascending) of
    /// [`Section::chunks`], adjacent ones in one ranged read (a service's chunks lie one
    /// after another), calling `f` with each position and chunk.
    pub(crate) fn load_chunks(
        &self,
        objects: &Objects,
        wanted: &[usize],
        mut f: impl FnMut(usize, crate::chunks::Chunk),
    ) -> Result<(), StoreError> {
        let mut rest = wanted;
        while let Some(&a) = rest.first() {
            let adjacent = 1 + rest.windows(2).take_while(|w| w[1] == w[0] + 1).count();
            let (run, next) = rest.split_at(adjacent);
            rest = next;
            let b = run[run.len() - 1];
            let (from, to) = (
                self.chunks[a].offset,
                self.chunks[b].offset + self.chunks[b].len,
            );
            let bytes = objects.get_range(&self.key, from..to)?;
            let decode = |i: usize| -> Result<crate::chunks::Chunk, StoreError> {
                let c = &self.chunks[i];
                let at = (c.offset - from) as usize;
                let raw = bytes
                    .get(at..at + c.len as usize)
                    .ok_or_else(|| corrupt(&self.key, "chunk out of range"))?;
                let raw = crate::section_codec::decompress(raw)
                    .map_err(|e| corrupt(&self.key, &e.to_string()))?;
                crate::chunks::Chunk::decode(raw, c.profiles as usize, self.columns_in_chunks)
                    .ok_or_else(|| corrupt(&self.key, "bad chunk"))
            };
            // Half of the chunks decompressed and decoded on a second thread: that is
            // most of a cold hour's reading, and the machine has a second core.
            let (mine, theirs) = run.split_at(run.len().div_ceil(2));
            let (mine, theirs) = std::thread::scope(|scope| {
                let theirs = (!theirs.is_empty())
                    .then(|| scope.spawn(|| theirs.iter().map(|&i| decode(i)).collect()));
                let mine: Vec<_> = mine.iter().map(|&i| decode(i)).collect();
                let theirs: Vec<_> = theirs.map_or_else(Vec::new, |t| {
                    t.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
                });
                (mine, theirs)
            });
            for (&i, chunk) in run.iter().zip(mine.into_iter().chain(theirs)) {
                f(i, chunk?);
            }
        }
        Ok(())
    }

    /// Whether some sample of the section carries a label named `name`.
    pub(crate) fn has_sample_label(&self, name: &str) -> bool {
        self.sample_keys
            .binary_search_by(|k| k.as_str().cmp(name))
            .is_ok()
    }
}

impl Section {
    /// The section's encoded head, read and decompressed; in the current format with the
    /// profile columns its time chunks hold put back ([`columns::restore`]), so every
    /// reader of a whole section reads one encoding.
    fn raw(&self, objects: &Objects) -> Result<Vec<u8>, StoreError> {
        let raw = self.unpack(objects, self.offset, self.len)?;
        if !self.columns_in_chunks {
            return Ok(raw);
        }
        let mut chunks = Vec::with_capacity(self.chunks.len());
        let all: Vec<usize> = (0..self.chunks.len()).collect();
        self.load_chunks(objects, &all, |_, c| chunks.push(c))?;
        columns::restore(self, &raw, &chunks)
            .ok_or_else(|| corrupt(&self.key, "bad head encoding or chunk columns"))
    }

    /// The `len` bytes at `at` of the block, decompressed.
    fn unpack(&self, objects: &Objects, at: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        let raw = objects.get_range(&self.key, at..at + len)?;
        crate::section_codec::decompress(&raw).map_err(|e| corrupt(&self.key, &e.to_string()))
    }

    /// Reads and decodes the section's rollup (`None` when the block has none).
    pub(crate) fn load_rollup(
        &self,
        objects: &Objects,
    ) -> Result<Option<crate::rollup::Rollup>, StoreError> {
        let Some((at, len)) = self.rollup else {
            return Ok(None);
        };
        let bytes = self.unpack(objects, at, len)?;
        crate::rollup::Rollup::decode(&bytes, self.series.len())
            .map(Some)
            .ok_or_else(|| corrupt(&self.key, "bad rollup"))
    }

    /// Reads and decodes the section into a read-only head.
    pub(crate) fn load(&self, objects: &Objects) -> Result<TenantHead, StoreError> {
        TenantHead::decode_read_only(&self.raw(objects)?)
            .ok_or_else(|| corrupt(&self.key, "bad head encoding"))
    }
}

/// A block: its name, object and sections.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// What its file name says.
    pub(crate) name: BlockName,
    /// The object.
    pub(crate) key: ObjPath,
    /// Size in bytes.
    pub(crate) size: u64,
    /// One per tenant head it holds.
    pub(crate) sections: Vec<Arc<Section>>,
    /// File names of the blocks this one was compacted from.
    pub(crate) replaces: Vec<String>,
}

impl Block {
    /// The sections of `tenant` (none when `block` is `None`: nothing was written).
    pub(crate) fn sections_of(block: Option<&Block>, tenant: &str) -> Vec<Arc<Section>> {
        block.map_or_else(Vec::new, |b| {
            b.sections
                .iter()
                .filter(|s| s.tenant == tenant)
                .cloned()
                .collect()
        })
    }
}

fn corrupt(key: &ObjPath, what: &str) -> StoreError {
    StoreError::Io {
        path: key.to_string(),
        message: format!("corrupt block: {what}"),
    }
}

/// Blocks in storage, by covered segment.
fn listed(objects: &Objects) -> Result<Vec<(BlockName, Listed)>, StoreError> {
    let mut out: Vec<(BlockName, Listed)> = objects
        .list()?
        .into_iter()
        .filter_map(|l| Some((BlockName::parse(&l.name)?, l)))
        .collect();
    out.sort_by_key(|(n, _)| n.covered);
    Ok(out)
}

/// `(block count, total bytes)` of the stored blocks.
pub(crate) fn usage(objects: &Objects) -> Result<(usize, u64), StoreError> {
    let b = listed(objects)?;
    Ok((b.len(), b.iter().map(|(_, l)| l.size).sum()))
}

/// Opens every block by its index (first-format blocks are rewritten first), and deletes
/// blocks that a compacted block replaces (left behind by a crash during compaction). A
/// block whose trailer or index does not read is quarantined: renamed to `<name>.corrupt`
/// (kept for inspection, never listed again) and reported, so that one damaged file costs
/// its own profiles, not the whole store. Returns the blocks and the quarantined files'
/// names; errors reading storage (not the bytes read) still fail the open, and so does a
/// block of a newer format than this build's ([`StoreError::NewerFormat`]: after a
/// downgrade, the blocks the newer build wrote are left as they are).
pub(crate) fn open_all(objects: &Objects) -> Result<(Vec<Block>, Vec<String>), StoreError> {
    let mut out: Vec<Block> = Vec::new();
    let mut quarantined = Vec::new();
    for (name, listed) in listed(objects)? {
        let block = match open_one(objects, name, &listed)? {
            Ok(block) => block,
            Err(_) if is_v1(objects, &listed)? => upgrade_v1(objects, name, &listed)?,
            Err(why) => {
                let to = objects.key(&format!("{}.corrupt", listed.name));
                objects.rename(&listed.key, &to)?;
                tracing::error!(
                    block = %listed.key,
                    reason = %why,
                    moved_to = %to,
                    "corrupt block quarantined; its profiles are not served"
                );
                quarantined.push(listed.name.clone());
                continue;
            }
        };
        out.push(block);
    }
    let replaced: std::collections::HashSet<String> = out
        .iter()
        .flat_map(|b| b.replaces.iter().cloned())
        .collect();
    let mut kept = Vec::with_capacity(out.len());
    for b in out {
        if replaced.contains(&b.name.file_name()) {
            objects.delete(&b.key)?;
        } else {
            kept.push(b);
        }
    }
    Ok((kept, quarantined))
}

/// The format number of a trailer magic (`EMBERBLK<n>\n`) newer than this build writes:
/// such a block is not damaged, so it must not be quarantined. Opening the store fails
/// instead, and the block stays where it is for the newer build to serve again.
fn newer_format(magic: &[u8]) -> Option<u32> {
    let digits = magic.strip_prefix(b"EMBERBLK")?.strip_suffix(b"\n")?;
    let version: u32 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    (version > CURRENT_FORMAT).then_some(version)
}

/// The format this build writes (the number in [`MAGIC`]).
const CURRENT_FORMAT: u32 = 5;

fn is_v1(objects: &Objects, listed: &Listed) -> Result<bool, StoreError> {
    if listed.size < MAGIC_V1.len() as u64 {
        return Ok(false);
    }
    let head = objects.get_range(&listed.key, 0..MAGIC_V1.len() as u64)?;
    Ok(head == MAGIC_V1)
}

/// Reads one block's trailer and index: `Err` when storage could not be read, `Ok(Err(why))`
/// when the bytes read are not a valid block.
fn open_one(
    objects: &Objects,
    name: BlockName,
    listed: &Listed,
) -> Result<Result<Block, String>, StoreError> {
    let key = &listed.key;
    if listed.size < MAGIC.len() as u64 + TRAILER {
        return Ok(Err("too short".into()));
    }
    let trailer = objects.get_range(key, listed.size - TRAILER..listed.size)?;
    let version = match &trailer[16..] {
        m if m == MAGIC => 5,
        m if m == MAGIC_V4 => 4,
        m if m == MAGIC_V3 => 3,
        m if m == MAGIC_V2 => 2,
        m => {
            if let Some(version) = newer_format(m) {
                return Err(StoreError::NewerFormat {
                    path: key.to_string(),
                    version,
                });
            }
            return Ok(Err("no index trailer".into()));
        }
    };
    let word = |at: usize| u64::from_le_bytes(trailer[at..at + 8].try_into().unwrap_or([0; 8]));
    let (index_at, index_len) = (word(0), word(8));
    let Some(end) = index_at
        .checked_add(index_len)
        .filter(|e| *e <= listed.size - TRAILER && index_at >= MAGIC.len() as u64)
    else {
        return Ok(Err("index out of range".into()));
    };
    let index = objects.get_range(key, index_at..end)?;
    let Some((sections, replaces)) = read_index(&index, key, index_at, version) else {
        return Ok(Err("bad index".into()));
    };
    Ok(Ok(Block {
        name,
        key: key.clone(),
        size: listed.size,
        sections,
        replaces,
    }))
}

/// The sections and the names of replaced blocks an index lists.
type Index = (Vec<Arc<Section>>, Vec<String>);

/// `version` 3 and up: the index lists each section's sample label names and rollup (see the
/// module's format); 4: and its time chunks.
fn read_index(bytes: &[u8], key: &ObjPath, sections_end: u64, version: u32) -> Option<Index> {
    let mut r = Reader::new(bytes);
    let n = r.count()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let tenant = r.str()?.to_string();
        let (offset, len) = (r.varint()?, r.varint()?);
        if offset < MAGIC.len() as u64 || offset.checked_add(len)? > sections_end {
            return None;
        }
        // The section's profile count follows the times; the series carry it as well.
        let (min_time, max_time, _profiles) = (r.signed()?, r.signed()?, r.varint()?);
        let n_series = r.count()?;
        let mut series = Vec::with_capacity(n_series);
        for _ in 0..n_series {
            let labels = r.labels()?;
            let n = r.count()?;
            let times = r.deltas(n)?;
            let totals = r.column(n, Reader::signed)?;
            if n == 0 || times.windows(2).any(|w| w[0] > w[1]) {
                return None;
            }
            series.push(IndexedSeries {
                labels,
                times,
                totals,
            });
        }
        let mut sample_keys = Vec::new();
        let mut rollup = None;
        if version >= 3 {
            let n = r.count()?;
            for _ in 0..n {
                sample_keys.push(r.str()?.to_string());
            }
            sample_keys.sort();
            let (at, len) = (r.varint()?, r.varint()?);
            if at < MAGIC.len() as u64 || at.checked_add(len)? > sections_end {
                return None;
            }
            rollup = Some((at, len));
        }
        let (chunks, runs) = if version >= 4 {
            read_chunks(&mut r, &series, sections_end)?
        } else {
            (Vec::new(), Vec::new())
        };
        out.push(Arc::new(Section {
            id: NEXT_SECTION.fetch_add(1, Ordering::Relaxed),
            key: key.clone(),
            tenant,
            offset,
            len,
            min_time,
            max_time,
            series,
            sample_keys,
            rollup,
            chunks,
            runs,
            columns_in_chunks: version >= 5,
        }));
    }
    let n = r.count()?;
    let mut replaces = Vec::with_capacity(n);
    for _ in 0..n {
        replaces.push(r.str()?.to_string());
    }
    r.at_end().then_some((out, replaces))
}

/// A section's chunk list (see [`crate::chunks`]): count, then per chunk its offset, length,
/// run count and per run the series position and profile count; and the runs per series
/// (each series' runs cover its profiles in order, all of them or none).
fn read_chunks(
    r: &mut Reader<'_>,
    series: &[IndexedSeries],
    sections_end: u64,
) -> Option<(Vec<ChunkRef>, Vec<Vec<Run>>)> {
    let n = r.count()?;
    let mut chunks: Vec<ChunkRef> = Vec::with_capacity(n);
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); series.len()];
    let mut covered = vec![0u32; series.len()];
    for c in 0..n {
        let (offset, len) = (r.varint()?, r.varint()?);
        if offset < MAGIC.len() as u64 || offset.checked_add(len)? > sections_end {
            return None;
        }
        let k = r.count()?;
        let mut at = 0u32;
        for _ in 0..k {
            let (s, count) = (r.u32()? as usize, r.u32()?);
            let done = covered.get_mut(s)?;
            let first = *done;
            *done = done
                .checked_add(count)
                .filter(|d| count > 0 && *d as usize <= series[s].times.len())?;
            runs[s].push(Run {
                chunk: c as u32,
                first,
                count,
                at,
            });
            at = at.checked_add(count)?;
        }
        chunks.push(ChunkRef {
            offset,
            len,
            profiles: at,
        });
    }
    let whole = covered
        .iter()
        .zip(series)
        .all(|(c, s)| *c == 0 || *c as usize == s.times.len());
    whole.then_some((chunks, runs))
}

/// Rewrites a first-format block (one gzip stream of `tenant, head` sections) in this one,
/// under the same name.
fn upgrade_v1(objects: &Objects, name: BlockName, listed: &Listed) -> Result<Block, StoreError> {
    let key = &listed.key;
    let raw = objects.get(key)?;
    let body = raw
        .strip_prefix(MAGIC_V1)
        .ok_or_else(|| corrupt(key, "bad magic"))?;
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut bytes)
        .map_err(|e| corrupt(key, &e.to_string()))?;
    let mut heads: BTreeMap<String, TenantHead> = BTreeMap::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let (tenant, head_bytes, next) =
            read_v1_section(&bytes, pos).ok_or_else(|| corrupt(key, "bad tenant section"))?;
        heads
            .entry(tenant)
            .or_default()
            .merge_encoded(head_bytes)
            .ok_or_else(|| corrupt(key, "bad head encoding"))?;
        pos = next;
    }
    let mut w = BlockWriter::new();
    for (tenant, head) in &heads {
        w.add(tenant, head);
    }
    let block = w
        .finish(objects, name.covered)?
        .ok_or_else(|| corrupt(key, "empty"))?;
    if block.key != *key {
        objects.delete(key)?;
    }
    Ok(block)
}

/// `u32 LE tenant length, tenant, u64 LE head length, head bytes` (first format).
fn read_v1_section(b: &[u8], pos: usize) -> Option<(String, &[u8], usize)> {
    let tl = u32::from_le_bytes(b.get(pos..pos + 4)?.try_into().ok()?) as usize;
    let tenant = std::str::from_utf8(b.get(pos + 4..pos + 4 + tl)?)
        .ok()?
        .to_string();
    let p = pos + 4 + tl;
    let hl = usize::try_from(u64::from_le_bytes(b.get(p..p + 8)?.try_into().ok()?)).ok()?;
    let head = b.get(p + 8..p + 8 + hl)?;
    Some((tenant, head, p + 8 + hl))
}
