//! Node-limited merges: the frames a call tree cut to `max_nodes` nodes can keep, found
//! without merging every frame of every tier.
//!
//! A week of a busy service is some 18 million frames over a dozen block sections, nearly all
//! of them distinct (deploys rename functions, stacks come and go), and a flame graph shows a
//! thousand. Merging them all by name costs a hash lookup per frame into a table that does
//! not fit any cache, seconds for a week. [`Store::merge_stacks_heavy`] instead walks each
//! tier twice with arrays and a small table:
//!
//! 1. *Candidates.* A frame the cut can keep has a merged total at least `τ`, the
//!    `max_nodes`-th largest merged total; so in at least one of the `k` tiers its total is
//!    at least `τ / k`. Any tier's own `max_nodes`-th largest total is a lower bound `L` of
//!    `τ` (merged totals only add, values being non-negative), so every frame whose total in
//!    some tier reaches `L / k` is a candidate, with its ancestors (`k` is the number of
//!    tiers the query may read, known before the first). `L` grows as tiers arrive, so
//!    early tiers offer a few more candidates than needed. This pass runs as each tier
//!    arrives, while the next rollups are decoded on two other threads.
//! 2. *Exact values.* Every tier is read again, on two threads, and each frame under a
//!    candidate is looked up in the candidates' table: candidates get their exact merged
//!    total and the total of their children, hence their self value. Pass 1 keeps what this
//!    pass needs of each rollup packed (`read/packed.rs`: parent, shared name id and total
//!    in about 6 bytes a frame, against 20 and more decoded) within half of the cache's
//!    budget, and lets the rollup go; only rollups beyond that share are read again (from
//!    the cache when it still has them), so a cold week is decoded once (28 of its 32
//!    rollups packed, 65 MB) and memory stays bounded by the cache and a half.
//!
//! The result holds the candidates with exact self values and, per candidate, the total of
//! what lies below it outside the candidates (`Merged::rest`), so a heaviest-first cut of it
//! keeps the same frames with the same totals, selves and `other` children as a cut of the
//! full merge: everything outside has a total below `L ≤ τ`. Negative values (diffs) break
//! the bound: then the tiers are merged in full.

use std::borrow::Cow;
use std::sync::Arc;

use crate::block::Section;
use crate::head::FastMap;
use crate::read::packed::Packed;
use crate::read::sums::{NodeSums, SPARSE_RATIO, compact_frames, sum_nodes};
use crate::read::{BlockPart, Merged, Query, RolledSeries};
use crate::rollup::Rollup;
use crate::{PROFILE_TYPE_LABEL, Store};

/// One tier's share of a merge.
#[derive(Clone)]
pub(crate) enum Part {
    /// A head, or a section read in full, summed onto frames.
    Merged(Merged),
    /// A section's rollup and the index positions of the selected series; `meta` carries
    /// their profile and series counts and profile types (its frames are empty). `rollup`
    /// is `None` once let go between the passes of a node-limited merge (read again from
    /// the section, through the cache, when needed).
    Rollup {
        section: Arc<Section>,
        rollup: Option<Arc<Rollup>>,
        series: Vec<usize>,
        meta: Merged,
    },
}

