//! Opening the log: replaying its segments into the tenants' heads, and flushing those
//! heads into blocks as the replay goes.
//!
//! A long outage (or `kill -9` after a burst) can leave hundreds of MB of log. Replaying it
//! all into memory before the first flush made the head as large as the whole log (a
//! 560 MB log took 1.18 GB). Instead, at the end of a segment after which the next one
//! would take the log replayed since the last block past
//! [`crate::StoreOptions::replay_flush_bytes`], the heads are written as a block (a block
//! covers whole segments: a crash mid-replay then replays only the segments after it), the
//! replayed segments are deleted and the heads start empty. The heads then never hold more
//! than that much log (or one segment, if larger) whatever the log's size, as the server's
//! `flush_wal_mib` bounds them during ingest.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::block::{Block, BlockWriter};
use crate::ingest::IngestRecord;
use crate::objects::Objects;
use crate::tenant::Tenant;
use crate::wal::{ReplayStats, Replayed, Wal, WalOptions};
use crate::{StoreError, StoreOptions, apply_record, with_view};

/// What [`replay`] leaves.
pub(crate) struct Replay {
    pub(crate) wal: Wal,
    pub(crate) stats: ReplayStats,
    /// Intact records that could not be applied.
    pub(crate) errors: usize,
    /// Segments a flush must set aside rather than delete (see [`crate::wal::delete_segments`]).
    pub(crate) damaged: BTreeSet<u64>,
    /// Blocks written during the replay.
    pub(crate) flushes: usize,
}

/// Replays the log in `wal_dir` (segments after `covered`) into `tenants`, writing a block
/// through `objects` (added to `blocks`) whenever the records since the last one reach the
/// options' `replay_flush_bytes`, then starts the log's writer.
pub(crate) fn replay(
    wal_dir: &Path,
    objects: &Objects,
    options: &StoreOptions,
    covered: u64,
    tenants: &mut HashMap<String, Tenant>,
    blocks: &mut Vec<Block>,
) -> Result<Replay, StoreError> {
    let mut errors = 0usize;
    let mut damaged = BTreeSet::new();
    let mut since_flush = 0u64;
    let mut flushes = 0usize;
    // Once a block cannot be written (a full disk), the replay goes on in memory only.
    let mut flushing = options.replay_flush_bytes > 0;
    let wal_options = WalOptions {
        segment_bytes: options.wal_segment_bytes,
    };
    let (wal, stats) = Wal::open_with(wal_dir, covered, wal_options, |step| match step {
        Replayed::Record { segment, payload } => {
            since_flush += payload.len() as u64;
            let Ok(record) = <IngestRecord as prost::Message>::decode(payload) else {
                errors += 1;
                damaged.insert(segment);
                return;
            };
            let applied = with_view(&record.profile, |p| {
                let tenant = tenants.entry(record.tenant.clone()).or_default();
                if let Some(head) = tenant.head_for(segment) {
                    apply_record(head, &record, p);
                }
            });
            if let Err(e) = applied {
                tracing::warn!(segment, tenant = %record.tenant, error = %e, "write-ahead log: a record's profile does not decode; the segment will be kept as .corrupt");
                errors += 1;
                damaged.insert(segment);
            }
        }
        Replayed::SegmentDone {
            segment,
            damaged: skipped,
            next_bytes,
        } => {
            if skipped {
                damaged.insert(segment);
            }
            let last = next_bytes == 0;
            if !flushing || last || since_flush + next_bytes <= options.replay_flush_bytes {
                return;
            }
            match flush_heads(objects, tenants, segment) {
                Ok(block) => {
                    blocks.extend(block);
                    flushes += 1;
                    since_flush = 0;
                    crate::wal::delete_segments(wal_dir, segment, &damaged);
                }
                Err(e) => {
                    tracing::error!(error = %e, "flushing during log replay failed; replaying the rest into memory");
                    flushing = false;
                }
            }
        }
    })?;
    if flushes > 0 {
        tracing::info!(
            blocks = flushes,
            "log replay flushed its heads into blocks as it went"
        );
    }
    Ok(Replay {
        wal,
        stats,
        errors,
        damaged,
        flushes,
    })
}

/// Writes every tenant's open head as one block covering segments up to `through`, and
/// swaps the heads for the block's sections.
fn flush_heads(
    objects: &Objects,
    tenants: &mut HashMap<String, Tenant>,
    through: u64,
) -> Result<Option<Block>, StoreError> {
    let mut w = BlockWriter::new();
    for (name, t) in tenants.iter() {
        w.add(name, &t.head);
    }
    let block = w.finish(objects, through)?;
    for (name, t) in tenants.iter_mut() {
        let sections = Block::sections_of(block.as_ref(), name);
        t.freeze(through);
        t.seal(through, sections);
    }
    Ok(block)
}
