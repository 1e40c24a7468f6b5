//! Ingest: [`Store::ingest`] takes a batch of pprof profiles with their series labels,
//! refuses it whole if any profile is invalid or any limit would be passed, logs every
//! profile durably, then applies them to the tenant's head.
//!
//! Owns the ingest limits ([`IngestLimits`], plus `max_series_per_tenant` and
//! `max_series_total` of [`crate::StoreOptions`]), their typed refusals ([`IngestError`]),
//! the decompressed bytes in flight (`inflight`), and the write-ahead
//! log record ([`IngestRecord`]). The durability contract: [`Store::ingest`] returns `Ok`
//! only after every profile of the batch is in the log and fsync'd (group commit with
//! concurrent ingests), and a profile is queryable only after that. Nothing is logged for a
//! refused batch.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use ember_pprof::{DecodeLimits, PprofError, ProfileView};
use ember_proto::types::LabelPair;
use tokio::sync::oneshot;

use crate::tenant::PendingRecord;
use crate::{Labels, Store, StoreError, apply, series_labels};

/// Limits every ingested profile is checked against; each refuses the whole batch.
#[derive(Debug, Clone)]
pub struct IngestLimits {
    /// Largest profile after decompression (a gzip bomb stops here).
    pub max_decompressed_bytes: u64,
    /// Most samples one profile may carry.
    pub max_samples_per_profile: usize,
    /// Most labels one series may carry (as sent, before the store adds its own).
    pub max_labels_per_series: usize,
    /// Longest label name, bytes.
    pub max_label_name_length: usize,
    /// Longest label value, bytes.
    pub max_label_value_length: usize,
    /// Most bytes all the profiles of one batch may decompress to together (raw ones count
    /// their size): without it a request of many small gzip bombs, each under
    /// `max_decompressed_bytes`, held gigabytes. Their decoded tables may take twice this
    /// (real profiles take about their decompressed size twice over; see
    /// `DECODED_PER_BATCH`). 0 = no limit.
    pub max_batch_decompressed_bytes: u64,
    /// Most decompressed profile bytes the running ingests of one tenant may hold at once
    /// (from decompression until the batch is applied); a batch beyond is refused as
    /// [`IngestError::Busy`]. 0 = no limit.
    pub max_tenant_decompressed_bytes_in_flight: u64,
    /// The same over all tenants. 0 = no limit.
    pub max_decompressed_bytes_in_flight: u64,
    /// Profiles timestamped further than this (nanoseconds) after the time they arrive are
    /// refused ([`IngestError::TooNew`]): a clock far ahead or a unit mix-up (`from=1e20`)
    /// would give a block an end time, up to `i64::MAX`, that retention never reaches.
    /// 0 = no limit.
    pub max_future_skew_nanos: i64,
    /// Refuse profiles older than the retention ([`crate::StoreOptions::retention_nanos`];
    /// [`IngestError::TooOld`]) instead of acknowledging them and deleting them at the next
    /// retention pass. Off by default in the store, whose callers (tests, benchmarks,
    /// imports) may write profiles of any age and read them back before retention runs;
    /// `ember server` turns it on.
    pub refuse_expired: bool,
}

impl Default for IngestLimits {
    /// 64 MiB decompressed, 1,000,000 samples, 30 labels of at most 1,024-byte names and
    /// 2,048-byte values, 128 MiB decompressed per batch, 256 MiB in flight per tenant and
    /// 512 MiB in all: the server's documented defaults.
    fn default() -> Self {
        IngestLimits {
            max_decompressed_bytes: 64 << 20,
            max_samples_per_profile: 1_000_000,
            max_labels_per_series: 30,
            max_label_name_length: 1024,
            max_label_value_length: 2048,
            max_batch_decompressed_bytes: 128 << 20,
            max_tenant_decompressed_bytes_in_flight: 256 << 20,
            max_decompressed_bytes_in_flight: 512 << 20,
            max_future_skew_nanos: 3_600 * 1_000_000_000,
            refuse_expired: false,
        }
    }
}

/// The profiles of one request, stored all or nothing by [`Store::ingest`].
#[derive(Debug, Clone, Default)]
pub struct IngestBatch {
    /// The profiles, in request order.
    pub profiles: Vec<IngestProfile>,
}

