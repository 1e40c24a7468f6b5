//! Durable profile storage for Ember.
//!
//! Owns the storage engine behind `ember server`, ingest included:
//! - [`ingest`]: [`Store::ingest`] validates a batch of pprof profiles (decompression caps
//!   per profile and per batch, sample and label limits, series per tenant and in all),
//!   appends it to the write-ahead log and applies it to the head once fsync'd; `inflight`
//!   counts the decompressed bytes running ingests hold, per tenant and in all;
//! - [`wal`]: the write-ahead log with group commit (fsync before the acknowledgement),
//!   failed writes rolled back, records framed so replay skips a damaged one;
//! - `replay`: on start the log is replayed into the heads, flushed into blocks every
//!   [`StoreOptions::replay_flush_bytes`];
//! - `labels`: the series label sets (one per sample type, profile type id
//!   `name:type:unit:period_type:period_unit`) a profile is stored under;
//! - `apply`: interning a decoded profile into a tenant's head;
//! - [`head`]: per-tenant in-memory series with a label index and de-duplicated symbols;
//! - [`selector`]: Prometheus-style label selectors;
//! - `read`: [`Query`] and the reads (merged stacks, merged pprof, time series of totals,
//!   label names/values, profile types, series);
//! - `tenant`: a tenant's three tiers (open head, heads frozen by a flush, block sections)
//!   and which one a newly durable record goes to;
//! - `block`: immutable blocks, one zstd'd columnar section per tenant with its rollup
//!   (`rollup`: whole-section flame graphs) and time chunks (`chunks`: per service and
//!   ten-minute window, what a read of part of a section decodes), plus an index read at
//!   start; `cache`: decoded sections, rollups and chunks under a memory budget;
//! - `retention`: [`Store::flush`] cuts the log, writes the frozen heads as one block
//!   (through `object_store`) and deletes those segments; [`Store::compact`] merges small
//!   blocks; [`Store::enforce_retention`] deletes blocks past retention.
//!
//! Tenants are separate heads: nothing one tenant stored is reachable from another's queries.
//! The store knows nothing of HTTP or wire protocols: callers turn requests into an
//! [`IngestBatch`] and map [`IngestError`] to their own status codes.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]
mod apply;
mod block;
mod cache;
mod chunks;
mod encoding;
pub mod head;
mod inflight;
pub mod ingest;
mod labels;
mod objects;
mod pprof_out;
mod read;
mod replay;
mod retention;
mod rollup;
mod section_codec;
pub mod selector;
mod tenant;
pub mod wal;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

/// The `object_store` crate blocks are written through, re-exported so callers build
/// backends with the same version.
pub use object_store;

/// What a block's bytes are spent on (for measuring the layout; see `examples/block_stats.rs`).
#[doc(hidden)]
pub use block::stats::breakdown as block_breakdown;
pub use head::{Labels, Series, StoredProfile, TenantHead};
pub use ingest::{
    IngestBatch, IngestError, IngestLimits, IngestProfile, IngestReceipt, IngestRecord, now_nanos,
};
pub use labels::{default_profile_name, normalize_labels, series_labels};
pub use read::{MAX_PROFILE_LIST, Merged, ProfileList, ProfileRef, Query, TimeSeries};
pub use selector::{MatchOp, Matcher, Selector, parse_selector};
pub use wal::{Ack, ReplayStats, Replayed, Wal, WalOptions, WalStats};

pub(crate) use apply::{apply_record, with_view};
use tenant::Tenant;

/// Errors of the storage engine.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A file operation failed.
    #[error("{path}: {message}")]
    Io {
        /// File or directory involved.
        path: String,
        /// The OS error text.
        message: String,
    },
    /// A write failed because the file system is full (`ENOSPC`, or a quota: `EDQUOT`).
    /// Nothing of the refused write is kept; retrying once space is freed succeeds.
    #[error(
        "{path}: no space left on the device holding the data directory ({message}); free some space and retry"
    )]
    NoSpace {
        /// File or directory involved.
        path: String,
        /// The OS error text.
        message: String,
    },
    /// The store (its write-ahead log) was closed.
    #[error("storage is shutting down")]
    Closed,
    /// A block was written by a newer Ember in a format this build cannot read. Nothing is
    /// changed: the store does not open, and the block is left for the newer build.
    #[error(
        "{path}: block format {version} was written by a newer Ember (this build reads formats \
         1 to 4); run the newer build on this data directory, or give this one another \
         directory. Nothing was changed"
    )]
    NewerFormat {
        /// The block.
        path: String,
        /// The format number in its trailer.
        version: u32,
    },
    /// A label selector could not be parsed.
    #[error("bad selector: {0}")]
    Selector(String),
    /// Another process (or another [`Store`] of this one) has the data directory open.
    #[error(
        "{path} is in use by another Ember server (it holds the directory's lock); stop it or \
         choose another data directory: two servers on one directory would delete each \
         other's write-ahead log"
    )]
    Locked {
        /// The lock file.
        path: String,
    },
}

