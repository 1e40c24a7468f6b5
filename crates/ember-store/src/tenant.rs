//! A tenant's data in three tiers, and which tier a newly durable record goes to.
//!
//! - the **open head**: records of log segments after the last flush's cut, in memory and
//!   growing;
//! - **frozen heads**: what a flush cut off the open head, kept in memory (and queryable)
//!   while the flush writes them into a block;
//! - **block sections**: this tenant's part of each immutable block, known by an index read
//!   at start; its profiles are decoded only when a query needs them (through
//!   [`crate::cache::BlockCache`]).
//!
//! The cut is by log segment: a flush rotates the log at segment `T` and freezes every head,
//! and from then on a record is routed by the segment it was logged in — `≤ T` to the frozen
//! head, `> T` to the open one — however late its apply runs. [`Pending`] counts records that
//! are durable but not yet applied, so the flush waits for the last record of `T` before
//! encoding the frozen heads. Once the block is written, the frozen heads are swapped for
//! its sections and records of segments `≤ T` that still arrive are dropped (the block has
//! them). That makes every acknowledged record be in exactly one tier at every moment.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};

use crate::Labels;
use crate::block::Section;
use crate::head::TenantHead;

/// One tenant's tiers.
#[derive(Debug, Default)]
pub(crate) struct Tenant {
    /// Records of segments after every cut.
    pub(crate) head: TenantHead,
    /// `(last segment, head)` cut by a flush still writing its block, oldest first.
    pub(crate) frozen: Vec<(u64, TenantHead)>,
    /// Sections of blocks holding this tenant's older data.
    pub(crate) sections: Vec<Arc<Section>>,
    /// Records of segments up to this one are in blocks.
    pub(crate) flushed_through: u64,
    /// Label sets of every series in any tier (the series limit counts these).
    known: HashSet<Labels>,
}

impl Tenant {
    /// The head a record of log segment `segment` belongs in; `None` when a block already
    /// holds it.
    pub(crate) fn head_for(&mut self, segment: u64) -> Option<&mut TenantHead> {
        if segment != 0 && segment <= self.flushed_through {
            return None;
        }
        let at = self.frozen.iter().position(|(t, _)| segment <= *t);
        match at {
            Some(i) => self.frozen.get_mut(i).map(|(_, h)| h),
            None => Some(&mut self.head),
        }
    }

    /// Freezes the open head at `through` unless this cut has frozen it already (or a block
    /// holds it): the flush and the first apply of a record after the cut both call it,
    /// whichever comes first freezes.
    pub(crate) fn freeze_at(&mut self, through: u64) {
        if through <= self.flushed_through || self.frozen.iter().any(|(t, _)| *t == through) {
            return;
        }
        self.freeze(through);
    }

    /// Moves the open head into the frozen tier, cut at segment `through`.
    pub(crate) fn freeze(&mut self, through: u64) {
        let head = std::mem::take(&mut self.head);
        self.frozen.push((through, head));
    }

    /// Drops the interning tables ([`TenantHead::into_read_only`]) of the frozen heads cut
    /// at or before `through`. Only once every record of the cut is applied
    /// ([`Pending::wait_through`]): nothing interns into those heads any more, while they
    /// are still read (by queries, and by the flush encoding them). Their lookup tables
    /// (stack and frame nodes, strings, symbols and fingerprints by content) are a third or
    /// more of a head's memory; freed before the block is written rather than after, the
    /// block writer's buffers and the open head growing meanwhile reuse that memory instead
    /// of adding to it.
    pub(crate) fn settle(&mut self, through: u64) {
        for (_, head) in self.frozen.iter_mut().filter(|(t, _)| *t <= through) {
            *head = std::mem::take(head).into_read_only();
        }
    }

    /// Replaces the frozen heads cut at or before `through` with `sections` (the block that
    /// now holds them).
    /// Returns the frozen heads it dropped, oldest first.
    pub(crate) fn seal(&mut self, through: u64, sections: Vec<Arc<Section>>) -> Vec<TenantHead> {
        let (sealed, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.frozen)
            .into_iter()
            .partition(|(t, _)| *t <= through);
        self.frozen = kept;
        self.sections.extend(sections);
        self.sections.sort_by_key(|s| (s.min_time, s.max_time));
        self.flushed_through = self.flushed_through.max(through);
        sealed.into_iter().map(|(_, h)| h).collect()
    }

    /// Rebuilds the set of known series from every tier (at open and after retention).
    pub(crate) fn index_series(&mut self) {
        let mut known: HashSet<Labels> = HashSet::new();
        for s in &self.sections {
            known.extend(s.series.iter().map(|s| s.labels.clone()));
        }
        for h in std::iter::once(&self.head).chain(self.frozen.iter().map(|(_, h)| h)) {
            known.extend(h.all_series().map(|s| s.labels.clone()));
        }
        self.known = known;
    }