/// One profile of an [`IngestBatch`].
#[derive(Debug, Clone)]
pub struct IngestProfile {
    /// Series labels as the client sent them (`service_name`, `__name__`, ...); the store
    /// adds the per-sample-type labels ([`series_labels`]).
    pub labels: Labels,
    /// Timestamp override, unix ns; 0 = the profile's own `time_nanos`, else the time the
    /// store received it.
    pub time_nanos: i64,
    /// The pprof profile, gzip'd or raw, exactly as it goes into the log.
    pub pprof: Vec<u8>,
    /// How errors name this profile (`series[0].samples[1]`, `profile`).
    pub what: String,
}

/// What one [`Store::ingest`] stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestReceipt {
    /// Profiles logged and applied.
    pub profiles: usize,
    /// Series written to (one per profile and sample type).
    pub series: usize,
}

/// Why [`Store::ingest`] refused a batch. Everything but [`IngestError::Store`] is the
/// client's fault; the messages name the offending profile or label.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// A profile decompresses to more than `max_decompressed_bytes`.
    #[error("{what}: {source}")]
    TooLarge {
        /// The profile.
        what: String,
        /// The decoder's error (holds the limit).
        source: PprofError,
    },
    /// The profiles of the batch decompress to more than `max_batch_decompressed_bytes`
    /// together (or the batch alone is over an in-flight limit, so it could never fit).
    #[error("the batch's profiles decompress to more than {limit} bytes together")]
    BatchTooLarge {
        /// The limit.
        limit: u64,
    },
    /// Running ingests hold too many decompressed bytes (of this tenant, or of all tenants
    /// when `tenant` is `None`) to take this batch now; it may fit later.
    #[error("{}", busy_message(tenant.as_deref(), *limit))]
    Busy {
        /// The tenant whose limit was reached; `None` for the store-wide limit.
        tenant: Option<String>,
        /// That limit, in bytes.
        limit: u64,
    },
    /// A profile is not valid pprof.
    #[error("{what}: invalid pprof: {source}")]
    BadProfile {
        /// The profile.
        what: String,
        /// What is wrong with it.
        source: PprofError,
    },
    /// A profile has no sample types, so it would make no series.
    #[error("{what}: invalid pprof: profile has no sample types")]
    NoSampleTypes {
        /// The profile.
        what: String,
    },
    /// A profile has more samples than `max_samples_per_profile`.
    #[error("{what}: {samples} samples exceed the limit of {limit} per profile")]
    TooManySamples {
        /// The profile.
        what: String,
        /// Its sample count.
        samples: usize,
        /// The limit.
        limit: usize,
    },
    /// A series has more labels than `max_labels_per_series`.
    #[error("series has {count} labels; the limit is {limit}")]
    TooManyLabels {
        /// Labels sent.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A label name is empty or has characters other than ASCII letters, digits, `_`, `.`.
    #[error("invalid label name {name:?} (use letters, digits, '_' and '.')")]
    BadLabelName {
        /// The name.
        name: String,
    },
    /// A label name is longer than `max_label_name_length`.
    #[error("label name {prefix:?}... is longer than {limit} bytes")]
    LabelNameTooLong {
        /// Its first 40 characters.
        prefix: String,
        /// The limit.
        limit: usize,
    },
    /// A label value is longer than `max_label_value_length`.
    #[error("value of label {name:?} is longer than {limit} bytes")]
    LabelValueTooLong {
        /// The label's name.
        name: String,
        /// The limit.
        limit: usize,
    },
    /// A profile is older than the retention window (with `refuse_expired`): it would be
    /// deleted at the next retention pass.
    #[error(
        "{what}: timestamp {} is {} old, outside the retention window of {} (older profiles are not kept)",
        unix_text(*time_nanos), span_text(*age_nanos), span_text(*retention_nanos)
    )]
    TooOld {
        /// The profile.
        what: String,
        /// Its time, unix ns.
        time_nanos: i64,
        /// How long before its arrival that is.
        age_nanos: i64,
        /// The retention.
        retention_nanos: i64,
    },
    /// A profile's time is further in the future than `max_future_skew_nanos`.
    #[error(
        "{what}: timestamp {} is {} in the future; at most {} of clock skew is accepted \
         (max_future_skew_seconds)",
        unix_text(*time_nanos), span_text(*ahead_nanos), span_text(*max_skew_nanos)
    )]
    TooNew {
        /// The profile.
        what: String,
        /// Its time, unix ns.
        time_nanos: i64,
        /// How far after its arrival that is.
        ahead_nanos: i64,
        /// The limit.
        max_skew_nanos: i64,
    },
    /// Accepting the batch would give the tenant more series than `max_series_per_tenant`.
    #[error("series limit reached: tenant {tenant:?} may have at most {limit} series")]
    SeriesLimit {
        /// The tenant.
        tenant: String,
        /// Its limit.
        limit: usize,
    },
    /// Accepting the batch would make the store hold more series over all tenants than
    /// `max_series_total`.
    #[error("series limit reached: the server may hold at most {limit} series over all tenants")]
    TotalSeriesLimit {
        /// The limit.
        limit: usize,
    },
    /// The log could not take the batch (I/O error, or the store is closing).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One acknowledged ingest as written to the write-ahead log: tenant, series labels and the
