//! What leaves the log and what leaves storage: [`Store::flush`] folds closed write-ahead
//! log segments into an immutable block, [`Store::enforce_retention`] deletes blocks (and
//! drops head profiles) past the retention, and [`Store::disk_usage`] measures both.

use crate::{FlushStats, Store, StoreError, block};

impl Store {
    /// Folds every closed log segment into one immutable block, then deletes those segments.
    /// Records acknowledged before the call are all covered. Safe to call concurrently with
    /// ingest (new records go to the next segment).
    pub fn flush(&self) -> Result<FlushStats, StoreError> {
        let _guard = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        let through = self.wal.rotate()?;
        block::flush(&self.dir.join("wal"), &self.objects, through)
    }

    /// Deletes blocks whose newest profile is older than the retention and drops such
    /// profiles from memory. Returns the number of block files deleted.
    pub fn enforce_retention(&self, now_nanos: i64) -> Result<usize, StoreError> {
        if self.options.retention_nanos <= 0 {
            return Ok(0);
        }
        let cutoff = now_nanos.saturating_sub(self.options.retention_nanos);
        let deleted = block::delete_expired(&self.objects, cutoff)?;
        let tenants: Vec<_> = self
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for t in tenants {
            t.write()
                .unwrap_or_else(|e| e.into_inner())
                .drop_before(cutoff);
        }
        Ok(deleted)
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