impl Part {
    /// The part of `series` (all with a rollup) of `rollup`.
    pub(crate) fn rollup(
        section: &Arc<Section>,
        rollup: &Arc<Rollup>,
        series: &[RolledSeries<'_>],
    ) -> Part {
        let mut meta = Merged::default();
        for &(_, labels, profiles) in series {
            if profiles > 0 {
                meta.profiles += profiles;
                meta.series += 1;
                if let Some((_, v)) = labels.iter().find(|(n, _)| n == PROFILE_TYPE_LABEL) {
                    meta.profile_types.insert(v.clone());
                }
            }
        }
        Part::Rollup {
            section: section.clone(),
            rollup: Some(rollup.clone()),
            series: series.iter().map(|s| s.0).collect(),
            meta,
        }
    }

    /// Profiles merged into this part.
    pub(crate) fn profiles(&self) -> usize {
        self.meta().profiles
    }

    fn meta(&self) -> &Merged {
        match self {
            Part::Merged(m) => m,
            Part::Rollup { meta, .. } => meta,
        }
    }

    /// The part as a merge of its own. A rollup let go between passes must be read again
    /// first ([`Part::reload`]): without it only the counts remain.
    pub(crate) fn into_merged(self) -> Merged {
        match self {
            Part::Merged(m) => m,
            Part::Rollup {
                rollup: None, meta, ..
            } => meta,
            Part::Rollup {
                rollup: Some(rollup),
                series,
                meta,
                ..
            } => {
                let mut m = rollup.merged_values(rollup.selves(series));
                m.profiles = meta.profiles;
                m.series = meta.series;
                m.profile_types = meta.profile_types;
                m
            }
        }
    }

    /// `(parent, name)` per frame, parents first.
    fn frames(&self) -> &[(u32, u32)] {
        match self {
            Part::Merged(m) => &m.frames,
            Part::Rollup { rollup, .. } => rollup.as_ref().map_or(&[], |r| r.frames()),
        }
    }

    fn names(&self) -> &[String] {
        match self {
            Part::Merged(m) => &m.names,
            Part::Rollup { rollup, .. } => rollup.as_ref().map_or(&[], |r| r.names()),
        }
    }

    /// Per frame into `t` (its allocation reused: freeing tens of megabytes a tier costs
    /// the whole process a TLB shootdown each time), the value of the samples ending at it or
    /// below it; `false` when a sample's value is negative (then totals do not shrink going
    /// down, and the cut's bound fails).
    fn totals_into(&self, t: &mut Vec<i64>) -> bool {
        match self {
            Part::Merged(m) => {
                t.clear();
                t.extend_from_slice(&m.self_values);
                t.resize(m.frames.len(), 0);
            }
            Part::Rollup {
                rollup: Some(rollup),
                series,
                ..
            } => rollup.selves_into(series.iter().copied(), t),
            Part::Rollup { rollup: None, .. } => t.clear(),
        }
        if t.iter().any(|v| *v < 0) {
            return false;
        }
        // Parents come first: one reverse pass folds every value into its parent.
        let frames = self.frames();
        for f in (1..frames.len()).rev() {
            let p = frames[f].0 as usize;
            t[p] = t[p].saturating_add(t[f]);
        }
        true
    }
}

impl Part {
    /// Lets go of the rollup unless `held` (bytes of rollups the parts hold so far) stays
    /// within `limit` (what half of the cache's budget leaves beside the packed parts, see
    /// [`Packed`]). Beyond, rollups are read again in pass 2 (from the cache when it still
    /// has them), so a week's query holds at most the cache's budget and a half more. A
    /// rollup the cache holds now is let go too: the cache may drop it for the next tier's,
    /// and a part holding it would then keep it alive outside the cache's budget (which let
    /// a week's query hold every rollup of the week at once).
    fn release(&mut self, held: &mut usize, limit: usize) {
        if let Part::Rollup { rollup, .. } = self
            && let Some(r) = rollup
        {
            let bytes = r.approx_bytes();
            if *held + bytes > limit {
                *rollup = None;
            } else {
                *held += bytes;
            }
        }
    }

    /// Lets go of the rollup for good: pass 2 reads the part's packed frames instead.
    fn forget_rollup(&mut self) {
        if let Part::Rollup { rollup, .. } = self {
            *rollup = None;
        }
    }

    /// [`Part::reloaded`], taking the part.
    fn reload(self, store: &Store) -> Option<Part> {
        match self {
            Part::Rollup { rollup: None, .. } => self.reloaded(store).map(Cow::into_owned),
            _ => Some(self),
        }
    }

    /// This part with its rollup read again if it was let go (`None` when it can no longer
    /// be read: its block was compacted away meanwhile).
    fn reloaded(&self, store: &Store) -> Option<Cow<'_, Part>> {
        match self {
            Part::Rollup {
                section,
                rollup: None,
                series,
                meta,
            } => {
                let r = store.cache.rollup(&store.objects, section).ok()??;
                Some(Cow::Owned(Part::Rollup {
                    section: section.clone(),
                    rollup: Some(r),
                    series: series.clone(),
                    meta: meta.clone(),
                }))
            }
            _ => Some(Cow::Borrowed(self)),
        }
    }
}