/// pprof profile (gzip'd or raw) exactly as it will be applied to the head. Its encoding is
/// the on-disk format: field numbers never change, so old logs replay.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IngestRecord {
    /// Tenant id.
    #[prost(string, tag = "1")]
    pub tenant: String,
    /// Series labels shared by every sample type of the profile (`__name__`, `service_name`, ...),
    /// `types.v1.LabelPair` on the wire.
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

fn busy_message(tenant: Option<&str>, limit: u64) -> String {
    match tenant {
        Some(t) => format!(
            "tenant {t:?} has {limit} bytes of decompressed profiles in flight at most; retry shortly"
        ),
        None => format!(
            "the server has {limit} bytes of decompressed profiles in flight at most; retry shortly"
        ),
    }
}

impl IngestRecord {
    /// The record's labels as the store's label list.
    pub(crate) fn label_list(&self) -> Labels {
        self.labels
            .iter()
            .map(|l| (l.name.clone(), l.value.clone()))
            .collect()
    }
}

/// Now as unix nanoseconds (0 if the clock is before 1970): the receive time the store
/// stamps, and the clock every front end reads, so all agree on what "now" is.
pub fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Validates `batch`, logs every profile durably, then makes them queryable for
    /// `tenant`. All or nothing: the first invalid profile, bad label or passed limit
    /// refuses the batch before anything is logged.
    ///
    /// Blocks: it decompresses and parses every profile (CPU-bound) and waits for the
    /// log's fsync. Async callers use [`Store::ingest_async`], which waits for the fsync
    /// without holding a thread. Concurrent calls share group commits.
    pub fn ingest(&self, tenant: &str, batch: IngestBatch) -> Result<IngestReceipt, IngestError> {
        let raws = self.decompress_all(&batch)?;
        let _held = self.hold_raws(tenant, &raws)?;
        let checked = self.check_all(tenant, &batch, &raws)?;
        let received = now_nanos();
        let mut logged = Vec::with_capacity(batch.profiles.len());
        for ack in self.log_all(tenant, &batch, received) {
            // The writer answers every append; a missing answer means it is gone.
            logged.push(ack.blocking_recv().unwrap_or(Err(StoreError::Closed))?);
        }
        Ok(self.apply_all(tenant, &batch, checked, logged, received))
    }

    /// [`Store::ingest`] for async callers: the same steps, but the wait for the log's fsync
    /// is an `.await`, so a server with many requests in flight (each waiting for a group
    /// commit) does not hold one blocking thread per request. Decoding runs on the calling
    /// task: it is bounded by the server's body and decompression limits.
    pub async fn ingest_async(
        &self,
        tenant: &str,
        batch: IngestBatch,
    ) -> Result<IngestReceipt, IngestError> {
        let raws = self.decompress_all(&batch)?;
        let _held = self.hold_raws(tenant, &raws)?;
        let checked = self.check_all(tenant, &batch, &raws)?;
        let received = now_nanos();
        let mut logged = Vec::with_capacity(batch.profiles.len());
        for ack in self.log_all(tenant, &batch, received) {
            logged.push(ack.await.unwrap_or(Err(StoreError::Closed))?);
        }
        Ok(self.apply_all(tenant, &batch, checked, logged, received))
    }

    /// Decompresses every profile of the batch under the per-profile cap and what is left
    /// of the batch's (`max_batch_decompressed_bytes`): decompression stops as soon as the
    /// batch's total passes its limit, so a batch of many bombs costs at most that much.
    fn decompress_all<'b>(
        &self,
        batch: &'b IngestBatch,
    ) -> Result<Vec<Cow<'b, [u8]>>, IngestError> {
        let limits = &self.options.ingest;
        let per_batch = match limits.max_batch_decompressed_bytes {
            0 => u64::MAX,
            n => n,
        };
        let mut total = 0u64;
        let mut raws = Vec::with_capacity(batch.profiles.len());
        for p in &batch.profiles {
            let left = per_batch - total;
            let decode = DecodeLimits {
                max_decompressed_bytes: limits.max_decompressed_bytes.min(left),
            };
            let raw = ember_pprof::decompress(&p.pprof, &decode).map_err(|e| match e {
                PprofError::TooLarge { .. } if left < limits.max_decompressed_bytes => {
                    IngestError::BatchTooLarge { limit: per_batch }
                }
                e => decode_error(&p.what, e),
            })?;
            total += raw.len() as u64;
            raws.push(raw);
        }
        Ok(raws)
    }

    /// Takes the batch's decompressed bytes from the in-flight budget of `tenant` and of
    /// the store until the returned guard drops (after the apply).
    fn hold_raws<'a>(
        &'a self,
        tenant: &'a str,
        raws: &[Cow<'_, [u8]>],
    ) -> Result<crate::inflight::Held<'a>, IngestError> {
        let bytes = raws.iter().map(|r| r.len() as u64).sum();
        self.inflight.hold(tenant, bytes, &self.options.ingest)
    }

    /// Parses each decompressed profile (the views borrow `raws`, so they are decoded once
    /// and kept until the head has interned them), checks shapes, labels and the tenant's
    /// series limit, and returns each profile's view with its series label sets.
    fn check_all<'r>(
        &self,
        tenant: &str,
        batch: &IngestBatch,
        raws: &'r [Cow<'_, [u8]>],
    ) -> Result<Vec<(ProfileView<'r>, Vec<Labels>)>, IngestError> {
        let limits = &self.options.ingest;
        let now = now_nanos();
        let mut checked = Vec::with_capacity(raws.len());
        // The decoded tables of the whole batch are bounded too (see `DECODED_PER_BATCH`).
        let mut decoded_left = match limits.max_batch_decompressed_bytes {
            0 => u64::MAX,
            n => n
                .saturating_mul(DECODED_PER_BATCH)
                .saturating_add(DECODED_SLACK),
        };
        for (p, raw) in batch.profiles.iter().zip(raws) {
            let view =
                apply::spare::parse(raw, decoded_left).map_err(|e| decode_error(&p.what, e))?;
            decoded_left = decoded_left.saturating_sub(view.decoded_bytes());
            check_shape(limits, &p.what, view.sample_type.len(), view.sample.len())?;
            let time = apply::profile_time(p.time_nanos, view.time_nanos, now);
            self.check_time(&p.what, time, now)?;
            checked.push(view);
        }
        let mut series = Vec::with_capacity(checked.len());
        for (p, view) in batch.profiles.iter().zip(&checked) {
            check_labels(limits, &p.labels)?;
            series.push(series_labels(&p.labels, view));
        }
        self.check_series_limit(tenant, series.iter().flatten())?;
        Ok(checked.into_iter().zip(series).collect())
    }

    /// Adds the checked profiles to the tenant's heads, under one write lock, with the same
    /// receive time as their log records (so a replay rebuilds the same head). Each goes to
    /// the head of the log segment it was written to (see [`crate::tenant`]); `logged` are
    /// those segments, and dropping them after the apply tells a waiting flush.
    fn apply_all(
        &self,
        tenant: &str,
        batch: &IngestBatch,
        checked: Vec<(ProfileView<'_>, Vec<Labels>)>,
        logged: Vec<PendingRecord>,
        received: i64,
    ) -> IngestReceipt {
        let t = self.tenant_or_create(tenant);
        let mut t = t.write().unwrap_or_else(|e| e.into_inner());
        let mut receipt = IngestReceipt::default();
        for ((p, (view, labels)), record) in batch.profiles.iter().zip(checked).zip(&logged) {
            receipt.profiles += 1;
            for l in &labels {
                if t.note_series(l) {
                    self.series_added(1);
                }
            }
            // A record after a cut whose flush has not frozen this tenant yet: freeze it now,
            // or the record would join the head of the cut (and be stored twice).
            let cut = *self.cutting.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(cut) = cut.filter(|c| record.segment > *c) {
                t.freeze_at(cut);
            }
            if let Some(head) = t.head_for(record.segment) {
                receipt.series += apply::apply_to(head, p.time_nanos, received, &view, labels);
            }
            apply::spare::give_back(view);
        }
        drop(t);
        drop(logged);
        receipt
    }

    /// Appends one record per profile to the log; each answer arrives on its receiver once
    /// the record is durable (or the log failed).
    fn log_all(
        &self,
        tenant: &str,
        batch: &IngestBatch,
        received: i64,
    ) -> Vec<oneshot::Receiver<Result<PendingRecord, StoreError>>> {
        let mut acks = Vec::with_capacity(batch.profiles.len());
        for p in &batch.profiles {
            let (tx, rx) = oneshot::channel();
            let pending = self.pending.clone();
            self.wal.append_record(
                encode_record(tenant, p, received),
                Box::new(move |res| {
                    // Counted before the log reports the segment closed, so a flush that
                    // cut there waits for this record's apply (or its abandonment).
                    let _ = tx.send(res.map(|segment| pending.enter(segment)));
                }),
            );
            acks.push(rx);
        }
        acks
    }

    /// Refuses a profile at `time` that arrives at `now` if it is older than the retention
    /// (with `refuse_expired`) or further ahead than `max_future_skew_nanos`.
    fn check_time(&self, what: &str, time: i64, now: i64) -> Result<(), IngestError> {
        let limits = &self.options.ingest;
        let retention = self.options.retention_nanos;
        let age = now.saturating_sub(time);
        if limits.refuse_expired && retention > 0 && age > retention {
            return Err(IngestError::TooOld {
                what: what.into(),
                time_nanos: time,
                age_nanos: age,
                retention_nanos: retention,
            });
        }
        let skew = limits.max_future_skew_nanos;
        let ahead = time.saturating_sub(now);
        if skew > 0 && ahead > skew {
            return Err(IngestError::TooNew {
                what: what.into(),
                time_nanos: time,
                ahead_nanos: ahead,
                max_skew_nanos: skew,
            });
        }
        Ok(())
    }

    /// Refuses the ingest if it would push the tenant past its series limit; `series` are
    /// the label sets ([`series_labels`]) of every profile of the ingest.
    fn check_series_limit<'l>(
        &self,
        tenant: &str,
        series: impl IntoIterator<Item = &'l Labels>,
    ) -> Result<(), IngestError> {
        let limit = self.options.max_series_per_tenant;
        let series: Vec<&Labels> = series.into_iter().collect();
        let refuse = || IngestError::SeriesLimit {
            tenant: tenant.into(),
            limit,
        };
        let new = match self.tenant(tenant) {
            None => series
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len(),
            Some(t) => {
                let t = t.read().unwrap_or_else(|e| e.into_inner());
                let new = series.iter().filter(|l| !t.has_series(l)).count();
                if new > 0 && t.series_count() + new > limit {
                    return Err(refuse());
                }
                new
            }
        };
        if new > limit {
            return Err(refuse());
        }
        // The store-wide cap: without it every new tenant brought its own allowance.
        let total_limit = self.options.max_series_total;
        if new > 0 && total_limit != 0 && self.series_total() + new > total_limit {
            return Err(IngestError::TotalSeriesLimit { limit: total_limit });
        }
        Ok(())
    }
}

