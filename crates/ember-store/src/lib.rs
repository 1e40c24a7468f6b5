//! Durable profile storage for Ember.
//!
//! Owns the storage engine behind `ember server`:
//! - [`wal`]: every ingest is framed into the write-ahead log and fsync'd (group commit)
//!   before it is acknowledged; on start the log is replayed into the head;
//! - [`head`]: per-tenant in-memory series with a label index and de-duplicated symbols;
//! - [`selector`]: Prometheus-style label selectors;
//! - blocks (this module): [`Store::flush`] folds the closed log segments into one immutable,
//!   gzip'd columnar block file under `<data-dir>/blocks/` and deletes those segments; blocks
//!   are loaded at start, and [`Store::enforce_retention`] deletes blocks past retention;
//! - this module: [`Store`], which splits each ingested pprof profile into one series per
//!   sample type (profile type id `name:type:unit:period_type:period_unit`) and answers
//!   queries (merged stacks, time series of totals, label names/values, profile types, series).
//!
//! Tenants are separate heads: nothing one tenant stored is reachable from another's queries.

#![warn(missing_docs)]
mod block;
pub mod head;
mod objects;
mod pprof_out;
pub mod selector;
pub mod wal;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, RwLock};

use ember_pprof::{DecodeLimits, Profile, ProfileView};

/// The `object_store` crate blocks are written through, re-exported so callers build
/// backends with the same version.
pub use object_store;

pub use head::{Labels, Series, StoredProfile, TenantHead};
pub use selector::{MatchOp, Matcher, Selector, parse_selector};
pub use wal::{Ack, ReplayStats, Wal, WalStats};

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
    /// The store (its write-ahead log) was closed.
    #[error("storage is shutting down")]
    Closed,
    /// A label selector could not be parsed.
    #[error("bad selector: {0}")]
    Selector(String),
    /// A stored or submitted profile could not be decoded.
    #[error("bad profile: {0}")]
    Profile(String),
    /// Accepting the profile would create more series than the tenant may have.
    #[error("series limit reached: tenant {tenant:?} may have at most {limit} series")]
    SeriesLimit {
        /// The tenant.
        tenant: String,
        /// Its limit.
        limit: usize,
    },
}

impl StoreError {
    fn io(path: &Path, e: std::io::Error) -> Self {
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

/// Whether the series' profiles are averaged over time rather than summed.
fn is_averaged(series: &Series) -> bool {
    series
        .labels
        .iter()
        .any(|(n, v)| n == AGGREGATION_LABEL && v == AVERAGE)
}

/// `sum / count` rounded to the nearest integer (half away from zero); `sum` when `count` is
/// 0 or 1.
fn average(sum: i64, count: i64) -> i64 {
    if count <= 1 {
        return sum;
    }
    let q = sum / count;
    let r = sum % count;
    // |r| * 2 >= count rounds away from zero; the remainder has the sign of the sum.
    if r.unsigned_abs().saturating_mul(2) >= count.unsigned_abs() {
        q + sum.signum()
    } else {
        q
    }
}

/// One acknowledged ingest as written to the write-ahead log: tenant, series labels and the
/// pprof profile (gzip'd or raw) exactly as it will be applied to the head.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IngestRecord {
    /// Tenant id.
    #[prost(string, tag = "1")]
    pub tenant: String,
    /// Series labels shared by every sample type of the profile (`__name__`, `service_name`, ...).
    #[prost(message, repeated, tag = "2")]
    pub labels: Vec<LabelPair>,
    /// Profile timestamp override (unix ns); 0 = the profile's own `time_nanos`, else `received_nanos`.
    #[prost(int64, tag = "3")]
    pub time_nanos: i64,
    /// The pprof profile, gzip'd or raw.
    #[prost(bytes = "vec", tag = "4")]
    pub profile: Vec<u8>,
    /// When the server received it (unix ns).
    #[prost(int64, tag = "5")]
    pub received_nanos: i64,
}

/// A label of an [`IngestRecord`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelPair {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// Storage settings.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most series one tenant may hold; further new series are refused.
    pub max_series_per_tenant: usize,
    /// Profiles older than this (nanoseconds before now) are dropped; 0 keeps everything.
    pub retention_nanos: i64,
}

