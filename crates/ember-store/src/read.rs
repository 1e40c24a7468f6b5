//! Reads of the head: [`Query`] (selector, profile type, time range) and the operations the
//! query layer builds on: merged stacks by frame name ([`Store::merge_stacks`]), a merged
//! pprof with full symbols ([`Store::merge_profile`]), totals over time
//! ([`Store::series_totals`]), and the label/series listings.
//!
//! Owns summing versus averaging: a series marked [`AGGREGATION_LABEL`]`=`[`AVERAGE`]
//! contributes the mean of its profiles in range, every other series their sum. Never
//! writes to the head.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ember_pprof::Profile;

use crate::block::Section;
use crate::head::FastMap;
use crate::{
    AGGREGATION_LABEL, AVERAGE, Labels, Matcher, PROFILE_TYPE_LABEL, Selector, Series, Store,
    TYPE_LABEL, TenantHead, pprof_out,
};

mod chunks;
mod heavy;
mod packed;
mod profiles;
mod samples;
mod sums;

pub use profiles::{MAX_PROFILE_LIST, ProfileList, ProfileRef};
use sums::{in_range, sum_nodes};

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

/// Merged stacks of a selection, as a call tree by frame name.
///
/// Only frames that carry a value or lead to one are kept, renumbered densely; frame 0 is the
/// root (name ""), and every frame's parent comes before it, so one pass in index order
/// visits parents first and one pass in reverse folds values up. Stacks as strings are built
/// only on request ([`Merged::stacks`]): for a day of hundreds of thousands of distinct
/// stacks, one `String` per frame of every stack is what made wide queries slow.
#[derive(Debug, Clone)]
pub struct Merged {
    /// `(parent, name)` of each frame; `frames[0]` is the root, its own parent.
    pub frames: Vec<(u32, u32)>,
    /// Value of the samples whose stack ends at each frame (parallel to `frames`).
    pub self_values: Vec<i64>,
    /// Frame names by id; `names[0]` is "".
    pub names: Vec<String>,
    /// Sum of all values.
    pub total: i64,
    /// Profiles merged.
    pub profiles: usize,
    /// Series that contributed.
    pub series: usize,
    /// Profile type ids of the contributing series.
    pub profile_types: BTreeSet<String>,
    /// Per frame, the total of its descendants that this merge left out; empty when nothing
    /// was left out. Only [`Store::merge_stacks_heavy`] leaves frames out (those too light
    /// for its node limit): a call tree adds each frame's `rest` to its total and to its
    /// `other` child, and [`Merged::stacks`] lists only the frames held.
    pub rest: Vec<i64>,
}

impl Default for Merged {
    fn default() -> Self {
        Merged {
            frames: vec![(0, 0)],
            self_values: vec![0],
            names: vec![String::new()],
            total: 0,
            profiles: 0,
            series: 0,
            profile_types: BTreeSet::new(),
            rest: Vec::new(),
        }
    }
}

impl Merged {
    /// Whether no stack has a non-zero value.
    pub fn is_empty(&self) -> bool {
        self.self_values.iter().chain(&self.rest).all(|v| *v == 0)
    }

    /// `(frames root→leaf, value)`, one entry per distinct stack with a non-zero value,
    /// sorted. Costs a string per frame of every stack: for exports (folded text, diffs),
    /// not for flame graphs.
    pub fn stacks(&self) -> Vec<(Vec<String>, i64)> {
        let mut out: Vec<(Vec<String>, i64)> = self
            .self_values
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(f, v)| (self.path(f as u32), *v))
            .collect();
        out.sort();
        out
    }

    /// [`Merged::stacks`] with each stack's frames joined by `;` (folded text's stacks).
    pub fn folded(&self) -> Vec<(String, i64)> {
        self.stacks()
            .into_iter()
            .map(|(f, v)| (f.join(";"), v))
            .collect()
    }

    /// Frame names from the root's child down to `frame`.
    pub fn path(&self, mut frame: u32) -> Vec<String> {
        let mut out = Vec::new();
        while frame != 0 {
            let Some(&(parent, name)) = self.frames.get(frame as usize) else {
                break;
            };
            out.push(self.names.get(name as usize).cloned().unwrap_or_default());
            frame = parent;
        }
        out.reverse();
        out
    }
}

