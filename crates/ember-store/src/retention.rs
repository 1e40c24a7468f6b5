//! What leaves memory and what leaves storage: [`Store::flush`] cuts the log and writes the
//! heads it froze as one block, [`Store::compact`] merges small blocks into larger ones,
//! [`Store::enforce_retention`] deletes blocks (and drops head profiles) past the retention,
//! and [`Store::disk_usage`] measures both.

use std::sync::Arc;

use crate::block::{self, Block, BlockWriter};
use crate::{FlushStats, Store, StoreError};

/// Blocks from this size up are left as they are by [`Store::compact`].
pub(crate) const COMPACT_BELOW_BYTES: u64 = 16 << 20;

/// A day in nanoseconds: compaction never merges blocks of different UTC days.
const DAY_NANOS: i64 = 86_400 * 1_000_000_000;

/// How many blocks of one size class [`Store::compact`] merges at once (and waits for).
const COMPACT_FAN_IN: usize = 4;

/// A UTC day counts as closed once the store holds profiles this long after its end; its
/// blocks are then merged into one (late data for it starts a new block, merged in the same way).
const DAY_CLOSED_AFTER_NANOS: i64 = 3_600 * 1_000_000_000;

/// Size class of a block for compaction: 0 below 1 MiB, 1 below 4 MiB, 2 below 16 MiB.
fn size_class(bytes: u64) -> u32 {
    let mut class = 0;
    let mut bound = 1u64 << 20;
    while bytes >= bound && class < 3 {
        class += 1;
        bound <<= 2;
    }
    class
}

impl Store {
    /// Cuts the log and moves every tenant's head into one immutable block, then deletes the
    /// log segments it replaces. Records acknowledged before the call are all covered. Safe
    /// to call concurrently with ingest and queries: records that arrive meanwhile go to the
    /// next head, and every record is readable from exactly one tier throughout.
    pub fn flush(&self) -> Result<FlushStats, StoreError> {
        let _guard = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        // The cut is published before any record can reach the next segment: an ingest that
        // applies such a record to a tenant this loop has not frozen yet freezes it first
        // (`Tenant::freeze_at`), so the record never lands in a head of this cut. (It did:
        // such a record was in the block and in the next segment, and counted twice after
        // a restart.) Tenants created from now on start frozen too (see `tenant_or_create`).
        let through = self.wal.rotate_with(|closed| {
            *self.cutting.lock().unwrap_or_else(|e| e.into_inner()) = Some(closed);
        })?;
        {
            let tenants = self.tenants.write().unwrap_or_else(|e| e.into_inner());
            for t in tenants.values() {
                t.write()
                    .unwrap_or_else(|e| e.into_inner())
                    .freeze_at(through);
            }
        }
        // Every record of the cut is durable; wait until each is applied (or abandoned).
        self.pending.wait_through(through);
        let tenants = self.tenant_list();
        for (_, t) in &tenants {
            t.write().unwrap_or_else(|e| e.into_inner()).settle(through);
        }
        let written = {
            let mut w = BlockWriter::new();
            let mut records = 0usize;
            for (name, t) in &tenants {
                let t = t.read().unwrap_or_else(|e| e.into_inner());
                for (_, h) in t.frozen.iter().filter(|(c, _)| *c <= through) {
                    records += h.profiles as usize;
                    w.add(name, h);
                }
            }
            w.finish(&self.objects, through).map(|b| (b, records))
        };
        let (block, records) = match written {
            Ok(ok) => ok,
            Err(e) => {
                // The frozen heads stay queryable and in the log; the next flush writes them.
                *self.cutting.lock().unwrap_or_else(|e| e.into_inner()) = None;
                return Err(e);
            }
        };
        let mut stats = FlushStats {
            records,
            ..Default::default()
        };
        {
            let _tenants = self.tenants.write().unwrap_or_else(|e| e.into_inner());
            for (name, t) in &tenants {
                let sections = Block::sections_of(block.as_ref(), name);
                let cached = (sections.len() == 1).then(|| sections[0].clone());
                let mut sealed = t
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .seal(through, sections);
                sealed.retain(|h| !h.is_empty());
                // The head just written is what the next query of this tenant reads: keep it
                // decoded rather than read the block back.
                if let (Some(section), 1) = (cached, sealed.len())
                    && let Some(head) = sealed.pop()
                {
                    self.cache.insert(&section, head.into_read_only());
                }
            }
            *self.cutting.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
        if let Some(b) = block {
            stats.block_bytes = b.size;
            stats.block = Some(std::path::PathBuf::from(b.key.to_string()));
            self.blocks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(b);
        }
        // Only now is every record of these segments durable elsewhere.
        let damaged = self
            .damaged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        stats.wal_bytes = crate::wal::delete_segments(&self.dir.join("wal"), through, &damaged);
        Ok(stats)
    }

    fn tenant_list(&self) -> Vec<(String, Arc<std::sync::RwLock<crate::Tenant>>)> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect()
    }