impl Default for StoreOptions {
    /// 100,000 series per tenant, 30 days of retention.
    fn default() -> Self {
        StoreOptions {
            max_series_per_tenant: 100_000,
            retention_nanos: 30 * 86_400 * 1_000_000_000,
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

/// A query: which series, which profile type, which time range.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Label matchers (its `name` is ignored; resolve it into matchers first).
    pub selector: Selector,
    /// Profile type id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`) or bare sample type (`cpu`).
    pub profile_type: Option<String>,
    /// Inclusive start, unix nanoseconds.
    pub start_nanos: i64,
    /// Inclusive end, unix nanoseconds.
    pub end_nanos: i64,
}

impl Query {
    fn full_selector(&self) -> Selector {
        let mut s = self.selector.clone();
        if let Some(t) = &self.profile_type {
            let name = if t.contains(':') {
                PROFILE_TYPE_LABEL
            } else {
                TYPE_LABEL
            };
            s.matchers.push(Matcher::eq(name, t));
        }
        s
    }
}

/// Merged stacks of a selection.
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// `(frames root→leaf, value)`, one entry per distinct stack, zero sums dropped.
    pub stacks: Vec<(Vec<String>, i64)>,
    /// Sum of all values.
    pub total: i64,
    /// Profiles merged.
    pub profiles: usize,
    /// Series that contributed.
    pub series: usize,
    /// Profile type ids of the contributing series.
    pub profile_types: BTreeSet<String>,
}

/// A time series of totals.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    /// The group-by label values (`(name, value)`).
    pub labels: Labels,
    /// `(bucket start unix ns, summed value)`, sorted, only non-empty buckets.
    pub points: Vec<(i64, i64)>,
}

/// The storage engine: write-ahead log plus per-tenant heads.
pub struct Store {
    dir: std::path::PathBuf,
    objects: objects::Objects,
    flush_lock: std::sync::Mutex<()>,
    wal: Wal,
    tenants: RwLock<HashMap<String, Arc<RwLock<TenantHead>>>>,
    options: StoreOptions,
    replay: ReplayStats,
    replay_errors: usize,
}

/// The profile name used when the client sent none: derived from the first sample type.
pub fn default_profile_name(sample_type: &str) -> &'static str {
    match sample_type {
        "cpu" | "samples" | "wall" => "process_cpu",
        t if t.starts_with("alloc_")
            || t.starts_with("inuse_")
            || t == "space"
            || t == "objects" =>
        {
            "memory"
        }
        "contentions" | "delay" => "mutex",
        "goroutine" | "goroutines" => "goroutine",
        _ => "process_cpu",
    }
}

/// Sorts and de-duplicates labels (last value of a repeated name wins).
pub fn normalize_labels(mut labels: Labels) -> Labels {
    labels.reverse();
    labels.sort_by(|a, b| a.0.cmp(&b.0));
    labels.dedup_by(|a, b| a.0 == b.0);
    labels
}