/// A lower bound of the `n`-th largest total of the frames after the root (0 when there are
/// fewer than `n`): the largest power of two that at least `n` totals reach. One pass, no
/// sort; at most a factor of two below the exact value.
fn nth_largest_floor(totals: &[i64], n: usize) -> i64 {
    let mut by_bits = [0usize; 64];
    for &t in totals.iter().skip(1).filter(|t| **t > 0) {
        by_bits[63 - t.leading_zeros() as usize] += 1;
    }
    let mut reached = 0;
    for bit in (0..63).rev() {
        reached += by_bits[bit];
        if reached >= n {
            return 1i64 << bit;
        }
    }
    0
}

const NONE: u32 = u32::MAX;

/// The candidates: frames of the merged tree by `(parent, name)`, parents first.
struct Candidates {
    names: Vec<String>,
    name_ids: FastMap<String, u32>,
    frames: Vec<(u32, u32)>,
    /// Candidate id by `(parent << 32) | name`.
    ids: FastMap<u64, u32>,
}

impl Candidates {
    fn new() -> Self {
        let mut c = Candidates {
            names: vec![String::new()],
            name_ids: FastMap::default(),
            frames: vec![(0, 0)],
            ids: FastMap::default(),
        };
        c.name_ids.insert(String::new(), 0);
        c
    }

    /// The shared name ids of a part's names.
    fn name_ids(&mut self, names: &[String]) -> Vec<u32> {
        names
            .iter()
            .map(|n| match self.name_ids.get(n) {
                Some(id) => *id,
                None => {
                    let id = self.names.len() as u32;
                    self.names.push(n.clone());
                    self.name_ids.insert(n.clone(), id);
                    id
                }
            })
            .collect()
    }

    /// Adds the frames of a part whose total reaches `threshold` (and so do their parents).
    fn offer(
        &mut self,
        frames: &[(u32, u32)],
        names: &[u32],
        totals: &[i64],
        threshold: i64,
        ids: &mut Vec<u32>,
    ) {
        ids.clear();
        ids.resize(frames.len(), NONE);
        ids[0] = 0;
        for (f, &(parent, name)) in frames.iter().enumerate().skip(1) {
            let p = ids[parent as usize];
            if p == NONE || totals[f] < threshold {
                continue;
            }
            let key = u64::from(p) << 32 | u64::from(names[name as usize]);
            let next = self.frames.len() as u32;
            let id = *self.ids.entry(key).or_insert(next);
            if id == next {
                self.frames.push((p, names[name as usize]));
            }
            ids[f] = id;
        }
    }

    /// Adds a part's totals to the candidates it holds: per candidate, its own total and
    /// the totals of all its children in the part (candidates or not). A frame's self value
    /// is its total less its children's, so the two give exact selves and what is left out.
    fn add_exact(&self, part: &PartFrames<'_>, exact: &mut [Exact], ids: &mut Vec<u32>) {
        let PartFrames {
            frames,
            names,
            totals,
        } = *part;
        ids.clear();
        ids.resize(frames.len(), NONE);
        ids[0] = 0;
        if let Some(t) = totals.first() {
            exact[0].total = exact[0].total.saturating_add(*t);
        }
        for (f, &(parent, name)) in frames.iter().enumerate().skip(1) {
            let p = ids[parent as usize];
            if p == NONE {
                continue;
            }
            let c = &mut exact[p as usize].children;
            *c = c.saturating_add(totals[f]);
            let key = u64::from(p) << 32 | u64::from(names[name as usize]);
            if let Some(&id) = self.ids.get(&key) {
                ids[f] = id;
                let e = &mut exact[id as usize].total;
                *e = e.saturating_add(totals[f]);
            }
        }
    }
}

