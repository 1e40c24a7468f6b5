//! Reads of the head: [`Query`] (selector, profile type, time range) and the operations the
//! query layer builds on: merged stacks by frame name ([`Store::merge_stacks`]), a merged
//! pprof with full symbols ([`Store::merge_profile`]), totals over time
//! ([`Store::series_totals`]), and the label/series listings.
//!
//! Owns summing versus averaging: a series marked [`AGGREGATION_LABEL`]`=`[`AVERAGE`]
//! contributes the mean of its profiles in range, every other series their sum. Never
//! writes to the head.

use std::collections::{BTreeMap, BTreeSet};

use ember_pprof::Profile;

use crate::{
    AGGREGATION_LABEL, AVERAGE, Labels, Matcher, PROFILE_TYPE_LABEL, Selector, Series, Store,
    StoredProfile, TYPE_LABEL, TenantHead, pprof_out,
};

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
        }
    }
}

impl Merged {
    /// Whether no stack has a non-zero value.
    pub fn is_empty(&self) -> bool {
        self.self_values.iter().all(|v| *v == 0)
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

/// A time series of totals.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeSeries {
    /// The group-by label values (`(name, value)`).
    pub labels: Labels,
    /// `(bucket start unix ns, summed value)`, sorted, only non-empty buckets.
    pub points: Vec<(i64, i64)>,
}

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

impl Store {
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

    /// Merges every matching profile in the time range into one call tree by frame names
    /// (stacks that differ only in addresses or mappings add up).
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
        compact_frames(&head, &frames, &mut out);
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

/// Fills `out`'s frames, values, names and total from `values` (self value per head frame):
/// keeps the frames with a value and their ancestors, renumbered in head order (parents
/// before children), and the names they use.
fn compact_frames(head: &TenantHead, values: &[i64], out: &mut Merged) {
    // Head frames are created parent first, so a reverse pass marks every ancestor.
    let mut keep: Vec<bool> = values.iter().map(|v| *v != 0).collect();
    for f in (1..keep.len()).rev() {
        if keep[f] {
            let parent = head.frame_parent(f as u32) as usize;
            if let Some(k) = keep.get_mut(parent) {
                *k = true;
            }
        }
    }
    let mut new_id = vec![0u32; keep.len()];
    let mut name_ids: crate::head::FastMap<u32, u32> = crate::head::FastMap::default();
    for f in 1..keep.len() {
        if !keep[f] {
            continue;
        }
        let (parent, name) = (head.frame_parent(f as u32), head.frame_name(f as u32));
        let name = *name_ids.entry(name).or_insert_with(|| {
            out.names.push(head.string(name).to_string());
            (out.names.len() - 1) as u32
        });
        new_id[f] = out.frames.len() as u32;
        out.frames.push((new_id[parent as usize], name));
        out.self_values.push(values[f]);
        out.total = out.total.saturating_add(values[f]);
    }
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