impl StoreError {
    fn io(path: &Path, e: std::io::Error) -> Self {
        // ENOSPC and EDQUOT (Linux's numbers): a full disk is the caller's "retry later".
        let full = e.kind() == std::io::ErrorKind::StorageFull
            || e.kind() == std::io::ErrorKind::QuotaExceeded
            || matches!(e.raw_os_error(), Some(28 | 122));
        if full {
            return StoreError::NoSpace {
                path: path.display().to_string(),
                message: e.to_string(),
            };
        }
        StoreError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }
}

/// Label name of the profile type id series label.
pub const PROFILE_TYPE_LABEL: &str = "__profile_type__";
/// Label name of the profile name (`process_cpu`, `memory`, ...).
pub const NAME_LABEL: &str = "__name__";
/// Label name of the service.
pub const SERVICE_LABEL: &str = "service_name";
/// Label name of the sample type (`cpu`, `alloc_space`).
pub const TYPE_LABEL: &str = "__type__";
/// Label that marks a series whose profiles are averaged, not summed, when a query merges
/// several of them (Pyroscope's legacy `aggregationType=average`); its one meaningful value
/// is [`AVERAGE`]. Series without it are summed.
pub const AGGREGATION_LABEL: &str = "__aggregation_type__";
/// The value of [`AGGREGATION_LABEL`] that makes a series averaged.
pub const AVERAGE: &str = "average";

/// Storage settings.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most series one tenant may hold; further new series are refused.
    pub max_series_per_tenant: usize,
    /// Most series all tenants may hold together; further new series are refused (0 = no
    /// limit). Checked before a batch is logged, so concurrent ingests may pass it by the
    /// new series they bring at the same moment, as with the per-tenant limit.
    pub max_series_total: usize,
    /// Profiles older than this (nanoseconds before now) are dropped; 0 keeps everything.
    pub retention_nanos: i64,
    /// What [`Store::ingest`] accepts.
    pub ingest: IngestLimits,
    /// Memory budget for decoded block sections kept between queries, in bytes.
    pub cache_bytes: usize,
    /// Most block bytes one compaction merges ([`Store::compact`]), which bounds the memory
    /// a merge adds. A merge holds the merged symbol tables and stack tree, each input's
    /// profiles still encoded, and the block it writes (never every profile decoded): about
    /// five times its inputs on the realistic high-churn workload (162–170 MiB peak for four
    /// 8.5 MB blocks of 600 profiles each, `examples/compact_rss.rs`).
    pub compact_max_bytes: u64,
    /// A write-ahead log segment is closed once it holds this many bytes
    /// ([`WalOptions::segment_bytes`]); replay flushes only at segment ends, so this bounds
    /// the memory replay adds to `replay_flush_bytes`.
    pub wal_segment_bytes: u64,
    /// While the log is replayed at open, the heads are written as a block (and the
    /// replayed segments deleted) at the end of each segment once the records replayed
    /// since the last block reach this many bytes; 0 = replay everything into memory.
    pub replay_flush_bytes: u64,
}

impl Default for StoreOptions {
    /// 100,000 series per tenant and 200,000 in all, 30 days of retention, the default
    /// [`IngestLimits`], a 128 MiB block cache, merges of at most 36 MiB of blocks (four
    /// blocks of a live server flushing 600 realistic profiles every five minutes, ~170 MiB
    /// while merging), log segments of 64 MiB and replay flushed every 128 MiB of log.
    fn default() -> Self {
        StoreOptions {
            max_series_per_tenant: 100_000,
            max_series_total: 200_000,
            retention_nanos: 30 * 86_400 * 1_000_000_000,
            ingest: IngestLimits::default(),
            cache_bytes: 128 << 20,
            compact_max_bytes: 36 << 20,
            wal_segment_bytes: 64 << 20,
            replay_flush_bytes: 128 << 20,
        }
    }
}

/// What one [`Store::flush`] wrote.
#[derive(Debug, Clone, Default)]
pub struct FlushStats {
    /// The block file written (`None` when there was nothing to flush).
    pub block: Option<std::path::PathBuf>,
    /// Its size in bytes.
    pub block_bytes: u64,
    /// Log bytes the block replaced (segments deleted).
    pub wal_bytes: u64,
    /// Records folded into the block.
    pub records: usize,
}

