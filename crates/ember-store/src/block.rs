//! Immutable blocks.
//!
//! A block is what a flush folds out of the write-ahead log: the records of the closed
//! segments, re-encoded per tenant with [`TenantHead::encode`] and gzip'd as a whole. The
//! encoding is columnar: the symbol tables (strings; mappings, functions and locations one
//! column per field; the stack tree as parent and location columns) are written once per
//! block, then per series a delta-coded time column and per profile its sorted stack-node
//! ids (delta varints), the gcd of its values and the values divided by it.
//!
//! Why not parquet (the issue allows "a format you can show is better"). The layout above is
//! what a parquet schema for profiles would hold too (Pyroscope's v1 store: one row per
//! profile with a repeated `(stacktrace id, value)` list, symbols in separate tables), so
//! the bytes differ only in encoding overheads, and there every parquet difference costs:
//! - a repeated field carries repetition/definition levels next to every value, plus page
//!   headers and column-chunk statistics per column; here a list is one length varint;
//! - parquet's integer encodings (plain, dictionary, delta-binary-packed) have no notion of
//!   "values are multiples of the sampling period"; the per-profile gcd turns CPU values
//!   (multiples of 10,000,000 ns, 4-byte varints) into 1-byte ones before compression;
//! - measured result of this format on the corpus's Go CPU profiles (`store_bench`,
//!   BENCH.md): 134 bytes per stored profile, 0.88% of the input pprof.gz bytes, against
//!   the 15% target, so no encoding could gain anything that matters for the target;
//! - the `parquet` crate (with arrow) is a large dependency tree for a 2-core CI, while
//!   this is ~200 lines with no dependency beyond flate2 (already used for pprof).
//!
//! What parquet would give is reading one column or row group without the rest; blocks are
//! loaded whole at start today (queries run on the in-memory head), so that is not used.
//! The comparison with parquet is reasoned from its format, not measured with a parquet writer.
//!
//! File name `<last covered WAL segment:010>-<min time ns>-<max time ns>.blk`: the first part
//! tells replay which segments a block already holds (so a crash between writing a block and
//! deleting its segments never double-counts); the times let retention delete whole files
//! without opening them. Blocks are read, written (atomically) and deleted only through
//! [`crate::objects`], i.e. `object_store`.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::head::TenantHead;
use crate::objects::{Listed, Objects};
use crate::{FlushStats, IngestRecord, StoreError, apply_record};

const MAGIC: &[u8] = b"EMBERBLK1\n";

struct BlockName {
    covered: u64,
    max_time: i64,
}

fn parse_name(file_name: &str) -> Option<BlockName> {
    let stem = file_name.strip_suffix(".blk")?;
    let mut parts = stem.splitn(3, '-');
    let covered = parts.next()?.parse().ok()?;
    let _min: i64 = parts.next()?.parse().ok()?;
    let max_time = parts.next()?.parse().ok()?;
    Some(BlockName { covered, max_time })
}

fn blocks(objects: &Objects) -> Result<Vec<(BlockName, Listed)>, StoreError> {
    let mut out: Vec<(BlockName, Listed)> = objects
        .list()?
        .into_iter()
        .filter_map(|l| Some((parse_name(&l.name)?, l)))
        .collect();
    out.sort_by_key(|(n, _)| n.covered);
    Ok(out)
}

/// `(block count, total bytes)` of the stored blocks.
pub(crate) fn usage(objects: &Objects) -> Result<(usize, u64), StoreError> {
    let b = blocks(objects)?;
    Ok((b.len(), b.iter().map(|(_, l)| l.size).sum()))
}

