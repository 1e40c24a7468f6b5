//! Summing a head's profiles per stack node and folding the sums onto frames: the inner
//! loops of every read, over one [`TenantHead`] at a time (the tiers are combined after).

use std::collections::{BTreeMap, HashMap};

use super::samples::{SampleFilter, entries as passing};
use super::{Merged, Query, average, is_averaged};
use crate::{Labels, PROFILE_TYPE_LABEL, Series, StoredProfile, TenantHead};

/// Sums the matching profiles of the query per stack node and fills the counters of
/// `out`: `(node, sum)` for every node with a non-zero sum, sorted by node. The profiles
/// of an averaged series ([`crate::AGGREGATION_LABEL`]) are first averaged per node over the
/// series' profiles in range, then added. Sums go into an array as long as the tenant's
/// tree when the selection touches a fair share of it (a day), into a map when it is
/// small (an hour of a tenant storing weeks), so a narrow query costs what it reads.
///
/// `counts` holds the profile count in range of each averaged series over every tier (a
/// series split by a flush is averaged over all its profiles, not per tier); a series
/// missing from it is averaged over this head's profiles.
pub(crate) fn sum_nodes(
    head: &TenantHead,
    query: &Query,
    counts: &HashMap<Labels, i64>,
    out: &mut Merged,
) -> Vec<(u32, i64)> {
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
    let mut filter = SampleFilter::new(head, &selector);
    for series in selected {
        let mut used = false;
        let averaged = is_averaged(series);
        let pass = filter.for_series(series);
        // Per node sums of this series alone, only needed when it is averaged.
        let mut own: BTreeMap<u32, i64> = BTreeMap::new();
        let mut count = 0i64;
        for p in in_range(series, query) {
            used = true;
            out.profiles += 1;
            count += 1;
            if averaged {
                for (n, v) in passing(p, pass) {
                    let e = own.entry(n).or_insert(0);
                    *e = e.saturating_add(v);
                }
            } else if pass.is_some() {
                for (n, v) in passing(p, pass) {
                    sums.add(n, v);
                }
            } else {
                sums.add_all(&p.nodes, &p.values);
            }
        }
        let count = counts.get(&series.labels).copied().unwrap_or(count);
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

/// A selection touching fewer than 1/`SPARSE_RATIO` of a tenant's nodes (or frames) is
/// summed in a map rather than an array over all of them: a map insert costs some 30 times
/// an array add, so below that share the map is cheaper than clearing and scanning the array.
pub(crate) const SPARSE_RATIO: usize = 32;

/// Sums by node (or frame) id: dense for wide selections, a map for narrow ones.
pub(crate) enum NodeSums {
    Dense(Vec<i64>),
    Sparse(crate::head::FastMap<u32, i64>),
}

impl NodeSums {
    pub(crate) fn add(&mut self, id: u32, v: i64) {
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

    pub(crate) fn add_all(&mut self, ids: &[u32], values: &[i64]) {
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
    pub(crate) fn into_sorted(self) -> Vec<(u32, i64)> {
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
pub(crate) fn compact_frames(head: &TenantHead, values: Vec<(u32, i64)>, out: &mut Merged) {
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
    out.frames.reserve(kept.len());
    out.self_values.reserve(kept.len());
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

pub(crate) fn in_range<'a>(
    series: &'a Series,
    q: &Query,
) -> impl Iterator<Item = &'a StoredProfile> {
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
        for s in head.select(&crate::Selector::default()) {
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
        let stacks = all.folded();
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
}