/// The storage engine: write-ahead log, per-tenant heads and lazily opened blocks.
#[derive(Debug)]
pub struct Store {
    dir: std::path::PathBuf,
    objects: objects::Objects,
    /// One flush, compaction or retention pass at a time.
    flush_lock: std::sync::Mutex<()>,
    wal: Wal,
    tenants: RwLock<HashMap<String, Arc<RwLock<Tenant>>>>,
    /// The log segment a running flush cut at: a tenant created meanwhile starts with a
    /// frozen head for it, so late records of the cut have a place to go.
    cutting: std::sync::Mutex<Option<u64>>,
    /// Every block in storage.
    blocks: std::sync::Mutex<Vec<block::Block>>,
    pending: Arc<tenant::Pending>,
    cache: cache::BlockCache,
    /// Profiles before this time are past retention and never served.
    retention_floor: std::sync::atomic::AtomicI64,
    /// Set by [`Store::stop_compaction`]: [`Store::compact`] merges no further group.
    compaction_stopped: std::sync::atomic::AtomicBool,
    options: StoreOptions,
    replay: ReplayStats,
    replay_errors: usize,
    /// Blocks written while replaying the log.
    replay_flushes: usize,
    /// Log segments whose replay skipped damage or could not apply a record: set aside as
    /// `.corrupt` by the flush that covers them, never deleted.
    damaged: std::sync::Mutex<std::collections::BTreeSet<u64>>,
    /// `<dir>/LOCK`, locked exclusively while the store is open (released when the process
    /// ends, however it ends).
    _lock: std::fs::File,
    /// Blocks found corrupt at open and renamed to `<name>.corrupt`.
    quarantined: Vec<String>,
    /// Decompressed bytes held by running ingests.
    inflight: inflight::InFlight,
    /// Series over every tenant's tiers: the sum of their `series_count`.
    series_total: std::sync::atomic::AtomicUsize,
}

/// Takes the exclusive lock of the data directory `dir` (`<dir>/LOCK`, an advisory `flock`).
/// A second server on the same directory would replay, flush and delete the first one's
/// log segments, so it must not start.
fn lock_dir(dir: &Path) -> Result<std::fs::File, StoreError> {
    let path = dir.join("LOCK");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Locked {
            path: path.display().to_string(),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::io(&path, e)),
    }
}