/// Loads every block into `heads`; returns the highest WAL segment number they cover.
pub(crate) fn load_all(
    objects: &Objects,
    heads: &mut HashMap<String, TenantHead>,
) -> Result<u64, StoreError> {
    let mut covered = 0;
    for (name, listed) in blocks(objects)? {
        let corrupt = |what: &str| StoreError::Io {
            path: listed.key.to_string(),
            message: format!("corrupt block: {what}"),
        };
        let raw = objects.get(&listed.key)?;
        let body = raw
            .strip_prefix(MAGIC)
            .ok_or_else(|| corrupt("bad magic"))?;
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(body)
            .read_to_end(&mut bytes)
            .map_err(|e| corrupt(&e.to_string()))?;
        let mut pos = 0usize;
        while pos < bytes.len() {
            let (tenant, head_bytes, next) =
                read_section(&bytes, pos).ok_or_else(|| corrupt("bad tenant section"))?;
            heads
                .entry(tenant)
                .or_default()
                .merge_encoded(head_bytes)
                .ok_or_else(|| corrupt("bad head encoding"))?;
            pos = next;
        }
        covered = covered.max(name.covered);
    }
    Ok(covered)
}

/// `u32 LE tenant length, tenant, u64 LE head length, head bytes`.
fn read_section(b: &[u8], pos: usize) -> Option<(String, &[u8], usize)> {
    let tl = u32::from_le_bytes(b.get(pos..pos + 4)?.try_into().ok()?) as usize;
    let tenant = std::str::from_utf8(b.get(pos + 4..pos + 4 + tl)?)
        .ok()?
        .to_string();
    let p = pos + 4 + tl;
    let hl = usize::try_from(u64::from_le_bytes(b.get(p..p + 8)?.try_into().ok()?)).ok()?;
    let head = b.get(p + 8..p + 8 + hl)?;
    Some((tenant, head, p + 8 + hl))
}

/// Builds a block from the WAL segments numbered at most `through`, then deletes them.
pub(crate) fn flush(
    wal_dir: &Path,
    objects: &Objects,
    through: u64,
) -> Result<FlushStats, StoreError> {
    let mut heads: BTreeMap<String, TenantHead> = BTreeMap::new();
    let mut records = 0usize;
    let used = crate::wal::read_segments(wal_dir, through, |payload| {
        let Ok(record) = <IngestRecord as prost::Message>::decode(payload) else {
            return;
        };
        let applied = crate::with_view(&record.profile, |profile| {
            let head = heads.entry(record.tenant.clone()).or_default();
            apply_record(head, &record, profile);
        });
        if applied.is_ok() {
            records += 1;
        }
    })?;
    let wal_bytes: u64 = used
        .iter()
        .map(|p| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .sum();
    let mut stats = FlushStats {
        wal_bytes,
        records,
        ..Default::default()
    };
    let range = heads
        .values()
        .filter_map(TenantHead::time_range)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    if let Some((min, max)) = range {
        let mut body = Vec::new();
        for (tenant, head) in &heads {
            let mut encoded = Vec::new();
            head.encode(&mut encoded);
            body.extend_from_slice(&(tenant.len() as u32).to_le_bytes());
            body.extend_from_slice(tenant.as_bytes());
            body.extend_from_slice(&(encoded.len() as u64).to_le_bytes());
            body.extend_from_slice(&encoded);
        }
        let mut gz = flate2::write::GzEncoder::new(MAGIC.to_vec(), flate2::Compression::new(6));
        gz.write_all(&body)
            .map_err(|e| StoreError::io(wal_dir, e))?;
        let file_bytes = gz.finish().map_err(|e| StoreError::io(wal_dir, e))?;
        let key = objects.key(&format!("{through:010}-{min}-{max}.blk"));
        let len = file_bytes.len() as u64;
        objects.put(&key, file_bytes)?;
        stats.block_bytes = len;
        stats.block = Some(PathBuf::from(key.to_string()));
    }
    // Only now is every record of these segments durable elsewhere.
    for p in used {
        let _ = fs::remove_file(p);
    }
    Ok(stats)
}

/// Deletes blocks whose newest profile is older than `cutoff`; no other block is touched.
pub(crate) fn delete_expired(objects: &Objects, cutoff: i64) -> Result<usize, StoreError> {
    let mut n = 0;
    for (name, listed) in blocks(objects)? {
        if name.max_time < cutoff {
            objects.delete(&listed.key)?;
            n += 1;
        }
    }
    Ok(n)
}