impl Candidates {
    /// [`Candidates::add_exact`] of a part kept packed from pass 1.
    fn add_exact_packed(&self, part: &Packed, exact: &mut [Exact], ids: &mut Vec<u32>) {
        ids.clear();
        ids.resize(part.frames, NONE);
        ids[0] = 0;
        exact[0].total = exact[0].total.saturating_add(part.root);
        part.for_each(|f, parent, name, total| {
            let p = ids[parent];
            if p == NONE {
                return;
            }
            let c = &mut exact[p as usize].children;
            *c = c.saturating_add(total);
            let key = u64::from(p) << 32 | u64::from(name);
            if let Some(&id) = self.ids.get(&key) {
                ids[f] = id;
                let e = &mut exact[id as usize].total;
                *e = e.saturating_add(total);
            }
        });
    }
}

/// What pass 2 reads of one part: frames, their names' shared ids, their totals.
#[derive(Clone, Copy)]
struct PartFrames<'a> {
    frames: &'a [(u32, u32)],
    names: &'a [u32],
    totals: &'a [i64],
}

/// A candidate's merged total, and the merged total of all its children.
#[derive(Clone, Copy, Default)]
struct Exact {
    total: i64,
    children: i64,
}

/// A node-limited merge under way: pass 1 runs on each part as it arrives, pass 2 at the end.
struct HeavyMerge {
    max_nodes: usize,
    /// Tiers the query may read (the bound is divided among them).
    tiers: i64,
    bound: i64,
    cands: Candidates,
    /// Per part received, its names' shared ids.
    part_names: Vec<Vec<u32>>,
    /// Per part received, its frame count.
    part_frames: Vec<usize>,
    /// Per part received, its frames packed for pass 2 (rollups, while `packed_bytes` stays
    /// within `pack_budget`); `None` for a part pass 2 reads as it is or reads again.
    packed: Vec<Option<Packed>>,
    packed_bytes: usize,
    pack_budget: usize,
    /// Buffers pass 1 reuses from part to part.
    totals: Vec<i64>,
    ids: Vec<u32>,
    /// A part held a negative value: the bound does not hold.
    negative: bool,
}

impl HeavyMerge {
    /// A merge for a cut to `max_nodes`, keeping at most `pack_budget` bytes of packed parts.
    fn new(max_nodes: usize, pack_budget: usize) -> Self {
        HeavyMerge {
            max_nodes,
            tiers: 1,
            bound: 0,
            cands: Candidates::new(),
            part_names: Vec::new(),
            part_frames: Vec::new(),
            packed: Vec::new(),
            packed_bytes: 0,
            pack_budget,
            totals: Vec::new(),
            ids: Vec::new(),
            negative: false,
        }
    }

    /// Pass 1 on one part: raise the bound, offer the part's frames above `bound / tiers`;
    /// a rollup is packed for pass 2 if `pack` (see [`Store::merge_stacks_heavy`]).
    fn offer(&mut self, part: &Part, pack: bool) {
        let names = self.cands.name_ids(part.names());
        self.part_names.push(names);
        self.part_frames.push(part.frames().len());
        self.packed.push(None);
        if self.negative {
            return;
        }
        let mut totals = std::mem::take(&mut self.totals);
        if !part.totals_into(&mut totals) {
            self.negative = true;
            return;
        }
        self.bound = self.bound.max(nth_largest_floor(&totals, self.max_nodes));
        let names = self.part_names.last().map_or(&[][..], Vec::as_slice);
        let threshold = (self.bound / self.tiers).max(1);
        let ids = &mut self.ids;
        self.cands
            .offer(part.frames(), names, &totals, threshold, ids);
        // A rollup's frames are packed for pass 2 while the budget allows (about 6 bytes a
        // frame, checked before packing); a head's merge is held anyway.
        if pack
            && matches!(part, Part::Rollup { .. })
            && self.packed_bytes + part.frames().len() * 6 <= self.pack_budget
        {
            let packed = Packed::new(part.frames(), names, &totals);
            self.packed_bytes += packed.held();
            if let Some(slot) = self.packed.last_mut() {
                *slot = Some(packed);
            }
        }
        self.totals = totals;
    }

    /// Whether the last part offered was packed (pass 2 no longer needs its rollup).
    fn last_packed(&self) -> bool {
        matches!(self.packed.last(), Some(Some(_)))
    }

