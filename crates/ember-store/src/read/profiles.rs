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
    /// How many profiles the selection holds in the range (each stored one: the sum of the
    /// entries' `count`, listed or not).
    pub matched: usize,
}

/// A listed profile's place in the newest-first order: its time, then its series labels
/// ascending.
type Newest = (i64, Reverse<Arc<Labels>>);

impl Store {
    /// The individual profiles of `query`'s selection in its time range: the `limit` most
    /// recent (at most [`MAX_PROFILE_LIST`]; 0 counts them without listing), newest first,
    /// each with its series labels and total, and how many there are in all. Answered from
    /// the heads and the block indexes (a block is decoded only when sample-label matchers
    /// filter its totals), holding at most `limit` entries however many the range has.
    ///
    /// Profiles of one series stored at the same instant (in one tier or several) are one
    /// entry, `count` saying how many: reading that instant back merges them. `matched`
    /// counts stored profiles, so it is the sum of every entry's count, listed or not.
    pub fn list_profiles(&self, tenant: &str, query: &Query, limit: usize) -> ProfileList {
        let query = &self.within_retention(query);
        let limit = limit.min(MAX_PROFILE_LIST);
        let selector = query.full_selector();
        // The newest `limit` entries so far: their order (oldest on top, the one to drop)
        // and their `(total, count)`.
        let mut heap: BinaryHeap<Reverse<Newest>> = BinaryHeap::new();
        let mut kept: HashMap<(i64, Arc<Labels>), (i64, usize)> = HashMap::new();
        let mut matched = 0usize;
        let mut add = |labels: &Labels, points: &mut dyn Iterator<Item = (i64, i64)>| {
            let mut points: Vec<(i64, i64)> = points.collect();
            matched += points.len();
            if limit == 0 || points.is_empty() {
                return;
            }
            // Newest first: once one is older than every kept entry, so are the rest.
            points.sort_unstable_by(|a, b| b.cmp(a));
            // The labels are shared by the series' entries, copied once if one is kept.
            let mut shared: Option<Arc<Labels>> = None;
            for (t, v) in points {
                if heap.len() == limit
                    && let Some(Reverse((oldest, Reverse(l)))) = heap.peek()
                    && (t, Reverse(labels)) < (*oldest, Reverse(&**l))
                {
                    break;
                }
                let l = shared
                    .get_or_insert_with(|| Arc::new(labels.clone()))
                    .clone();
                if let Some(e) = kept.get_mut(&(t, l.clone())) {
                    // Another profile of the same instant: one entry.
                    e.0 = e.0.saturating_add(v);
                    e.1 += 1;
                    continue;
                }
                kept.insert((t, l.clone()), (v, 1));
                heap.push(Reverse((t, Reverse(l))));
                if heap.len() > limit
                    && let Some(Reverse((t, Reverse(l)))) = heap.pop()
                {
                    kept.remove(&(t, l));
                }
            }
        };
        self.for_each_point(tenant, query, &selector, &[], &mut add);
        let mut profiles: Vec<ProfileRef> = kept
            .into_iter()
            .map(|((t, labels), (total, count))| ProfileRef {
                labels: Arc::unwrap_or_clone(labels),
                time_nanos: t,
                total,
                count,
            })
            .collect();
        profiles.sort_unstable_by(|a, b| {
            b.time_nanos
                .cmp(&a.time_nanos)
                .then_with(|| a.labels.cmp(&b.labels))
        });
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
