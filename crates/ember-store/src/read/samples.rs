//! Sample labels in reads: which of a head's samples a query's sample-label matchers keep,
//! and totals grouped by a sample label.
//!
//! A matcher on a name that a series lacks but the head's samples carry (`span_id`,
//! `thread_name`, `endpoint`: what pprof puts in sample labels) selects samples rather than
//! series ([`crate::Selector::matches_series`]). It is evaluated once per label set of the
//! head, not once per sample: a query pays for the distinct label sets, then one array
//! lookup per entry.

use std::collections::HashMap;

use crate::selector::sample_matches;
use crate::{Labels, Selector, Series, StoredProfile, TenantHead};

/// The sample-label part of a selector on one head.
pub(crate) struct SampleFilter<'h> {
    head: &'h TenantHead,
    selector: &'h Selector,
    /// Which label sets pass, per set of matchers left to samples (a bit per matcher):
    /// series of one head nearly always leave the same ones.
    passing: HashMap<u64, Vec<bool>>,
}

impl<'h> SampleFilter<'h> {
    /// The filter of `selector` on `head` (free when the head has no sample labels).
    pub(crate) fn new(head: &'h TenantHead, selector: &'h Selector) -> Self {
        SampleFilter {
            head,
            selector,
            passing: HashMap::new(),
        }
    }

    /// Which label sets of the head pass for the samples of `series`, by set id; `None`
    /// when the series leaves no matcher to its samples (every sample passes).
    pub(crate) fn for_series(&mut self, series: &Series) -> Option<&[bool]> {
        let head = self.head;
        let mut mask = 0u64;
        for (i, m) in self.selector.matchers.iter().enumerate().take(64) {
            if head.has_sample_label(&m.name) && !series.labels.iter().any(|(n, _)| *n == m.name) {
                mask |= 1 << i;
            }
        }
        if mask == 0 {
            return None;
        }
        let selector = self.selector;
        let pass = self.passing.entry(mask).or_insert_with(|| {
            let matchers: Vec<_> = selector
                .matchers
                .iter()
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, m)| m)
                .collect();
            (0..head.label_set_count() as u32)
                .map(|set| {
                    let pairs = head
                        .label_set_pairs(set)
                        .iter()
                        .map(|(k, v)| (head.string(*k), head.string(*v)));
                    sample_matches(&matchers, pairs)
                })
                .collect()
        });
        Some(pass)
    }
}

/// `(node, value)` of the entries of `p` whose label set passes (all when `pass` is `None`).
pub(crate) fn entries<'a>(
    p: &'a StoredProfile,
    pass: Option<&'a [bool]>,
) -> impl Iterator<Item = (u32, i64)> + 'a {
    (0..p.nodes.len())
        .filter(move |i| pass.is_none_or(|pass| pass.get(p.set(*i) as usize) == Some(&true)))
        .map(|i| (p.nodes[i], p.values[i]))
}

/// Totals of profiles split by the values of sample labels (a group-by on names the series
/// lack): the group of each label set is worked out once per head.
pub(crate) struct SampleGroups<'h> {
    head: &'h TenantHead,
    /// The group-by names left to samples.
    keys: Vec<&'h str>,
    /// Group index of each label set seen.
    group_of: HashMap<u32, usize>,
    /// `(name, value)` of each group, in `keys` order.
    groups: Vec<Labels>,
    /// Index of each group in `groups`.
    group_ids: HashMap<Labels, usize>,
}

impl<'h> SampleGroups<'h> {
    /// Groups by those of `group_by` that the head's samples carry and `series` lacks;
    /// `None` when there are none.
    pub(crate) fn new(
        head: &'h TenantHead,
        series: &Series,
        group_by: &'h [String],
    ) -> Option<SampleGroups<'h>> {
        let keys: Vec<&str> = group_by
            .iter()
            .map(String::as_str)
            .filter(|g| head.has_sample_label(g) && !series.labels.iter().any(|(n, _)| n == g))
            .collect();
        (!keys.is_empty()).then(|| SampleGroups {
            head,
            keys,
            group_of: HashMap::new(),
            groups: Vec::new(),
            group_ids: HashMap::new(),
        })
    }

    /// `(group labels, total)` of the passing entries of `p`, one per group present.
    pub(crate) fn totals(
        &mut self,
        p: &StoredProfile,
        pass: Option<&[bool]>,
    ) -> Vec<(Labels, i64)> {
        let mut sums: std::collections::BTreeMap<usize, i64> = Default::default();
        for i in 0..p.nodes.len() {
            let set = p.set(i);
            if pass.is_some_and(|pass| pass.get(set as usize) != Some(&true)) {
                continue;
            }
            let e = sums.entry(self.group(set)).or_insert(0);
            *e = e.saturating_add(p.values[i]);
        }
        sums.into_iter()
            .map(|(g, v)| (self.groups[g].clone(), v))
            .collect()
    }

    fn group(&mut self, set: u32) -> usize {
        if let Some(&g) = self.group_of.get(&set) {
            return g;
        }
        let head = self.head;
        let pairs = head.label_set_pairs(set);
        let labels: Labels = self
            .keys
            .iter()
            .map(|k| {
                // The first value when a label repeats, "" when the sample lacks it.
                let v = pairs
                    .iter()
                    .find(|(n, _)| head.string(*n) == *k)
                    .map_or("", |(_, v)| head.string(*v));
                (k.to_string(), v.to_string())
            })
            .collect();
        let g = match self.group_ids.get(&labels) {
            Some(&g) => g,
            None => {
                self.group_ids.insert(labels.clone(), self.groups.len());
                self.groups.push(labels);
                self.groups.len() - 1
            }
        };
        self.group_of.insert(set, g);
        g
    }
}