/// The log record of `p` ([`IngestRecord`]'s encoding) in a buffer for
/// [`crate::Wal::append_record`] (the frame's header reserved in front), written without
/// first copying the profile's bytes into a record: they go once, straight into the
/// record's buffer, which the log frames in place. Fields come in tag order but the
/// profile's (4) last, which protobuf decoders accept as the same.
fn encode_record(tenant: &str, p: &IngestProfile, received: i64) -> Vec<u8> {
    let record = IngestRecord {
        tenant: tenant.to_string(),
        labels: p
            .labels
            .iter()
            .map(|(name, value)| LabelPair {
                name: name.clone(),
                value: value.clone(),
            })
            .collect(),
        time_nanos: p.time_nanos,
        profile: Vec::new(),
        received_nanos: received,
    };
    let mut buf =
        crate::wal::record_buffer(prost::Message::encoded_len(&record) + p.pprof.len() + 16);
    // A Vec grows as needed: encoding into it cannot fail.
    let _ = prost::Message::encode(&record, &mut buf);
    if !p.pprof.is_empty() {
        prost::encoding::bytes::encode(4, &p.pprof, &mut buf);
    }
    buf
}

/// How many times `max_batch_decompressed_bytes` a batch's profiles may take decoded (their
/// tables: samples, locations, lines, string slices). Real profiles take about twice their
/// decompressed size (a 165 KB Go CPU profile: ~300 KB); a profile of tiny messages (empty
/// strings or samples, 2 bytes each on the wire and 16 to 48 decoded) takes up to 24 times,
/// which without this bound let a 120 KB request of two such 60 MiB profiles take 1.2 GB.
const DECODED_PER_BATCH: u64 = 2;