/// Adds up merges of the same query over different tiers as they come (one part held at a
/// time): frames with the same name under the same parent add up. The larger of the first two
/// parts keeps its frame ids; other parts' new frames are appended after their parents, so
/// parents still come first. The lookup maps are built only once a second part arrives (a
/// query answered by one tier pays nothing here), sized for both at once.
#[derive(Default)]
struct Combiner {
    base: Option<Merged>,
    // Fx hashing: the keys are this query's own frame ids and names, and these maps take a
    // lookup per frame of every tier after the first.
    name_ids: FastMap<String, u32>,
    /// Base frame id by `(parent << 32) | name`.
    frame_ids: FastMap<u64, u32>,
    parts: usize,
}

fn frame_key(parent: u32, name: u32) -> u64 {
    u64::from(parent) << 32 | u64::from(name)
}

impl Combiner {
    fn add(&mut self, mut part: Merged) {
        self.parts += 1;
        let Some(base) = &mut self.base else {
            self.base = Some(part);
            return;
        };
        if self.parts == 2 {
            // The larger part is the base: fewer frames to look up and append.
            if part.frames.len() > base.frames.len() {
                std::mem::swap(base, &mut part);
            }
            self.name_ids = base
                .names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i as u32))
                .collect();
            self.frame_ids = FastMap::with_capacity_and_hasher(
                base.frames.len() + part.frames.len(),
                Default::default(),
            );
            self.frame_ids.extend(
                base.frames
                    .iter()
                    .enumerate()
                    .skip(1)
                    .map(|(i, f)| (frame_key(f.0, f.1), i as u32)),
            );
        } else {
            self.frame_ids.reserve(part.frames.len());
        }
        base.frames.reserve(part.frames.len());
        base.self_values.reserve(part.frames.len());
        let mut names = Vec::with_capacity(part.names.len());
        for n in part.names {
            let id = match self.name_ids.get(&n) {
                Some(&id) => id,
                None => {
                    let id = base.names.len() as u32;
                    base.names.push(n.clone());
                    self.name_ids.insert(n, id);
                    id
                }
            };
            names.push(id);
        }
        let mut ids = vec![0u32; part.frames.len()];
        for (i, &(parent, name)) in part.frames.iter().enumerate().skip(1) {
            let key = (ids[parent as usize], names[name as usize]);
            let next = base.frames.len() as u32;
            let id = *self
                .frame_ids
                .entry(frame_key(key.0, key.1))
                .or_insert(next);
            if id == next {
                base.frames.push(key);
                base.self_values.push(0);
            }
            ids[i] = id;
            let v = &mut base.self_values[id as usize];
            *v = v.saturating_add(part.self_values[i]);
        }
        base.self_values[0] = base.self_values[0].saturating_add(part.self_values[0]);
        base.total = base.total.saturating_add(part.total);
        base.profiles += part.profiles;
        base.series += part.series;
        base.profile_types.extend(part.profile_types);
    }

    fn finish(self) -> Merged {
        self.base.unwrap_or_default()
    }
}

/// A time series of totals.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    /// The group-by label values (`(name, value)`).
    pub labels: Labels,
    /// `(bucket start unix ns, summed value)`, sorted, only non-empty buckets.
    pub points: Vec<(i64, i64)>,
}

/// Threads decoding a wide read's rollups ahead of the merge (the machine this was measured
/// on has two cores; the merge of a decoded rollup is far cheaper than its decoding).
const ROLLUP_DECODERS: usize = 2;

/// Decoded rollups, in order, from one decoder thread.
type DecodedRollups =
    std::sync::mpsc::Receiver<Result<Option<Arc<crate::rollup::Rollup>>, crate::StoreError>>;