    /// Records that a series with `labels` exists; true when it is new.
    pub(crate) fn note_series(&mut self, labels: &Labels) -> bool {
        if self.known.contains(labels) {
            return false;
        }
        self.known.insert(labels.clone());
        true
    }

    /// Whether a series with `labels` exists in any tier.
    pub(crate) fn has_series(&self, labels: &Labels) -> bool {
        self.known.contains(labels)
    }

    /// Number of distinct series over every tier.
    pub(crate) fn series_count(&self) -> usize {
        self.known.len()
    }

    /// Number of profiles in memory (open and frozen heads).
    pub(crate) fn head_profiles(&self) -> u64 {
        self.head.profiles + self.frozen.iter().map(|(_, h)| h.profiles).sum::<u64>()
    }
}

/// Records that are durable in the log but not yet applied to a head, by segment.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    by_segment: Mutex<BTreeMap<u64, usize>>,
    applied: Condvar,
}

/// One durable record on its way to a head; dropping it (applied, refused or abandoned)
/// ends its count.
#[derive(Debug)]
pub(crate) struct PendingRecord {
    pending: Arc<Pending>,
    /// The log segment the record is in.
    pub(crate) segment: u64,
}

impl Pending {
    /// Counts a record of `segment` as durable and not yet applied.
    pub(crate) fn enter(self: &Arc<Self>, segment: u64) -> PendingRecord {
        *self
            .by_segment
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(segment)
            .or_insert(0) += 1;
        PendingRecord {
            pending: self.clone(),
            segment,
        }
    }

    /// Waits until every counted record of segments up to `through` is applied (or dropped).
    pub(crate) fn wait_through(&self, through: u64) {
        let mut m = self.by_segment.lock().unwrap_or_else(|e| e.into_inner());
        while m.range(..=through).next().is_some() {
            m = self.applied.wait(m).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for PendingRecord {
    fn drop(&mut self) {
        let mut m = self
            .pending
            .by_segment
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.segment) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.segment);
                self.pending.applied.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::head::{FunctionSym, LocationSym, StoredProfile};

    /// A head of one profile over one stack of `depth` distinct frames.
    fn head_of(depth: u32) -> TenantHead {
        let mut h = TenantHead::new();
        let mut node = 0;
        let mut nodes = Vec::new();
        for i in 0..depth {
            let name = h.intern(&format!("f{i}"));
            let f = h.function(FunctionSym {
                name,
                system_name: name,
                filename: 0,
                start_line: 0,
            });
            let l = h.location(LocationSym {
                mapping: 0,
                address: u64::from(i),
                lines: Box::new([(f, 1)]),
                is_folded: false,
            });
            node = h.child(node, l);
            nodes.push(node);
        }
        h.insert(
            vec![("service_name".into(), "api".into())],
            StoredProfile {
                time_nanos: 1,
                values: vec![3; nodes.len()],
                nodes,
                sets: Vec::new(),
            },
        );
        h
    }

    fn encoded(h: &TenantHead) -> Vec<u8> {
        let mut out = Vec::new();
        h.encode(&mut out);
        out
    }

    #[test]
    fn settled_heads_of_the_cut_drop_their_lookup_tables_and_encode_the_same() {
        let mut t = Tenant {
            head: head_of(5000),
            ..Default::default()
        };
        t.freeze(5);
        t.head = head_of(4000);
        t.freeze(7);
        t.head = head_of(10);
        let before: Vec<(usize, Vec<u8>)> = t
            .frozen
            .iter()
            .map(|(_, h)| (h.approx_bytes(), encoded(h)))
            .collect();
        t.settle(5);
        let (cut, later) = (&t.frozen[0].1, &t.frozen[1].1);
        // The head of the cut keeps what it holds (the block is written from it, queries
        // read it) without the tables that only interning needs: less than two thirds of
        // its memory is left.
        assert_eq!(encoded(cut), before[0].1);
        assert!(
            cut.approx_bytes() * 3 < before[0].0 * 2,
            "{} of {} bytes left",
            cut.approx_bytes(),
            before[0].0
        );
        assert_eq!(cut.path(5000), head_of(5000).path(5000));
        // A head cut later still takes records: untouched.
        assert_eq!(later.approx_bytes(), before[1].0);
        assert_eq!(encoded(later), before[1].1);
        let mut again = head_of(4000);
        let l = again.location_sym(0).cloned().unwrap();
        assert_eq!(t.frozen[1].1.location(l.clone()), again.location(l));
    }
}
