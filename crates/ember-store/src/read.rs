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
    /// Sums the matching profiles of the query per stack node and fills the counters of
    /// `out`: `(node, sum)` for every node with a non-zero sum, sorted by node. The profiles
    /// of an averaged series ([`AGGREGATION_LABEL`]) are first averaged per node over the
    /// series' profiles in range, then added. Sums go into an array as long as the tenant's
    /// tree when the selection touches a fair share of it (a day), into a map when it is
    /// small (an hour of a tenant storing weeks), so a narrow query costs what it reads.
    fn sum_nodes(head: &TenantHead, query: &Query, out: &mut Merged) -> Vec<(u32, i64)> {
        let selector = query.full_selector();
        let selected = head.select(&selector);
        let entries: usize = selected
            .iter()
            .flat_map(|s| in_range(s, query))
            .map(|p| p.nodes.len())
            .sum();
        let mut sums = if entries.saturating_mul(SPARSE_RATIO) >= head.node_count() {
            NodeSums::Dense(vec![0i64; head.node_count()])
        } else {
            NodeSums::Sparse(crate::head::FastMap::default())
        };
        for series in selected {
            let mut used = false;
            let averaged = is_averaged(series);
            // Per node sums of this series alone, only needed when it is averaged.
            let mut own: BTreeMap<u32, i64> = BTreeMap::new();
            let mut count = 0i64;
            for p in in_range(series, query) {
                used = true;
                out.profiles += 1;
                count += 1;
                if averaged {
                    for (n, v) in p.nodes.iter().zip(&p.values) {
                        let e = own.entry(*n).or_insert(0);
                        *e = e.saturating_add(*v);
                    }
                } else {
                    sums.add_all(&p.nodes, &p.values);
                }
            }
            for (n, v) in own {
                sums.add(n, average(v, count));
            }
            if used {
                out.series += 1;
                if let Some((_, v)) = series.labels.iter().find(|(n, _)| n == PROFILE_TYPE_LABEL) {
                    out.profile_types.insert(v.clone());
                }
            }
        }
        sums.into_sorted()
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
        let mut frames = if sums.len().saturating_mul(SPARSE_RATIO) >= head.frame_count() {
            NodeSums::Dense(vec![0i64; head.frame_count()])
        } else {
            NodeSums::Sparse(crate::head::FastMap::default())
        };
        for (n, v) in sums {
            frames.add(head.frame_of(n), v);
        }
        compact_frames(&head, frames.into_sorted(), &mut out);
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
        for (n, v) in sums {
            merged.total = merged.total.saturating_add(v);
            let ids: Vec<u64> = head
                .stack_locations(n)
                .into_iter()
                .map(|l| b.location(l))
                .collect();
            samples.push(ember_pprof::Sample {
                location_id: ids,
                value: vec![v],
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

/// A selection touching fewer than 1/`SPARSE_RATIO` of a tenant's nodes (or frames) is
/// summed in a map rather than an array over all of them: a map insert costs some 30 times
/// an array add, so below that share the map is cheaper than clearing and scanning the array.
const SPARSE_RATIO: usize = 32;

/// Sums by node (or frame) id: dense for wide selections, a map for narrow ones.
enum NodeSums {
    Dense(Vec<i64>),
    Sparse(crate::head::FastMap<u32, i64>),
}

impl NodeSums {
    fn add(&mut self, id: u32, v: i64) {
        match self {
            NodeSums::Dense(d) => {
                if let Some(e) = d.get_mut(id as usize) {
                    *e = e.saturating_add(v);
                }
            }
            NodeSums::Sparse(m) => {
                let e = m.entry(id).or_insert(0);
                *e = e.saturating_add(v);
            }
        }
    }

    fn add_all(&mut self, ids: &[u32], values: &[i64]) {
        // One loop per kind rather than a branch per value: this is the hot loop of a query.
        match self {
            NodeSums::Dense(d) => {
                for (n, v) in ids.iter().zip(values) {
                    if let Some(e) = d.get_mut(*n as usize) {
                        *e = e.saturating_add(*v);
                    }
                }
            }
            NodeSums::Sparse(m) => {
                for (n, v) in ids.iter().zip(values) {
                    let e = m.entry(*n).or_insert(0);
                    *e = e.saturating_add(*v);
                }
            }
        }
    }

    /// `(id, sum)` of the non-zero sums, sorted by id.
    fn into_sorted(self) -> Vec<(u32, i64)> {
        match self {
            NodeSums::Dense(d) => d
                .into_iter()
                .enumerate()
                .filter(|(_, v)| *v != 0)
                .map(|(i, v)| (i as u32, v))
                .collect(),
            NodeSums::Sparse(m) => {
                let mut v: Vec<(u32, i64)> = m.into_iter().filter(|(_, v)| *v != 0).collect();
                v.sort_unstable();
                v
            }
        }
    }
}

/// Fills `out`'s frames, values, names and total from `values` (`(head frame, self value)`,
/// sorted by frame): keeps those frames and their ancestors, renumbered in head order
/// (parents before children: head frames are created parent first), and the names they use.
fn compact_frames(head: &TenantHead, values: Vec<(u32, i64)>, out: &mut Merged) {
    // Wide selections mark ancestors in an array over every frame; narrow ones walk up from
    // each valued frame until one already kept, so an hour does not pay for the whole tree.
    let dense = values.len().saturating_mul(SPARSE_RATIO) >= head.frame_count();
    compact_frames_with(head, values, dense, out);
}

/// [`compact_frames`] with the choice of array or walk made by the caller.
fn compact_frames_with(head: &TenantHead, values: Vec<(u32, i64)>, dense: bool, out: &mut Merged) {
    let n = head.frame_count();
    let kept: Vec<u32> = if dense {
        let mut keep = vec![false; n];
        for &(f, _) in &values {
            if let Some(k) = keep.get_mut(f as usize) {
                *k = true;
            }
        }
        // Parents come before children: one reverse pass marks every ancestor.
        for f in (1..n).rev() {
            if keep[f] {
                keep[head.frame_parent(f as u32) as usize] = true;
            }
        }
        (1..n as u32).filter(|f| keep[*f as usize]).collect()
    } else {
        let mut kept: Vec<u32> = values.iter().map(|(f, _)| *f).filter(|f| *f != 0).collect();
        let mut seen: crate::head::FastMap<u32, ()> = kept.iter().map(|f| (*f, ())).collect();
        for &(f, _) in &values {
            let mut p = head.frame_parent(f);
            while p != 0 && seen.insert(p, ()).is_none() {
                kept.push(p);
                p = head.frame_parent(p);
            }
        }
        kept.sort_unstable();
        kept
    };
    // New id of a kept frame: its position in `kept` plus one (the root is 0).
    let dense_ids: Vec<u32> = if dense {
        let mut ids = vec![0u32; n];
        for (i, f) in kept.iter().enumerate() {
            ids[*f as usize] = i as u32 + 1;
        }
        ids
    } else {
        Vec::new()
    };
    let new_id = |f: u32| -> u32 {
        if f == 0 {
            0
        } else if dense {
            dense_ids[f as usize]
        } else {
            kept.binary_search(&f).map_or(0, |p| p as u32 + 1)
        }
    };
    if let Some(&(0, root)) = values.first() {
        out.self_values[0] = root;
        out.total = out.total.saturating_add(root);
    }
    let mut name_ids: crate::head::FastMap<u32, u32> = crate::head::FastMap::default();
    let mut next_value = values.iter().peekable();
    for (i, &f) in kept.iter().enumerate() {
        let (parent, name) = (head.frame_parent(f), head.frame_name(f));
        let name = *name_ids.entry(name).or_insert_with(|| {
            out.names.push(head.string(name).to_string());
            (out.names.len() - 1) as u32
        });
        debug_assert_eq!(out.frames.len(), i + 1);
        out.frames.push((new_id(parent), name));
        while next_value.peek().is_some_and(|(vf, _)| *vf < f) {
            next_value.next();
        }
        let v = match next_value.peek() {
            Some(&&(vf, v)) if vf == f => v,
            _ => 0,
        };
        out.self_values.push(v);
        out.total = out.total.saturating_add(v);
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

    /// A head holding a few profiles of made-up stacks sharing prefixes.
    fn head() -> TenantHead {
        let mut head = TenantHead::new();
        for round in 0..3i64 {
            let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
            for (i, stack) in ["a;b;c", "a;b;d", "a;e", "x;y;z;w", "a;b;c;c;c"]
                .iter()
                .enumerate()
            {
                let frames: Vec<&str> = stack.split(';').collect();
                b.add_folded_stack(&frames, &[(i as i64 + 1) * (round + 1)]);
            }
            let bytes = ember_pprof::encode(&b.build());
            let raw =
                ember_pprof::decompress(&bytes, &ember_pprof::DecodeLimits::default()).unwrap();
            let view = ember_pprof::ProfileView::parse(&raw).unwrap();
            let labels = vec![vec![("service_name".to_string(), format!("s{round}"))]];
            crate::apply::apply_to(&mut head, round + 1, 0, &view, labels);
        }
        head
    }

    #[test]
    fn array_and_walk_keep_the_same_frames() {
        let head = head();
        let mut dense = NodeSums::Dense(vec![0; head.node_count()]);
        let mut sparse = NodeSums::Sparse(crate::head::FastMap::default());
        for s in head.select(&Selector::default()) {
            for p in &s.profiles {
                dense.add_all(&p.nodes, &p.values);
                sparse.add_all(&p.nodes, &p.values);
            }
        }
        let (d, sp) = (dense.into_sorted(), sparse.into_sorted());
        assert_eq!(d, sp);
        let to_frames = |sums: &[(u32, i64)], dense: bool| {
            let mut f = if dense {
                NodeSums::Dense(vec![0; head.frame_count()])
            } else {
                NodeSums::Sparse(crate::head::FastMap::default())
            };
            for (n, v) in sums {
                f.add(head.frame_of(*n), *v);
            }
            f.into_sorted()
        };
        let frames = to_frames(&d, true);
        assert_eq!(frames, to_frames(&d, false));
        // Only some frames valued (a narrow selection) and all of them (a wide one).
        for values in [
            frames.clone(),
            frames[..2].to_vec(),
            frames[frames.len() - 1..].to_vec(),
        ] {
            let (mut a, mut b) = (Merged::default(), Merged::default());
            compact_frames_with(&head, values.clone(), true, &mut a);
            compact_frames_with(&head, values, false, &mut b);
            assert_eq!(
                (&a.frames, &a.self_values, &a.names),
                (&b.frames, &b.self_values, &b.names)
            );
            assert_eq!(a.stacks(), b.stacks());
        }
        let mut all = Merged::default();
        compact_frames_with(&head, frames, false, &mut all);
        let stacks: Vec<(String, i64)> = all
            .stacks()
            .into_iter()
            .map(|(f, v)| (f.join(";"), v))
            .collect();
        // Sums over the three rounds: value (i+1) * (1+2+3).
        assert_eq!(
            stacks,
            vec![
                ("a;b;c".to_string(), 6),
                ("a;b;c;c;c".to_string(), 30),
                ("a;b;d".to_string(), 12),
                ("a;e".to_string(), 18),
                ("x;y;z;w".to_string(), 24),
            ]
        );
    }

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