    /// Merges small blocks into larger ones, tiered by size and kept within a UTC day:
    /// whenever four blocks below 16 MiB of one day share a size class (below 1, 4 or
    /// 16 MiB), the oldest of them are merged into one (four, or as many of the four as fit
    /// in [`StoreOptions::compact_max_bytes`](crate::StoreOptions) together, at least two),
    /// and again until no class holds four (a block spanning two days is left alone). A
    /// flush every five minutes thus ends in fewer blocks a day than 288, while each
    /// profile is rewritten only about once per class. Once a day is closed (the store
    /// holds profiles from an hour after its end), its blocks are merged into one if they
    /// hold at most `compact_max_bytes` together: a query over whole days then reads one
    /// rollup a day. The bound (36 MiB by default: four 8.5 MB blocks of a live server's
    /// 600-profile flushes) keeps the memory of a merge bounded, at about five times its
    /// inputs (`crate::block::merge`): a busy server's day stays in dozens of blocks. The
    /// merged block is swapped in for queries before the inputs are deleted. Returns the
    /// number of blocks removed.
    pub fn compact(&self) -> Result<usize, StoreError> {
        let _guard = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        let max = self.options.compact_max_bytes;
        loop {
            if self
                .compaction_stopped
                .load(std::sync::atomic::Ordering::SeqCst)
            {
                return Ok(removed);
            }
            let group: Vec<Block> = {
                let blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
                // Blocks merge only within one UTC day: a merged block spanning days would
                // make an hour's query decode all of them (and outgrow the cache).
                let mut by_class: std::collections::BTreeMap<(i64, u32), Vec<&Block>> =
                    Default::default();
                for b in blocks.iter().filter(|b| b.size < COMPACT_BELOW_BYTES) {
                    let day = b.name.min_time.div_euclid(DAY_NANOS);
                    let same_day = b.name.max_time.div_euclid(DAY_NANOS) == day;
                    if same_day {
                        by_class
                            .entry((day, size_class(b.size)))
                            .or_default()
                            .push(b);
                    }
                }
                by_class
                    .into_values()
                    .filter(|c| c.len() >= COMPACT_FAN_IN)
                    .map(|mut c| {
                        c.sort_by_key(|b| (b.name.min_time, b.name.covered));
                        within(max, c.into_iter().take(COMPACT_FAN_IN))
                    })
                    .find(|group| group.len() >= 2)
                    .unwrap_or_else(|| closed_day(&blocks, max))
            };
            if group.len() < 2 {
                return Ok(removed);
            }
            // The inputs' decoded parts leave the cache after the merge anyway
            // (`swap_blocks`); dropped before it, they do not add to the merge's own memory.
            // A back-fill's flush leaves the head it just wrote decoded in the cache right
            // before the merge that rewrites it: the server's memory peaked at that moment
            // (BENCHMARKS.md, session 20 backfill20).
            for s in group.iter().flat_map(|b| &b.sections) {
                self.cache.forget(s);
            }
            let Some(merged) = block::compact(&self.objects, &group)? else {
                return Ok(removed);
            };
            let new_key = merged.key.clone();
            self.swap_blocks(&group, merged);
            // The new block lists the ones it replaces, so a crash before these deletions
            // ends in the next open deleting them, not in counting their profiles twice.
            for b in group.iter().filter(|b| b.key != new_key) {
                self.objects.delete(&b.key)?;
                removed += 1;
            }
        }
    }