/// Decoded bytes a batch may take beyond `DECODED_PER_BATCH` times its limit: small
/// profiles' tables are mostly fixed costs and growth slack, not proportional to their size.
const DECODED_SLACK: u64 = 16 << 20;
/// A unix time in ns as text for an error: whole seconds (`1700000000 (unix s)`).
fn unix_text(nanos: i64) -> String {
    format!("{} (unix seconds)", nanos.div_euclid(1_000_000_000))
}

/// A span of time in ns as text for an error: seconds up to two minutes, then minutes,
/// hours up to two days, then days.
fn span_text(nanos: i64) -> String {
    let s = nanos / 1_000_000_000;
    if s <= 120 {
        format!("{s} s")
    } else if s <= 7_200 {
        format!("{} min", s / 60)
    } else if s <= 172_800 {
        format!("{} h", s / 3_600)
    } else {
        format!("{} days", s / 86_400)
    }
}

/// The refusal for a profile that failed to decompress or parse.
fn decode_error(what: &str, source: PprofError) -> IngestError {
    let what = what.to_string();
    match source {
        PprofError::TooLarge { .. } | PprofError::DecodedTooLarge { .. } => {
            IngestError::TooLarge { what, source }
        }
        source => IngestError::BadProfile { what, source },
    }
}

