//! The individual profiles of a selection: listing them (time, series labels, total) and
//! the point visitor that the totals over time share with the listing.
//!
//! A profile is named by its series' labels and its timestamp: the query layer reads exactly
//! one profile back as the selection of that series at that instant.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

use super::{AddPoints, Query, head_totals};
use crate::block::Section;
use crate::{Labels, Selector, Store};

/// The most profiles one listing returns when the caller asks for more.
pub const MAX_PROFILE_LIST: usize = 10_000;

/// One stored profile of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileRef {
    /// The labels of its series.
    pub labels: Labels,
    /// Its timestamp, unix nanoseconds.
    pub time_nanos: i64,
    /// Sum of its values (of the samples the selection's sample-label matchers pass).
    pub total: i64,
    /// Profiles of the series stored with this very timestamp (1 but for a client that sent
    /// two at one instant; they are read back together).
    pub count: usize,
}

/// The profiles of a selection in a time range, most recent first, at most the limit asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProfileList {
    /// The most recent profiles, newest first (ties: by series labels).
    pub profiles: Vec<ProfileRef>,
    /// How many distinct profiles (series and timestamp) the selection holds in the range.
    pub matched: usize,
}

/// A listed profile's place in the newest-first order: its time, then its series labels in
/// ascending order, then its series and index among that series' profiles.
type Newest<'a> = (i64, Reverse<&'a Labels>, usize, usize);

impl Store {
    /// The individual profiles of `query`'s selection in its time range: the `limit` most
    /// recent (at most [`MAX_PROFILE_LIST`]; 0 counts them without listing), newest first,
    /// each with its series labels and total, and how many there are in all. Answered from
    /// the heads and the block indexes (a block is decoded only when sample-label matchers
    /// filter its totals).
    pub fn list_profiles(&self, tenant: &str, query: &Query, limit: usize) -> ProfileList {
        let query = &self.within_retention(query);
        let limit = limit.min(MAX_PROFILE_LIST);
        let selector = query.full_selector();
        // Per series (labels stored once), its points: a series appears in several tiers.
        let mut per_series: HashMap<Labels, Vec<(i64, i64)>> = HashMap::new();
        let mut add = |labels: &Labels, points: &mut dyn Iterator<Item = (i64, i64)>| {
            let mut points = points.peekable();
            if points.peek().is_none() {
                return;
            }
            per_series.entry(labels.clone()).or_default().extend(points);
        };
        self.for_each_point(tenant, query, &selector, &[], &mut add);
        let series: Vec<(Labels, Vec<(i64, i64)>)> = per_series.into_iter().collect();
        // The newest `limit` by (time, then labels): a min-heap of the best so far.
        let mut heap: BinaryHeap<Reverse<Newest<'_>>> = BinaryHeap::new();
        let mut matched = 0usize;
        let mut merged: Vec<Vec<(i64, i64, usize)>> = Vec::with_capacity(series.len());
        for (i, (labels, points)) in series.iter().enumerate() {
            let mut points = points.clone();
            points.sort_unstable();
            // Profiles stored at one instant are one profile to read back: add them up.
            let mut same: Vec<(i64, i64, usize)> = Vec::with_capacity(points.len());
            for (t, v) in points {
                match same.last_mut() {
                    Some(last) if last.0 == t => {
                        last.1 = last.1.saturating_add(v);
                        last.2 += 1;
                    }
                    _ => same.push((t, v, 1)),
                }
            }
            matched += same.len();
            if limit > 0 {
                for (j, p) in same.iter().enumerate() {
                    heap.push(Reverse((p.0, Reverse(labels), i, j)));
                    if heap.len() > limit {
                        heap.pop();
                    }
                }
            }
            merged.push(same);
        }
        let mut picked: Vec<_> = heap.into_iter().map(|Reverse(x)| x).collect();
        picked.sort_unstable_by(|a, b| b.cmp(a));
        let profiles = picked
            .into_iter()
            .map(|(_, _, i, j)| {
                let (t, total, count) = merged[i][j];
                ProfileRef {
                    labels: series[i].0.clone(),
                    time_nanos: t,
                    total,
                    count,
                }
            })
            .collect();
        ProfileList { profiles, matched }
    }

    /// Feeds `add` the `(time, total)` of every profile of the selection in the time range
    /// (`query` already within retention), keyed by its series labels plus, when `group_by`
    /// names sample labels, their values: heads in memory, then blocks from their index.
    pub(super) fn for_each_point(
        &self,
        tenant: &str,
        query: &Query,
        selector: &Selector,
        group_by: &[String],
        add: &mut AddPoints<'_>,
    ) {
        // Heads in memory, then blocks from their index: totals decode a block only when
        // sample labels select or group its profiles.
        let mut decode: Vec<Arc<Section>> = Vec::new();
        if let Some(t) = self.tenant(tenant) {
            let t = t.read().unwrap_or_else(|e| e.into_inner());
            for h in std::iter::once(&t.head).chain(t.frozen.iter().map(|(_, h)| h)) {
                head_totals(h, selector, query, group_by, add);
            }
            for s in &t.sections {
                if s.min_time > query.end_nanos || s.max_time < query.start_nanos {
                    continue;
                }
                let has = |n: &str| s.has_sample_label(n);
                let selected: Vec<_> = s
                    .series
                    .iter()
                    .filter(|x| selector.matches_series(&x.labels, has))
                    .collect();
                let by_samples = selected.iter().any(|x| {
                    !selector.sample_matchers(&x.labels, has).is_empty()
                        || group_by
                            .iter()
                            .any(|g| has(g) && !x.labels.iter().any(|(n, _)| n == g))
                });
                if by_samples {
                    decode.push(s.clone());
                    continue;
                }
                for x in selected {
                    let r = x.in_range(query.start_nanos, query.end_nanos);
                    let mut points = x.times[r.clone()]
                        .iter()
                        .copied()
                        .zip(x.totals[r].iter().copied());
                    add(&x.labels, &mut points);
                }
            }
        }
        for s in decode {
            match self.cache.get(&self.objects, &s) {
                Ok(head) => head_totals(&head, selector, query, group_by, add),
                Err(e) => tracing::error!(error = %e, "skipping an unreadable block section"),
            }
        }
    }
}