    /// Replaces `old` blocks with `new` in the block list and in every tenant's sections.
    fn swap_blocks(&self, old: &[Block], new: Block) {
        let gone = |key: &object_store::path::Path| old.iter().any(|b| b.key == *key);
        for (name, t) in self.tenant_list() {
            let mut t = t.write().unwrap_or_else(|e| e.into_inner());
            for s in t
                .sections
                .iter()
                .filter(|s| gone(&s.key) || s.key == new.key)
            {
                self.cache.forget(s);
            }
            t.sections.retain(|s| !gone(&s.key) && s.key != new.key);
            let added: Vec<_> = new
                .sections
                .iter()
                .filter(|s| s.tenant == name)
                .cloned()
                .collect();
            let _ = t.seal(0, added);
        }
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        blocks.retain(|b| !gone(&b.key) && b.key != new.key);
        blocks.push(new);
    }

    /// Deletes blocks whose newest profile is older than the retention and drops such
    /// profiles from memory. Returns the number of block files deleted.
    pub fn enforce_retention(&self, now_nanos: i64) -> Result<usize, StoreError> {
        if self.options.retention_nanos <= 0 {
            return Ok(0);
        }
        let _guard = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        let cutoff = now_nanos.saturating_sub(self.options.retention_nanos);
        self.retention_floor
            .fetch_max(cutoff, std::sync::atomic::Ordering::Relaxed);
        let expired: Vec<Block> = {
            let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
            let (old, keep): (Vec<Block>, Vec<Block>) = std::mem::take(&mut *blocks)
                .into_iter()
                .partition(|b| b.name.max_time < cutoff);
            *blocks = keep;
            old
        };
        for (_, t) in self.tenant_list() {
            let mut t = t.write().unwrap_or_else(|e| e.into_inner());
            for s in t.sections.iter().filter(|s| s.max_time < cutoff) {
                self.cache.forget(s);
            }
            t.sections.retain(|s| s.max_time >= cutoff);
            t.head.drop_before(cutoff);
            for (_, h) in &mut t.frozen {
                h.drop_before(cutoff);
            }
            self.reindex_series(&mut t);
        }
        for b in &expired {
            self.objects.delete(&b.key)?;
        }
        Ok(expired.len())
    }

    /// `(blocks, their total bytes, WAL segment bytes)` in storage (a failed block listing
    /// counts as no blocks).
    pub fn disk_usage(&self) -> (usize, u64, u64) {
        let (n, b) = block::usage(&self.objects).unwrap_or((0, 0));
        let mut w = 0;
        if let Ok(rd) = std::fs::read_dir(self.dir.join("wal")) {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "wal") {
                    w += e.metadata().map(|m| m.len()).unwrap_or(0);
                }
            }
        }
        (n, b, w)
    }
}

/// The longest run of `blocks` (in order, at most `max` bytes together) from the first.
fn within<'b>(max: u64, blocks: impl Iterator<Item = &'b Block>) -> Vec<Block> {
    let mut total = 0u64;
    blocks
        .take_while(|b| {
            total = total.saturating_add(b.size);
            total <= max
        })
        .cloned()
        .collect()
}

/// The blocks of the oldest closed UTC day that still has several (each within the day,
/// together at most `max` bytes); empty when there is none.
fn closed_day(blocks: &[Block], max: u64) -> Vec<Block> {
    let Some(latest) = blocks.iter().map(|b| b.name.max_time).max() else {
        return Vec::new();
    };
    let mut by_day: std::collections::BTreeMap<i64, Vec<&Block>> = Default::default();
    for b in blocks {
        let day = b.name.min_time.div_euclid(DAY_NANOS);
        if b.name.max_time.div_euclid(DAY_NANOS) == day {
            by_day.entry(day).or_default().push(b);
        }
    }
    by_day
        .into_iter()
        .find(|(day, group)| {
            let end = (day + 1).saturating_mul(DAY_NANOS);
            group.len() >= 2
                && latest >= end.saturating_add(DAY_CLOSED_AFTER_NANOS)
                && group.iter().map(|b| b.size).sum::<u64>() <= max
        })
        .map(|(_, group)| group.into_iter().cloned().collect())
        .unwrap_or_default()
}