    /// Pass 2 over `parts` (those offered, in order), on two threads, rollups let go after
    /// pass 1 read again: the candidates with exact values; `None` when a part held a
    /// negative value, more parts came than tiers, or a rollup could not be read again.
    fn finish(self, parts: &[Part], store: &Store) -> Option<Merged> {
        if self.negative || parts.len() as i64 > self.tiers {
            return None;
        }
        let cands = &self.cands;
        let part_names = &self.part_names;
        let exact_of = |range: std::ops::Range<usize>| -> Option<Vec<Exact>> {
            let mut exact = vec![Exact::default(); cands.frames.len()];
            let (mut totals, mut ids) = (Vec::new(), Vec::new());
            for i in range {
                if let Some(packed) = &self.packed[i] {
                    cands.add_exact_packed(packed, &mut exact, &mut ids);
                    continue;
                }
                let part = parts[i].reloaded(store)?;
                if !part.totals_into(&mut totals) {
                    return None;
                }
                let frames = PartFrames {
                    frames: part.frames(),
                    names: &part_names[i],
                    totals: &totals,
                };
                cands.add_exact(&frames, &mut exact, &mut ids);
            }
            Some(exact)
        };
        // Two halves of about equal frames, one per thread.
        let all: usize = self.part_frames.iter().sum();
        let (mut half, mut seen) = (0, 0);
        while half < parts.len() && seen * 2 < all {
            seen += self.part_frames[half];
            half += 1;
        }
        let exact = std::thread::scope(|scope| {
            let second = scope.spawn(|| exact_of(half..parts.len()));
            let first = exact_of(0..half);
            let second = second
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            let (mut first, second) = (first?, second?);
            for (a, b) in first.iter_mut().zip(second) {
                a.total = a.total.saturating_add(b.total);
                a.children = a.children.saturating_add(b.children);
            }
            Some(first)
        })?;
        // What a candidate's children hold outside the candidates.
        let mut rest: Vec<i64> = exact.iter().map(|e| e.children).collect();
        for (c, &(parent, _)) in self.cands.frames.iter().enumerate().skip(1) {
            let r = &mut rest[parent as usize];
            *r = r.saturating_sub(exact[c].total);
        }
        Some(Merged {
            total: exact[0].total,
            self_values: exact
                .iter()
                .map(|e| e.total.saturating_sub(e.children))
                .collect(),
            frames: self.cands.frames,
            names: self.cands.names,
            rest,
            ..Merged::default()
        })
    }
}