/// The series label sets (one per sample type) that `base` labels plus `profile` produce.
pub fn series_labels(base: &[(String, String)], profile: &ProfileView<'_>) -> Vec<Labels> {
    let s = |i: i64| profile.string(i).into_owned();
    let mut base: Labels = base
        .iter()
        .filter(|(n, _)| n != "__delta__" && !n.is_empty())
        .cloned()
        .collect();
    let first_type = profile
        .sample_type
        .first()
        .map(|t| s(t.r#type))
        .unwrap_or_default();
    if !base.iter().any(|(n, v)| n == NAME_LABEL && !v.is_empty()) {
        base.push((NAME_LABEL.into(), default_profile_name(&first_type).into()));
    }
    if !base
        .iter()
        .any(|(n, v)| n == SERVICE_LABEL && !v.is_empty())
    {
        base.push((SERVICE_LABEL.into(), "unknown_service".into()));
    }
    let base = normalize_labels(base);
    let name = base
        .iter()
        .find(|(n, _)| n == NAME_LABEL)
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let (pt, pu) = profile
        .period_type
        .map(|p| (s(p.r#type), s(p.unit)))
        .unwrap_or_default();
    profile
        .sample_type
        .iter()
        .map(|st| {
            let (t, u) = (s(st.r#type), s(st.unit));
            let mut l = base.clone();
            l.push((
                PROFILE_TYPE_LABEL.into(),
                format!("{name}:{t}:{u}:{pt}:{pu}"),
            ));
            l.push(("__period_type__".into(), pt.clone()));
            l.push(("__period_unit__".into(), pu.clone()));
            l.push((TYPE_LABEL.into(), t));
            l.push(("__unit__".into(), u));
            normalize_labels(l)
        })
        .collect()
}

fn record_labels(record: &IngestRecord) -> Labels {
    record
        .labels
        .iter()
        .map(|l| (l.name.clone(), l.value.clone()))
        .collect()
}

impl Store {
    /// Opens (or creates) the store in `dir`: loads its blocks, then replays the write-ahead
    /// log segments no block covers yet, then applies retention. Blocks are kept under
    /// `<dir>/blocks/` through `object_store`'s local filesystem backend.
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
        let mut heads: HashMap<String, TenantHead> = HashMap::new();
        let covered = block::load_all(&objects, &mut heads)?;
        let mut replay_errors = 0usize;
        let mut replayed: Vec<IngestRecord> = Vec::new();
        let (wal, replay) = Wal::open(&dir.join("wal"), covered, |payload| {
            match <IngestRecord as prost::Message>::decode(payload) {
                Ok(r) => replayed.push(r),
                Err(_) => replay_errors += 1,
            }
        })?;
        for record in replayed {
            let applied = with_view(&record.profile, |p| {
                let head = heads.entry(record.tenant.clone()).or_default();
                apply_record(head, &record, p);
            });
            if applied.is_err() {
                replay_errors += 1;
            }
        }
        let tenants = heads
            .into_iter()
            .map(|(t, h)| (t, Arc::new(RwLock::new(h))))
            .collect();
        let store = Store {
            dir: dir.to_path_buf(),
            objects,
            flush_lock: std::sync::Mutex::new(()),
            wal,
            tenants: RwLock::new(tenants),
            options,
            replay,
            replay_errors,
        };
        Ok(store)
    }

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

    /// What the write-ahead log replay found when the store was opened, and how many
    /// replayed records could not be applied.
    pub fn replay_stats(&self) -> (ReplayStats, usize) {
        (self.replay, self.replay_errors)
    }

    /// Write-ahead log counters.
    pub fn wal_stats(&self) -> WalStats {
        self.wal.stats()
    }

    fn tenant(&self, tenant: &str) -> Option<Arc<RwLock<TenantHead>>> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            .cloned()
    }

    fn tenant_or_create(&self, tenant: &str) -> Arc<RwLock<TenantHead>> {
        if let Some(t) = self.tenant(tenant) {
            return t;
        }
        self.tenants
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(tenant.to_string())
            .or_insert_with(|| Arc::new(RwLock::new(TenantHead::new())))
            .clone()
    }

    /// Refuses the ingest if it would push the tenant past its series limit; `series` are the
    /// label sets ([`series_labels`]) of every profile of the ingest.
    pub fn check_limits<'l>(
        &self,
        tenant: &str,
        series: impl IntoIterator<Item = &'l Labels>,
    ) -> Result<(), StoreError> {
        let series: Vec<&Labels> = series.into_iter().collect();
        let refuse = || StoreError::SeriesLimit {
            tenant: tenant.into(),
            limit: self.options.max_series_per_tenant,
        };
        let Some(t) = self.tenant(tenant) else {
            return if series.len() > self.options.max_series_per_tenant {
                Err(refuse())
            } else {
                Ok(())
            };
        };
        let head = t.read().unwrap_or_else(|e| e.into_inner());
        let new = series.iter().filter(|l| !head.has_series(l)).count();
        if new > 0 && head.series_count() + new > self.options.max_series_per_tenant {
            return Err(refuse());
        }
        Ok(())
    }

    /// Appends the record to the write-ahead log; `ack` runs once it is durable. Call
    /// [`Store::apply`] after a successful ack to make it queryable.
    pub fn append(&self, record: &IngestRecord, ack: Ack) {
        self.wal.append(prost::Message::encode_to_vec(record), ack);
    }

    /// Decodes the record's profile, then [`Store::append`] and [`Store::apply`], blocking
    /// until durable. A profile that does not decode is refused before anything is logged.
    pub fn ingest_blocking(&self, record: &IngestRecord) -> Result<usize, StoreError> {
        let raw = ember_pprof::decompress(&record.profile, &DecodeLimits::default())
            .map_err(|e| StoreError::Profile(e.to_string()))?;
        let profile = ProfileView::parse(&raw).map_err(|e| StoreError::Profile(e.to_string()))?;
        self.wal
            .append_blocking(prost::Message::encode_to_vec(record))?;
        let series = series_labels(&record_labels(record), &profile);
        Ok(self.apply(record, &profile, series))
    }

    /// Adds the decoded `profile` of `record` to the head under `series`, the label sets
    /// [`series_labels`] gives for the record's labels and the profile (one per sample type,
    /// computed once by the caller, which needs them for [`Store::check_limits`] first).
    /// Returns the number of series written to.
    pub fn apply(
        &self,
        record: &IngestRecord,
        profile: &ProfileView<'_>,
        series: Vec<Labels>,
    ) -> usize {
        let t = self.tenant_or_create(&record.tenant);
        let mut head = t.write().unwrap_or_else(|e| e.into_inner());
        apply_to(&mut head, record, profile, series)
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

    /// `(series, profiles, interned strings, call-tree nodes)` over all tenants.
    pub fn head_stats(&self) -> (usize, u64, usize, usize) {
        let tenants = self.tenants.read().unwrap_or_else(|e| e.into_inner());
        let mut out = (0, 0, 0, 0);
        for t in tenants.values() {
            let h = t.read().unwrap_or_else(|e| e.into_inner());
            let (s, n) = h.symbol_counts();
            out.0 += h.series_count();
            out.1 += h.profiles;
            out.2 += s;
            out.3 += n;
        }
        out
    }

    /// Sums the matching profiles of the query per stack node (dense by node id) and
    /// fills the counters of `out`. The profiles of an averaged series ([`AGGREGATION_LABEL`])
    /// are first averaged per node over the series' profiles in range, then added.
    fn sum_nodes(head: &TenantHead, query: &Query, out: &mut Merged) -> Vec<i64> {
        let selector = query.full_selector();
        let mut sums = vec![0i64; head.node_count()];
        for series in head.select(&selector) {
            let mut used = false;
            let averaged = is_averaged(series);
            // Per node sums of this series alone, only needed when it is averaged.
            let mut own: BTreeMap<u32, i64> = BTreeMap::new();
            let mut count = 0i64;
            for p in in_range(series, query) {
                used = true;
                out.profiles += 1;
                count += 1;
                // Two loops rather than a branch per value: the summed case is the hot one.
                if averaged {
                    for (n, v) in p.nodes.iter().zip(&p.values) {
                        let e = own.entry(*n).or_insert(0);
                        *e = e.saturating_add(*v);
                    }
                } else {
                    for (n, v) in p.nodes.iter().zip(&p.values) {
                        if let Some(e) = sums.get_mut(*n as usize) {
                            *e = e.saturating_add(*v);
                        }
                    }
                }
            }
            for (n, v) in own {
                if let Some(e) = sums.get_mut(n as usize) {
                    *e = e.saturating_add(average(v, count));
                }
            }
            if used {
                out.series += 1;
                if let Some((_, v)) = series.labels.iter().find(|(n, _)| n == PROFILE_TYPE_LABEL) {
                    out.profile_types.insert(v.clone());
                }
            }
        }
        sums
    }

    /// Merges every matching profile in the time range into one set of stacks, by frame
    /// names (stacks that differ only in addresses or mappings add up).
    pub fn merge_stacks(&self, tenant: &str, query: &Query) -> Merged {
        let Some(t) = self.tenant(tenant) else {
            return Merged::default();
        };
        let head = t.read().unwrap_or_else(|e| e.into_inner());
        let mut out = Merged::default();
        let sums = Self::sum_nodes(&head, query, &mut out);
        let mut frames = vec![0i64; head.frame_count()];
        for (n, v) in sums.iter().enumerate() {
            if *v != 0
                && let Some(f) = frames.get_mut(head.frame_of(n as u32) as usize)
            {
                *f = f.saturating_add(*v);
            }
        }
        let mut stacks: Vec<(Vec<String>, i64)> = frames
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(f, v)| {
                out.total = out.total.saturating_add(*v);
                (
                    head.frame_path(f as u32)
                        .into_iter()
                        .map(str::to_string)
                        .collect(),
                    *v,
                )
            })
            .collect();
        stacks.sort();
        out.stacks = stacks;
        out
    }

    /// Merges every matching profile in the time range into one pprof profile with full
    /// symbols: mappings (with build ids), functions (name, system name, file, start line)
    /// and locations (address, mapping, inlined lines). Identical stacks of locations add
    /// up. `None` when nothing matched. The sample type, unit and period type come from the
    /// contributing series' labels (the first profile type when several matched).
    pub fn merge_profile(&self, tenant: &str, query: &Query) -> Option<(Profile, Merged)> {
        let t = self.tenant(tenant)?;
        let head = t.read().unwrap_or_else(|e| e.into_inner());
        let mut merged = Merged::default();
        let sums = Self::sum_nodes(&head, query, &mut merged);
        if merged.profiles == 0 {
            return None;
        }
        let label = |name: &str| -> String {
            head.select(&query.full_selector())
                .into_iter()
                .filter(|s| in_range(s, query).next().is_some())
                .find_map(|s| {
                    s.labels
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, v)| v.clone())
                })
                .unwrap_or_default()
        };
        let period = head
            .select(&query.full_selector())
            .into_iter()
            .find(|s| in_range(s, query).next().is_some())
            .map_or(0, |s| s.period);
        let mut b = pprof_out::Builder::new(&head);
        let st = b.value_type(&label(TYPE_LABEL), &label("__unit__"));
        let pt = b.value_type(&label("__period_type__"), &label("__period_unit__"));
        let mut samples = Vec::new();
        for (n, v) in sums.iter().enumerate() {
            if *v == 0 {
                continue;
            }
            merged.total = merged.total.saturating_add(*v);
            let ids: Vec<u64> = head
                .stack_locations(n as u32)
                .into_iter()
                .map(|l| b.location(l))
                .collect();
            samples.push(ember_pprof::Sample {
                location_id: ids,
                value: vec![*v],
                label: Vec::new(),
            });
        }
        let (start, end) = (query.start_nanos, query.end_nanos);
        let mut p = b.finish();
        p.sample_type = vec![st];
        p.period_type = Some(pt);
        p.period = period;
        p.sample = samples;
        p.time_nanos = start;
        p.duration_nanos = end.saturating_sub(start).max(0);
        Some((p, merged))
    }

    /// Totals of matching profiles summed into `step_nanos` buckets (aligned to
    /// `query.start_nanos`), one series per distinct combination of the `group_by` labels.
    pub fn series_totals(
        &self,
        tenant: &str,
        query: &Query,
        step_nanos: i64,
        group_by: &[String],
    ) -> Vec<TimeSeries> {
        let Some(t) = self.tenant(tenant) else {
            return Vec::new();
        };
        let step = step_nanos.max(1);
        let head = t.read().unwrap_or_else(|e| e.into_inner());
        let mut groups: BTreeMap<Labels, BTreeMap<i64, i64>> = BTreeMap::new();
        for series in head.select(&query.full_selector()) {
            let key: Labels = group_by
                .iter()
                .map(|g| {
                    let v = series
                        .labels
                        .iter()
                        .find(|(n, _)| n == g)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default();
                    (g.clone(), v)
                })
                .collect();
            // This series' (sum, profile count) per bucket; an averaged series contributes
            // the mean of its profiles in each bucket, as its flame graph does over the range.
            let mut own: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
            for p in in_range(series, query) {
                let offset = p.time_nanos.saturating_sub(query.start_nanos);
                let bucket = query
                    .start_nanos
                    .saturating_add(offset.div_euclid(step) * step);
                let e = own.entry(bucket).or_insert((0, 0));
                e.0 = e.0.saturating_add(p.total());
                e.1 += 1;
            }
            let averaged = is_averaged(series);
            let points = groups.entry(key).or_default();
            for (bucket, (sum, count)) in own {
                let v = if averaged { average(sum, count) } else { sum };
                let e = points.entry(bucket).or_insert(0);
                *e = e.saturating_add(v);
            }
        }
        groups
            .into_iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(labels, points)| TimeSeries {
                labels,
                points: points.into_iter().collect(),
            })
            .collect()
    }

    /// Label sets of the series matching the query that have a profile in its time range
    /// (every series when `query` is `None`).
    pub fn series(&self, tenant: &str, query: Option<&Query>) -> Vec<Labels> {
        let Some(t) = self.tenant(tenant) else {
            return Vec::new();
        };
        let head = t.read().unwrap_or_else(|e| e.into_inner());
        let selector = query.map(Query::full_selector).unwrap_or_default();
        let mut out: Vec<Labels> = head
            .select(&selector)
            .into_iter()
            .filter(|s| query.is_none_or(|q| in_range(s, q).next().is_some()))
            .map(|s| s.labels.clone())
            .collect();
        out.sort();
        out
    }

    /// Distinct label names of the matching series, sorted.
    pub fn label_names(&self, tenant: &str, query: Option<&Query>) -> Vec<String> {
        let set: BTreeSet<String> = self
            .series(tenant, query)
            .into_iter()
            .flat_map(|l| l.into_iter().map(|(n, _)| n))
            .collect();
        set.into_iter().collect()
    }

    /// Distinct values of label `name` among the matching series, sorted.
    pub fn label_values(&self, tenant: &str, name: &str, query: Option<&Query>) -> Vec<String> {
        let set: BTreeSet<String> = self
            .series(tenant, query)
            .into_iter()
            .flat_map(|l| l.into_iter().filter(|(n, _)| n == name).map(|(_, v)| v))
            .collect();
        set.into_iter().collect()
    }

    /// Distinct profile type ids of the tenant, sorted.
    pub fn profile_types(&self, tenant: &str) -> Vec<String> {
        self.label_values(tenant, PROFILE_TYPE_LABEL, None)
    }
}

/// Decodes a logged profile (gzip'd or raw) and runs `f` on it; the error says why it could
/// not be decoded.
pub(crate) fn with_view<T>(
    bytes: &[u8],
    f: impl FnOnce(&ProfileView<'_>) -> T,
) -> Result<T, ember_pprof::PprofError> {
    let raw = ember_pprof::decompress(bytes, &DecodeLimits::default())?;
    let view = ProfileView::parse(&raw)?;
    Ok(f(&view))
}

/// Adds one logged record's profile to `head` (replay, flush): one series per sample type.
pub(crate) fn apply_record(
    head: &mut TenantHead,
    record: &IngestRecord,
    profile: &ProfileView<'_>,
) -> usize {
    let series = series_labels(&record_labels(record), profile);
    apply_to(head, record, profile, series)
}

/// Adds one record's profile to `head` under `label_sets` (one per sample type).
fn apply_to(
    head: &mut TenantHead,
    record: &IngestRecord,
    profile: &ProfileView<'_>,
    label_sets: Vec<Labels>,
) -> usize {
    let time = if record.time_nanos != 0 {
        record.time_nanos
    } else if profile.time_nanos != 0 {
        profile.time_nanos
    } else {
        record.received_nanos
    };
    let per_type = stacks_of(head, profile);
    let n = label_sets.len();
    for (labels, mut entries) in label_sets.into_iter().zip(per_type) {
        entries.retain(|(_, v)| *v != 0);
        entries.sort_unstable();
        head.insert_with_period(
            labels,
            StoredProfile {
                time_nanos: time,
                nodes: entries.iter().map(|e| e.0).collect(),
                values: entries.iter().map(|e| e.1).collect(),
            },
            profile.period,
        );
    }
    n
}

fn in_range<'a>(series: &'a Series, q: &Query) -> impl Iterator<Item = &'a StoredProfile> {
    let lo = series
        .profiles
        .partition_point(|p| p.time_nanos < q.start_nanos);
    let hi = series
        .profiles
        .partition_point(|p| p.time_nanos <= q.end_nanos);
    series.profiles[lo..hi.max(lo)].iter()
}