/// A series a rollup answers for: its position in the section's index, its labels and its
/// profile count.
type RolledSeries<'a> = (usize, &'a Labels, usize);

/// What a block section gives a flame graph without being decoded whole.
pub(crate) enum BlockPart<'a> {
    /// Its rollup, for the selected series (all their profiles are in range).
    Rollup(
        &'a Arc<Section>,
        &'a Arc<crate::rollup::Rollup>,
        &'a [RolledSeries<'a>],
    ),
    /// Its time chunks holding the range, summed ([`crate::chunks`]).
    Chunks(Merged),
}

/// How a picked section is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadBy {
    /// Decoded whole (through the cache).
    Head,
    /// From its rollup.
    Rollup,
    /// From the time chunks of the range.
    Chunks,
}

/// Whether a series with these labels is averaged over time rather than summed.
pub(crate) fn averaged_labels(labels: &[(String, String)]) -> bool {
    labels
        .iter()
        .any(|(n, v)| n == AGGREGATION_LABEL && v == AVERAGE)
}

/// Whether the series' profiles are averaged over time rather than summed.
fn is_averaged(series: &Series) -> bool {
    averaged_labels(&series.labels)
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

/// Takes a series' (or a sample-label group's) `(time, total)` points.
type AddPoints<'a> = dyn FnMut(&Labels, &mut dyn Iterator<Item = (i64, i64)>) + 'a;

/// Feeds `add` the `(time, total)` points of every series of `head` that `selector` picks,
/// keyed by the series labels plus, when `group_by` names sample labels, their values.
fn head_totals(
    head: &TenantHead,
    selector: &Selector,
    query: &Query,
    group_by: &[String],
    add: &mut AddPoints<'_>,
) {
    let mut filter = samples::SampleFilter::new(head, selector);
    for series in head.select(selector) {
        let pass = filter.for_series(series);
        match samples::SampleGroups::new(head, series, group_by) {
            None => {
                let mut points = in_range(series, query).map(|p| {
                    let total = match pass {
                        None => p.total(),
                        Some(_) => {
                            samples::entries(p, pass).fold(0i64, |a, (_, v)| a.saturating_add(v))
                        }
                    };
                    (p.time_nanos, total)
                });
                add(&series.labels, &mut points);
            }
            Some(mut groups) => {
                for p in in_range(series, query) {
                    for (group, total) in groups.totals(p, pass) {
                        let mut labels = series.labels.clone();
                        labels.extend(group);
                        add(&labels, &mut std::iter::once((p.time_nanos, total)));
                    }
                }
            }
        }
    }
}

impl Store {
    /// `query` without what retention has expired: a kept block may still hold older
    /// profiles next to fresh ones, and they must not be served.
    fn within_retention(&self, query: &Query) -> Query {
        let floor = self
            .retention_floor
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut q = query.clone();
        q.start_nanos = q.start_nanos.max(floor);
        q
    }

    /// Runs `f` on every head of `tenant` that may hold profiles of `query`: the open and
    /// frozen heads under the tenant's read lock, then each block section whose index has a
    /// matching series in the time range, decoded through the cache after the lock is
    /// released (ingest is not held up by a decode). A section that cannot be read is logged
    /// and skipped.
    fn for_each_head(&self, tenant: &str, query: &Query, f: impl FnMut(&TenantHead)) {
        self.for_each_tier(tenant, query, |_| {}, f, None::<fn(BlockPart<'_>)>);
    }

    /// [`Store::for_each_head`], and with `from_block` (flame graphs) a block section whose
    /// selected series have no averaged series and no sample-label filter among them is
    /// answered without decoding it whole: from its rollup ([`crate::rollup`]) when their
    /// profiles all lie in the query's range (with the selected series' index positions,
    /// labels and profile counts), else from the time chunks holding the range
    /// ([`crate::chunks`]) when its block has them. Every other tier goes to `from_head`.
    /// `tiers` first learns how many tiers at most will be visited.
    ///
    /// Rollups are read and decoded on two threads ([`Store::decode_rollups`]), each one
    /// ahead of the one being merged, so decoding (zstd and varints) overlaps the merge.
    fn for_each_tier(
        &self,
        tenant: &str,
        query: &Query,
        tiers: impl FnOnce(usize),
        mut from_head: impl FnMut(&TenantHead),
        mut from_block: Option<impl FnMut(BlockPart<'_>)>,
    ) {
        let Some(t) = self.tenant(tenant) else {
            return;
        };
        let sel = query.full_selector();
        let (start, end) = (query.start_nanos, query.end_nanos);
        // Per section to read: the selected series in range, and whether the rollup serves.
        type Picked = (Arc<Section>, Vec<usize>, ReadBy);
        std::thread::scope(|scope| {
            let (picked, rollups) = {
                let t = t.read().unwrap_or_else(|e| e.into_inner());
                let picked: Vec<Picked> = t
                    .sections
                    .iter()
                    .filter(|s| s.min_time <= end && s.max_time >= start)
                    .filter_map(|s| {
                        let has = |n: &str| s.has_sample_label(n);
                        let selected: Vec<usize> = (0..s.series.len())
                            .filter(|i| {
                                let x = &s.series[*i];
                                !x.in_range(start, end).is_empty()
                                    && sel.matches_series(&x.labels, has)
                            })
                            .collect();
                        if selected.is_empty() {
                            return None;
                        }
                        let plain = from_block.is_some()
                            && selected.iter().all(|i| {
                                let x = &s.series[*i];
                                sel.sample_matchers(&x.labels, has).is_empty()
                                    && !averaged_labels(&x.labels)
                            });
                        let whole = selected.iter().all(|i| {
                            let x = &s.series[*i];
                            x.in_range(start, end).len() == x.times.len()
                        });
                        let chunked = selected.iter().all(|i| {
                            let range = s.series[*i].in_range(start, end);
                            s.runs_of(*i, range).is_some()
                        });
                        let by = match (plain, whole) {
                            (true, true) if s.rollup.is_some() => ReadBy::Rollup,
                            (true, _) if chunked => ReadBy::Chunks,
                            _ => ReadBy::Head,
                        };
                        Some((s.clone(), selected, by))
                    })
                    .collect();
                let rolled: Vec<Arc<Section>> = picked
                    .iter()
                    .filter(|p| p.2 == ReadBy::Rollup)
                    .map(|p| p.0.clone())
                    .collect();
                let rx = self.decode_rollups(scope, rolled);
                tiers(1 + t.frozen.len() + picked.len());
                from_head(&t.head);
                for (_, h) in &t.frozen {
                    from_head(h);
                }
                (picked, rx)
            };
            let mut next_rollup = 0usize;
            for (s, selected, by) in picked {
                if by == ReadBy::Chunks
                    && let Some(f) = from_block.as_mut()
                {
                    match self.merge_chunks(&s, &selected, start, end) {
                        Ok(m) => {
                            f(BlockPart::Chunks(m));
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "unreadable time chunk; reading the section")
                        }
                    }
                }
                if by == ReadBy::Rollup {
                    // Rollups come in `picked`'s order, from the decoders in turn.
                    let received = rollups[next_rollup % rollups.len()].recv();
                    next_rollup += 1;
                    match received {
                        Ok(Ok(Some(r))) if selected.iter().all(|i| r.has(*i)) => {
                            let series: Vec<RolledSeries<'_>> = selected
                                .iter()
                                .map(|i| (*i, &s.series[*i].labels, s.series[*i].times.len()))
                                .collect();
                            if let Some(f) = from_block.as_mut() {
                                f(BlockPart::Rollup(&s, &r, &series));
                            }
                            continue;
                        }
                        Ok(Ok(_)) | Err(_) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "unreadable rollup; reading the section")
                        }
                    }
                }
                match self.cache.get(&self.objects, &s) {
                    Ok(head) => from_head(&head),
                    Err(e) => tracing::error!(error = %e, "skipping an unreadable block section"),
                }
            }
        });
    }

    /// Reads and decodes the rollups of `sections` on [`ROLLUP_DECODERS`] threads of `scope`,
    /// section `i` on thread `i % n`: receiving from the returned channels in turn gives
    /// them in order. Each thread holds at most one decoded rollup waiting and decodes the
    /// next, so memory stays a few rollups whatever the range. Decoding (zstd and varints)
    /// is most of a cold wide read, and one thread left the second core idle.
    fn decode_rollups<'scope, 'env>(
        &'env self,
        scope: &'scope std::thread::Scope<'scope, 'env>,
        sections: Vec<Arc<Section>>,
    ) -> Vec<DecodedRollups> {
        let n = ROLLUP_DECODERS.min(sections.len()).max(1);
        let mut shares: Vec<Vec<Arc<Section>>> = vec![Vec::new(); n];
        for (i, s) in sections.into_iter().enumerate() {
            shares[i % n].push(s);
        }
        shares
            .into_iter()
            .map(|share| {
                let (tx, rx) = std::sync::mpsc::sync_channel(1);
                if !share.is_empty() {
                    scope.spawn(move || {
                        for s in share {
                            if tx.send(self.cache.rollup(&self.objects, &s)).is_err() {
                                break;
                            }
                        }
                    });
                }
                rx
            })
            .collect()
    }

    /// Profile counts in range of the averaged series the query selects, over every tier
    /// (empty, and free, when it selects none).
    fn averaged_counts(&self, tenant: &str, query: &Query) -> HashMap<Labels, i64> {
        let selector = query.full_selector();
        let any = self
            .series(tenant, Some(query))
            .iter()
            .any(|l| averaged_labels(l));
        let mut counts: HashMap<Labels, i64> = HashMap::new();
        if any {
            self.for_each_head(tenant, query, |head| {
                for s in head
                    .select(&selector)
                    .into_iter()
                    .filter(|s| is_averaged(s))
                {
                    *counts.entry(s.labels.clone()).or_default() +=
                        in_range(s, query).count() as i64;
                }
            });
        }
        counts
    }

    /// Merges every matching profile in the time range into one call tree by frame names
    /// (stacks that differ only in addresses or mappings add up).
    pub fn merge_stacks(&self, tenant: &str, query: &Query) -> Merged {
        let query = &self.within_retention(query);
        let mut parts = Combiner::default();
        self.for_each_part(tenant, query, |_| {}, |part| parts.add(part.into_merged()));
        let tiers = parts.parts;
        let mut merged = parts.finish();
        if tiers > 1 {
            // A series split by a flush contributed from two tiers; count it once.
            merged.series = self.series(tenant, Some(query)).len();
        }
        merged
    }

    /// Merges every matching profile in the time range into one pprof profile with full
    /// symbols: mappings (with build ids), functions (name, system name, file, start line)
    /// and locations (address, mapping, inlined lines). Identical stacks of locations add
    /// up, across tiers too. `None` when nothing matched. The sample type, unit and period
    /// type come from the contributing series' labels (the first profile type when several
    /// matched).
    pub fn merge_profile(&self, tenant: &str, query: &Query) -> Option<(Profile, Merged)> {
        let query = &self.within_retention(query);
        let averaged = self.averaged_counts(tenant, query);
        let selector = query.full_selector();
        let mut merged = Merged::default();
        let mut b = pprof_out::Builder::new();
        let mut first: Option<(Labels, i64)> = None;
        let mut samples: Vec<ember_pprof::Sample> = Vec::new();
        let mut heads = 0usize;
        self.for_each_head(tenant, query, |head| {
            let profiles_before = merged.profiles;
            let sums = sum_nodes(head, query, &averaged, &mut merged);
            if merged.profiles == profiles_before {
                return;
            }
            heads += 1;
            if first.is_none() {
                first = head
                    .select(&selector)
                    .into_iter()
                    .find(|s| in_range(s, query).next().is_some())
                    .map(|s| (s.labels.clone(), s.period));
            }
            b.next_head();
            for (n, v) in sums {
                merged.total = merged.total.saturating_add(v);
                let ids: Vec<u64> = head
                    .stack_locations(n)
                    .into_iter()
                    .map(|l| b.location(head, l))
                    .collect();
                samples.push(ember_pprof::Sample {
                    location_id: ids,
                    value: vec![v],
                    label: Vec::new(),
                });
            }
        });
        if heads > 1 {
            // One head's sums are one per stack; a stack found in several tiers adds up.
            samples.sort_unstable_by(|a, b| a.location_id.cmp(&b.location_id));
            samples.dedup_by(|later, kept| {
                let same = later.location_id == kept.location_id;
                if same {
                    kept.value[0] = kept.value[0].saturating_add(later.value[0]);
                }
                same
            });
        }
        let (labels, period) = first?;
        if heads > 1 {
            merged.series = self.series(tenant, Some(query)).len();
        }
        let label = |name: &str| -> String {
            labels
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let st = b.value_type(&label(TYPE_LABEL), &label("__unit__"));
        let pt = b.value_type(&label("__period_type__"), &label("__period_unit__"));
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
        let query = &self.within_retention(query);
        let step = step_nanos.max(1);
        let selector = query.full_selector();
        // Per series and bucket `(sum, profile count)` over every tier, so an averaged
        // series is averaged over all its profiles in a bucket.
        let mut per_series: HashMap<Labels, BTreeMap<i64, (i64, i64)>> = HashMap::new();
        let mut add = |labels: &Labels, points: &mut dyn Iterator<Item = (i64, i64)>| {
            let mut points = points.peekable();
            if points.peek().is_none() {
                return;
            }
            let own = per_series.entry(labels.clone()).or_default();
            for (time, total) in points {
                let offset = time.saturating_sub(query.start_nanos);
                let bucket = query
                    .start_nanos
                    .saturating_add(offset.div_euclid(step) * step);
                let e = own.entry(bucket).or_insert((0, 0));
                e.0 = e.0.saturating_add(total);
                e.1 += 1;
            }
        };
        self.for_each_point(tenant, query, &selector, group_by, &mut add);
        let mut groups: BTreeMap<Labels, BTreeMap<i64, i64>> = BTreeMap::new();
        for (labels, buckets) in per_series {
            let key: Labels = group_by
                .iter()
                .map(|g| {
                    let v = labels
                        .iter()
                        .find(|(n, _)| n == g)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default();
                    (g.clone(), v)
                })
                .collect();
            let averaged = averaged_labels(&labels);
            let points = groups.entry(key).or_default();
            for (bucket, (sum, count)) in buckets {
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
    /// (every series when `query` is `None`). Blocks answer from their index without being
    /// read.
    pub fn series(&self, tenant: &str, query: Option<&Query>) -> Vec<Labels> {
        let everything = Query {
            start_nanos: i64::MIN,
            end_nanos: i64::MAX,
            ..Default::default()
        };
        let query = &self.within_retention(query.unwrap_or(&everything));
        let query = Some(query);
        let Some(t) = self.tenant(tenant) else {
            return Vec::new();
        };
        let selector = query.map(Query::full_selector).unwrap_or_default();
        let t = t.read().unwrap_or_else(|e| e.into_inner());
        let mut out: BTreeSet<Labels> = BTreeSet::new();
        for h in std::iter::once(&t.head).chain(t.frozen.iter().map(|(_, h)| h)) {
            out.extend(
                h.select(&selector)
                    .into_iter()
                    .filter(|s| query.is_none_or(|q| in_range(s, q).next().is_some()))
                    .map(|s| s.labels.clone()),
            );
        }
        for s in &t.sections {
            out.extend(
                s.series
                    .iter()
                    .filter(|x| {
                        query.is_none_or(|q| !x.in_range(q.start_nanos, q.end_nanos).is_empty())
                            && selector.matches_series(&x.labels, |n| s.has_sample_label(n))
                    })
                    .map(|x| x.labels.clone()),
            );
        }
        out.into_iter().collect()
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