impl Store {
    /// Opens (or creates) the store in `dir`: loads its blocks, then replays the write-ahead
    /// log segments no block covers yet (writing blocks as it goes, every
    /// [`StoreOptions::replay_flush_bytes`]; damaged records are skipped and counted in
    /// [`Store::replay_stats`]). Blocks are kept under
    /// `<dir>/blocks/` through `object_store`'s local filesystem backend. Fails with
    /// [`StoreError::Locked`] while another store (in any process) has `dir` open.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        let objects = objects::Objects::local(dir, "blocks")?;
        Store::open_inner(dir, options, objects)
    }

    /// Like [`Store::open`], with the write-ahead log in `<dir>/wal/` but blocks under
    /// `prefix` of `blocks` (any `object_store` backend: local, S3, GCS, Azure, memory).
    pub fn open_with_objects(
        dir: &Path,
        options: StoreOptions,
        blocks: Arc<dyn object_store::ObjectStore>,
        prefix: &str,
    ) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
        let objects = objects::Objects::new(blocks, prefix)?;
        Store::open_inner(dir, options, objects)
    }

    fn open_inner(
        dir: &Path,
        options: StoreOptions,
        objects: objects::Objects,
    ) -> Result<Store, StoreError> {
        let lock = lock_dir(dir)?;
        let (blocks, quarantined) = block::open_all(&objects)?;
        let covered = blocks.iter().map(|b| b.name.covered).max().unwrap_or(0);
        let mut tenants: HashMap<String, Tenant> = HashMap::new();
        for b in &blocks {
            for s in &b.sections {
                let t = tenants.entry(s.tenant.clone()).or_default();
                t.sections.push(s.clone());
                t.flushed_through = covered;
            }
        }
        let mut blocks = blocks;
        let replayed = replay::replay(
            &dir.join("wal"),
            &objects,
            &options,
            covered,
            &mut tenants,
            &mut blocks,
        )?;
        let mut series_total = 0;
        let tenants = tenants
            .into_iter()
            .map(|(name, mut t)| {
                t.sections.sort_by_key(|s| (s.min_time, s.max_time));
                t.index_series();
                series_total += t.series_count();
                (name, Arc::new(RwLock::new(t)))
            })
            .collect();
        let cache = cache::BlockCache::new(options.cache_bytes);
        Ok(Store {
            dir: dir.to_path_buf(),
            objects,
            flush_lock: std::sync::Mutex::new(()),
            wal: replayed.wal,
            tenants: RwLock::new(tenants),
            cutting: std::sync::Mutex::new(None),
            blocks: std::sync::Mutex::new(blocks),
            pending: Arc::new(tenant::Pending::default()),
            cache,
            retention_floor: std::sync::atomic::AtomicI64::new(i64::MIN),
            compaction_stopped: std::sync::atomic::AtomicBool::new(false),
            options,
            replay: replayed.stats,
            replay_errors: replayed.errors,
            replay_flushes: replayed.flushes,
            damaged: std::sync::Mutex::new(replayed.damaged),
            _lock: lock,
            quarantined,
            inflight: inflight::InFlight::default(),
            series_total: std::sync::atomic::AtomicUsize::new(series_total),
        })
    }

    /// The file names of the blocks found corrupt when the store was opened: each was
    /// renamed to `<name>.corrupt` and its profiles are not served.
    pub fn quarantined_blocks(&self) -> &[String] {
        &self.quarantined
    }

    /// What the write-ahead log replay found when the store was opened, and how many
    /// replayed records could not be applied.
    pub fn replay_stats(&self) -> (ReplayStats, usize) {
        (self.replay, self.replay_errors)
    }

    /// Blocks written while the log was replayed at open (see
    /// [`StoreOptions::replay_flush_bytes`]).
    pub fn replay_flushes(&self) -> usize {
        self.replay_flushes
    }

    /// `false` while the disk holding the log is full: the last log write failed for lack
    /// of space and a small probe write still fails (see [`Wal::has_space`]). Ingest
    /// answers [`StoreError::NoSpace`] meanwhile; a server reports itself not ready.
    pub fn has_space(&self) -> bool {
        self.wal.has_space()
    }

    /// Write-ahead log counters.
    pub fn wal_stats(&self) -> WalStats {
        self.wal.stats()
    }

    /// Series over every tenant (what `max_series_total` limits).
    pub fn series_total(&self) -> usize {
        self.series_total.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts `n` new series in [`Store::series_total`].
    fn series_added(&self, n: usize) {
        self.series_total
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Rebuilds `t`'s set of series (after retention dropped some) and corrects the total.
    fn reindex_series(&self, t: &mut Tenant) {
        use std::sync::atomic::Ordering::Relaxed;
        let before = t.series_count();
        t.index_series();
        let after = t.series_count();
        if after >= before {
            self.series_total.fetch_add(after - before, Relaxed);
        } else {
            let _ = self
                .series_total
                .fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(before - after)));
        }
    }

    fn tenant(&self, tenant: &str) -> Option<Arc<RwLock<Tenant>>> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            .cloned()
    }

    fn tenant_or_create(&self, tenant: &str) -> Arc<RwLock<Tenant>> {
        if let Some(t) = self.tenant(tenant) {
            return t;
        }
        let mut tenants = self.tenants.write().unwrap_or_else(|e| e.into_inner());
        tenants
            .entry(tenant.to_string())
            .or_insert_with(|| {
                let mut t = Tenant::default();
                // A flush is cutting: this tenant's records of the cut must reach its block.
                if let Some(through) = *self.cutting.lock().unwrap_or_else(|e| e.into_inner()) {
                    t.freeze(through);
                }
                Arc::new(RwLock::new(t))
            })
            .clone()
    }

    /// Makes a running [`Store::compact`] return after the merge it is writing, and later
    /// calls return at once: a shutdown then waits for at most one merge, not a chain of
    /// them, before its final flush. Nothing is lost: unmerged blocks stay as they are.
    pub fn stop_compaction(&self) {
        self.compaction_stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Writes out everything queued in the log and stops accepting appends.
    pub fn close(&self) {
        self.wal.close();
    }

    /// Tenants that hold data.
    pub fn tenants(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        v.sort();
        v
    }

    /// `(series, profiles, interned strings, call-tree nodes)` in memory (the open and
    /// frozen heads of all tenants; blocks not counted).
    pub fn head_stats(&self) -> (usize, u64, usize, usize) {
        let tenants = self.tenants.read().unwrap_or_else(|e| e.into_inner());
        let mut out = (0, 0, 0, 0);
        for t in tenants.values() {
            let t = t.read().unwrap_or_else(|e| e.into_inner());
            out.1 += t.head_profiles();
            for h in std::iter::once(&t.head).chain(t.frozen.iter().map(|(_, h)| h)) {
                let (s, n) = h.symbol_counts();
                out.0 += h.series_count();
                out.2 += s;
                out.3 += n;
            }
        }
        out
    }

    /// `(sections held, their estimated bytes, hits, misses)` of the block cache.
    pub fn cache_stats(&self) -> (usize, usize, u64, u64) {
        self.cache.stats()
    }
}