/// Interns the profile's mappings, functions and locations, then every sample's stack into
/// the head's stack tree, and sums values per leaf node: one `(node, value)` list per
/// sample type (unsorted, may hold zeros).
fn stacks_of(head: &mut TenantHead, profile: &ProfileView<'_>) -> Vec<Vec<(u32, i64)>> {
    let s = |i: i64| profile.string(i);
    // Interned ids by table position (the view resolves pprof ids to positions).
    let mappings: Vec<u32> = profile
        .mapping
        .iter()
        .map(|m| {
            let sym = head::MappingSym {
                start: m.memory_start,
                limit: m.memory_limit,
                offset: m.file_offset,
                filename: head.intern(&s(m.filename)),
                build_id: head.intern(&s(m.build_id)),
                flags: u8::from(m.has_functions)
                    | u8::from(m.has_filenames) << 1
                    | u8::from(m.has_line_numbers) << 2
                    | u8::from(m.has_inline_frames) << 3,
            };
            head.mapping(sym) + 1
        })
        .collect();
    let functions: Vec<u32> = profile
        .function
        .iter()
        .map(|f| {
            let sym = head::FunctionSym {
                name: head.intern(&s(f.name)),
                system_name: head.intern(&s(f.system_name)),
                filename: head.intern(&s(f.filename)),
                start_line: f.start_line,
            };
            head.function(sym)
        })
        .collect();
    let mut locations: Vec<u32> = Vec::with_capacity(profile.location.len());
    for loc in &profile.location {
        let lines: Box<[(u32, i64)]> = profile
            .location_lines(loc)
            .iter()
            .filter_map(|l| {
                let f = functions.get(profile.function_position(l.function_id)?)?;
                Some((*f, l.line))
            })
            .collect();
        let mapping = profile
            .mapping_position(loc.mapping_id)
            .and_then(|i| mappings.get(i))
            .copied()
            .unwrap_or(0);
        let sym = head::LocationSym {
            mapping,
            address: loc.address,
            lines,
            is_folded: loc.is_folded,
        };
        locations.push(head.location(sym));
    }
    let n_types = profile.sample_type.len();
    let mut sums: head::FastMap<u32, usize> = head::FastMap::default();
    let mut out: Vec<Vec<(u32, i64)>> = vec![Vec::new(); n_types];
    // Samples often repeat a stack (Go profiles split samples by labels, e.g. span ids):
    // walk each distinct stack down the tree once.
    let mut stack_nodes: head::FastMap<&[u64], u32> = head::FastMap::default();
    for sample in &profile.sample {
        let (ids, values) = profile.sample_data(sample);
        if values.iter().all(|v| *v == 0) {
            continue;
        }
        let node = *stack_nodes.entry(ids).or_insert_with(|| {
            let mut node = 0u32;
            for id in ids.iter().rev() {
                if let Some(&loc) = profile
                    .location_position(*id)
                    .and_then(|i| locations.get(i))
                {
                    node = head.child(node, loc);
                }
            }
            node
        });
        // Samples with the same stack (differing only in labels) add up.
        let slot = *sums.entry(node).or_insert_with(|| {
            for o in out.iter_mut() {
                o.push((node, 0));
            }
            out.first().map_or(0, |o| o.len() - 1)
        });
        for (i, v) in values.iter().enumerate().take(n_types) {
            if let Some(e) = out.get_mut(i).and_then(|o| o.get_mut(slot)) {
                e.1 = e.1.saturating_add(*v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_rounds_half_away_from_zero() {
        assert_eq!(average(30, 2), 15);
        assert_eq!(average(10, 4), 3); // 2.5
        assert_eq!(average(9, 4), 2); // 2.25
        assert_eq!(average(11, 4), 3); // 2.75
        assert_eq!(average(-10, 4), -3);
        assert_eq!(average(-9, 4), -2);
        assert_eq!(average(7, 1), 7);
        assert_eq!(average(7, 0), 7);
        assert_eq!(average(i64::MAX, 2), i64::MAX / 2 + 1);
    }
}