impl Store {
    /// [`Store::for_each_tier`] for merges: each tier in range as a [`Part`], a head
    /// or a section without a usable rollup summed onto frames, a section's rollup as it is.
    /// Tiers without profiles of the selection are skipped.
    pub(super) fn for_each_part(
        &self,
        tenant: &str,
        query: &Query,
        tiers: impl FnOnce(usize),
        f: impl FnMut(Part),
    ) {
        let averaged = self.averaged_counts(tenant, query);
        let f = std::cell::RefCell::new(f);
        self.for_each_tier(
            tenant,
            query,
            tiers,
            |head| {
                let mut out = Merged::default();
                let sums = sum_nodes(head, query, &averaged, &mut out);
                if out.profiles == 0 {
                    return;
                }
                let mut frames = if sums.len().saturating_mul(SPARSE_RATIO) >= head.frame_count() {
                    NodeSums::Dense(vec![0i64; head.frame_count()])
                } else {
                    NodeSums::Sparse(crate::head::FastMap::default())
                };
                for (n, v) in sums {
                    frames.add(head.frame_of(n), v);
                }
                compact_frames(head, frames.into_sorted(), &mut out);
                (f.borrow_mut())(Part::Merged(out));
            },
            Some(|block: BlockPart<'_>| {
                let part = match block {
                    BlockPart::Rollup(section, rollup, series) => {
                        Part::rollup(section, rollup, series)
                    }
                    BlockPart::Chunks(m) => Part::Merged(m),
                };
                if part.profiles() > 0 {
                    (f.borrow_mut())(part);
                }
            }),
        );
    }

    /// Hands each tier's merge of the selection to `f`, one at a time, in no set order: the
    /// open head, sections read in full, section rollups. Their sum is
    /// [`Store::merge_stacks`]; for sums that add up tier by tier (a top table's function
    /// sums) this spares merging the tiers, and holds one tier at a time.
    pub fn for_each_tier_merge(&self, tenant: &str, query: &Query, mut f: impl FnMut(Merged)) {
        let query = &self.within_retention(query);
        self.for_each_part(tenant, query, |_| {}, |p| f(p.into_merged()));
    }

    /// Like [`Store::merge_stacks`], for a call tree cut to `max_nodes` nodes (0 = no limit:
    /// then exactly `merge_stacks`): holds every frame that cut can keep, with its exact
    /// self value, and in [`Merged::rest`] what each frame has below it that is left out.
    /// A heaviest-first cut of this merge (adding `rest` to totals and `other` children) is
    /// the cut of the full merge, at a fraction of its time and memory over wide ranges
    /// (see the module's documentation).
    pub fn merge_stacks_heavy(&self, tenant: &str, query: &Query, max_nodes: usize) -> Merged {
        if max_nodes == 0 {
            return self.merge_stacks(tenant, query);
        }
        let query = &self.within_retention(query);
        let mut parts = Vec::new();
        // Packed parts and held rollups share half of the cache's budget (see `Packed`).
        let share = self.cache.budget() / 2;
        let heavy = std::cell::RefCell::new(HeavyMerge::new(max_nodes, share));
        let mut held = 0;
        // Bytes and count of the decoded rollups seen so far.
        let mut rolled = (0usize, 0usize);
        self.for_each_part(
            tenant,
            query,
            |tiers| heavy.borrow_mut().tiers = tiers.max(1) as i64,
            |mut p| {
                // Packing costs about half of decoding again, and reading packed frames more
                // than reading a decoded rollup: worth it only for a rollup pass 2 would not
                // find in the cache. That is a read whose rollups (estimated from those seen
                // so far, times the tiers) outgrow the cache, and a rollup the cache does not
                // protect (a protected one, read before, stays for pass 2).
                let pack = match &p {
                    Part::Rollup {
                        section,
                        rollup: Some(r),
                        ..
                    } => {
                        rolled.0 += r.approx_bytes();
                        rolled.1 += 1;
                        let tiers = heavy.borrow().tiers.max(1) as usize;
                        rolled.0 / rolled.1 * tiers > self.cache.budget()
                            && !self.cache.holds_protected_rollup(section)
                    }
                    _ => false,
                };
                let mut heavy = heavy.borrow_mut();
                heavy.offer(&p, pack);
                if heavy.last_packed() {
                    p.forget_rollup();
                } else {
                    p.release(&mut held, share.saturating_sub(heavy.packed_bytes));
                }
                parts.push(p);
            },
        );
        let heavy = heavy.into_inner();
        tracing::debug!(
            parts = parts.len(),
            packed = heavy.packed.iter().flatten().count(),
            packed_bytes = heavy.packed_bytes,
            candidates = heavy.cands.frames.len(),
            "node-limited merge: pass 1 done"
        );
        let merged = match parts.len() {
            0 => return Merged::default(),
            1 => parts
                .pop()
                .and_then(|p| p.reload(self))
                .map(Part::into_merged),
            _ => heavy.finish(&parts, self),
        };
        // Negative values, or a block compacted away between the passes: merge in full.
        let Some(mut merged) = merged else {
            return self.merge_stacks(tenant, query);
        };
        if parts.is_empty() {
            return merged;
        }
        for p in &parts {
            let meta = p.meta();
            merged.profiles += meta.profiles;
            merged
                .profile_types
                .extend(meta.profile_types.iter().cloned());
        }
        // A series split by a flush contributed from two tiers; count it once.
        merged.series = self.series(tenant, Some(query)).len();
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_largest_floor_is_a_power_of_two_at_most_the_nth_total() {
        let totals = [100, 40, 9, 8, 7, 1, 0];
        assert_eq!(nth_largest_floor(&totals, 1), 32);
        assert_eq!(nth_largest_floor(&totals, 2), 8);
        assert_eq!(nth_largest_floor(&totals, 4), 4);
        assert_eq!(nth_largest_floor(&totals, 5), 1);
        assert_eq!(nth_largest_floor(&totals, 6), 0);
    }
}