/// Refuses decoded profiles the store cannot use: no sample types, too many samples.
fn check_shape(
    limits: &IngestLimits,
    what: &str,
    sample_types: usize,
    samples: usize,
) -> Result<(), IngestError> {
    if sample_types == 0 {
        return Err(IngestError::NoSampleTypes { what: what.into() });
    }
    if samples > limits.max_samples_per_profile {
        return Err(IngestError::TooManySamples {
            what: what.into(),
            samples,
            limit: limits.max_samples_per_profile,
        });
    }
    Ok(())
}

/// Refuses label sets with too many labels, invalid names, or names/values too long.
fn check_labels(limits: &IngestLimits, labels: &Labels) -> Result<(), IngestError> {
    if labels.len() > limits.max_labels_per_series {
        return Err(IngestError::TooManyLabels {
            count: labels.len(),
            limit: limits.max_labels_per_series,
        });
    }
    for (n, v) in labels {
        let valid_name = !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if !valid_name {
            return Err(IngestError::BadLabelName { name: n.clone() });
        }
        if n.len() > limits.max_label_name_length {
            return Err(IngestError::LabelNameTooLong {
                prefix: n.chars().take(40).collect(),
                limit: limits.max_label_name_length,
            });
        }
        if v.len() > limits.max_label_value_length {
            return Err(IngestError::LabelValueTooLong {
                name: n.clone(),
                limit: limits.max_label_value_length,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_encoded_in_place_decodes_like_the_record() {
        for pprof in [vec![0x1f, 0x8b, 8, 0, 1, 2, 3], Vec::new()] {
            let p = IngestProfile {
                labels: vec![("service_name".into(), "api".into())],
                time_nanos: 7,
                pprof: pprof.clone(),
                what: "profile".into(),
            };
            let want = IngestRecord {
                tenant: "t".into(),
                labels: vec![LabelPair {
                    name: "service_name".into(),
                    value: "api".into(),
                }],
                time_nanos: 7,
                profile: pprof,
                received_nanos: 9,
            };
            let bytes = encode_record("t", &p, 9);
            let bytes = &bytes[crate::wal::format::HEADER..];
            assert_eq!(bytes.len(), prost::Message::encoded_len(&want));
            let got: IngestRecord = prost::Message::decode(bytes).unwrap();
            assert_eq!(got, want);
        }
    }
}
