//! Pre-merged flame graphs of a block section: per series, the sum of all its profiles folded
//! onto frame names, written next to the section when the block is written.
//!
//! Owns the one shortcut of wide reads. A flame graph of a day reads every profile of the day
//! (8,640 profiles of ~650 stacks for one service) and folds their stacks onto frames; a
//! block's rollup has done that once, at flush or compaction, per series. A query whose time
//! range covers all of a section's profiles of the series it selects reads the rollup instead
//! of decoding the section: one frame tree and one `(frame, value)` list per series. The
//! answer is the same sum, added in another order (see `tests/tiers.rs`).
//!
//! A rollup is not used for what it cannot answer: part of a section's time range (the
//! section's time chunks answer that, [`crate::chunks`]), averaged
//! series (their value is a mean over the query's profiles), sample-label filters (it sums
//! every sample), and pprof output (it keeps frame names, not locations).
//!
//! ```text
//! rollup = names: count, strings; frames after the root: count, then each frame's distance
//!          to its parent (frames come parents first), then each frame's name index;
//!          per series of the section's index, in order: 0 (no rollup: averaged) or 1 +
//!          entry count, frame index deltas, values (zigzag)
//! ```

use crate::block::fold::{LocalNames, SlotSums, put_frames};
use crate::encoding::{Reader, put_signed, put_varint};
use crate::head::{Series, TenantHead};
use crate::read::Merged;

/// A section's rollup, decoded.
#[derive(Debug)]
pub(crate) struct Rollup {
    /// Frame names; `names[0]` is "".
    names: Vec<String>,
    /// `(parent, name)` of each frame, parents first; frame 0 is the root.
    frames: Vec<(u32, u32)>,
    /// Per series of the section's index: frames (sorted) and their values, two columns
    /// (12 bytes an entry, not a padded tuple's 16: a week of a busy service holds some 20
    /// million entries); `None` for an averaged series.
    series: Vec<Option<(Vec<u32>, Vec<i64>)>>,
}

/// Encodes the rollup of `series` (the section's series, in index order) of `head`;
/// `sums` is scratch space kept from call to call (sized to the head's frames here).
pub(crate) fn encode(
    head: &TenantHead,
    series: &[&Series],
    out: &mut Vec<u8>,
    sums: &mut SlotSums,
) {
    sums.reserve_slots(head.frame_count());
    // Each series' frames with their sums, in frame order, one after another (`ends`).
    // At most one per entry of the summed profiles: reserved once, not grown by doubling
    // (a busy flush's series hold a million entries).
    let entries: usize = series
        .iter()
        .filter(|s| !crate::read::averaged_labels(&s.labels))
        .flat_map(|s| &s.profiles)
        .map(|p| p.nodes.len())
        .sum();
    let mut frames: Vec<(u32, i64)> = Vec::with_capacity(entries);
    let mut ends: Vec<Option<usize>> = Vec::with_capacity(series.len());
    let mut used = vec![false; head.frame_count()];
    for s in series {
        if crate::read::averaged_labels(&s.labels) {
            ends.push(None);
            continue;
        }
        for p in &s.profiles {
            for (n, v) in p.nodes.iter().zip(&p.values) {
                sums.add(head.frame_of(*n), *v);
            }
        }
        sums.drain(|f, v| {
            used[f as usize] = true;
            frames.push((f, v));
        });
        ends.push(Some(frames.len()));
    }
    write(head, &frames, &ends, &mut used, out);
}

/// Writes a rollup from per-series sums: `frames` holds each series' `(head frame, value)`
/// in ascending frame order, one series after another, `ends[i]` where series `i`'s end
/// (`None`: averaged, no rollup); `used` marks the frames in `frames` (one flag per head
/// frame; ancestors are marked here).
pub(crate) fn write(
    head: &TenantHead,
    frames: &[(u32, i64)],
    ends: &[Option<usize>],
    used: &mut [bool],
    out: &mut Vec<u8>,
) {
    // Ancestors of used frames, then dense ids in head order (parents come first there).
    for f in (1..used.len()).rev() {
        if used[f] {
            used[head.frame_parent(f as u32) as usize] = true;
        }
    }
    let mut new_id = vec![0u32; used.len()];
    let mut kept: Vec<u32> = Vec::new();
    for f in 1..used.len() {
        if used[f] {
            kept.push(f as u32);
            new_id[f] = kept.len() as u32;
        }
    }
    put_frames(out, head, &kept, &new_id, &mut LocalNames::default());
    let mut start = 0;
    for end in ends.iter().copied() {
        let Some(end) = end else {
            put_varint(out, 0);
            continue;
        };
        let own = &frames[start..end];
        start = end;
        put_varint(out, 1 + own.len() as u64);
        let mut last = 0u32;
        for (f, _) in own {
            let id = new_id[*f as usize];
            put_varint(out, u64::from(id - last));
            last = id;
        }
        for (_, v) in own {
            put_signed(out, *v);
        }
    }
}

impl Rollup {
    /// Decodes a rollup of a section with `n_series` indexed series; `None` when malformed.
    pub(crate) fn decode(bytes: &[u8], n_series: usize) -> Option<Rollup> {
        let mut r = Reader::new(bytes);
        let n = r.count()?;
        let names: Vec<String> = r.column(n, |r| Some(r.str()?.to_string()))?;
        if names.first().is_none_or(|n| !n.is_empty()) {
            return None;
        }
        let n_frames = r.count()?;
        let mut frames = Vec::with_capacity(n_frames + 1);
        frames.push((0u32, 0u32));
        let parents = r.column(n_frames, |r| r.u32())?;
        for (i, d) in parents.into_iter().enumerate() {
            let id = i as u32 + 1;
            // Parents come first: the distance is at least 1 and reaches at most the root.
            frames.push((id.checked_sub(d).filter(|_| d >= 1)?, 0));
        }
        for f in frames.iter_mut().skip(1) {
            f.1 = r.u32().filter(|n| (*n as usize) < names.len())?;
        }
        let mut series = Vec::with_capacity(n_series);
        for _ in 0..n_series {
            let k = r.count()?;
            if k == 0 {
                series.push(None);
                continue;
            }
            let mut last = 0u32;
            let ids = r.column(k - 1, |r| {
                last = last.checked_add(r.u32()?)?;
                ((last as usize) < frames.len()).then_some(last)
            })?;
            let values = r.column(k - 1, |r| r.signed())?;
            series.push(Some((ids, values)));
        }
        r.at_end().then_some(Rollup {
            names,
            frames,
            series,
        })
    }

    /// Approximate heap bytes (for the cache's budget).
    pub(crate) fn approx_bytes(&self) -> usize {
        self.names.iter().map(|n| n.len() + 24).sum::<usize>()
            + self.frames.capacity() * 8
            + self
                .series
                .iter()
                .map(|s| {
                    s.as_ref()
                        .map_or(0, |(f, v)| f.capacity() * 4 + v.capacity() * 8)
                        + 48
                })
                .sum::<usize>()
    }

    /// `(parent, name)` of each frame, parents first; frame 0 is the root.
    pub(crate) fn frames(&self) -> &[(u32, u32)] {
        &self.frames
    }

    /// Frame names; `names()[0]` is "".
    pub(crate) fn names(&self) -> &[String] {
        &self.names
    }

    /// The value of the samples ending at each frame, summed over the series at the index
    /// positions `selected` (those without a rollup add nothing).
    pub(crate) fn selves(&self, selected: impl IntoIterator<Item = usize>) -> Vec<i64> {
        let mut values = Vec::new();
        self.selves_into(selected, &mut values);
        values
    }

    /// [`Rollup::selves`] into `values` (cleared first; its allocation is reused).
    pub(crate) fn selves_into(
        &self,
        selected: impl IntoIterator<Item = usize>,
        values: &mut Vec<i64>,
    ) {
        values.clear();
        values.resize(self.frames.len(), 0);
        for i in selected {
            let Some(Some((frames, frame_values))) = self.series.get(i) else {
                continue;
            };
            for (f, v) in frames.iter().zip(frame_values) {
                let e = &mut values[*f as usize];
                *e = e.saturating_add(*v);
            }
        }
    }

    /// Whether series `i` of the index has a rollup (it is not averaged).
    pub(crate) fn has(&self, i: usize) -> bool {
        matches!(self.series.get(i), Some(Some(_)))
    }

    /// The frames of `values` (per frame of this rollup, from [`Rollup::selves`]) as a
    /// merge: frames with a value and their ancestors, renumbered in order, with the names
    /// they use. Profile and series counts are the caller's.
    pub(crate) fn merged_values(&self, values: Vec<i64>) -> Merged {
        let mut out = Merged::default();
        // Frames with a value and their ancestors, renumbered in order.
        let mut keep: Vec<bool> = values.iter().map(|v| *v != 0).collect();
        for f in (1..keep.len()).rev() {
            if keep[f] {
                keep[self.frames[f].0 as usize] = true;
            }
        }
        out.self_values[0] = values[0];
        out.total = values[0];
        let mut new_id = vec![0u32; self.frames.len()];
        let mut name_ids: Vec<u32> = vec![u32::MAX; self.names.len()];
        name_ids[0] = 0;
        out.frames.reserve(keep.iter().filter(|k| **k).count());
        out.self_values.reserve(out.frames.capacity());
        for f in 1..self.frames.len() {
            if !keep[f] {
                continue;
            }
            let (parent, name) = self.frames[f];
            let slot = &mut name_ids[name as usize];
            if *slot == u32::MAX {
                out.names.push(self.names[name as usize].clone());
                *slot = out.names.len() as u32 - 1;
            }
            new_id[f] = out.frames.len() as u32;
            out.frames.push((new_id[parent as usize], *slot));
            out.self_values.push(values[f]);
            out.total = out.total.saturating_add(values[f]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_it_encodes_and_refuses_corrupt_bytes() {
        let mut head = TenantHead::new();
        for (i, service) in ["a", "b"].iter().enumerate() {
            let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
            b.add_folded_stack(&["main", "work"], &[10 + i as i64]);
            b.add_folded_stack(&["main", "idle"], &[5]);
            let bytes = ember_pprof::encode(&b.build());
            let raw =
                ember_pprof::decompress(&bytes, &ember_pprof::DecodeLimits::default()).unwrap();
            let view = ember_pprof::ProfileView::parse(&raw).unwrap();
            let labels = vec![vec![("service_name".to_string(), service.to_string())]];
            crate::apply::apply_to(&mut head, 1 + i as i64, 0, &view, labels);
        }
        let series: Vec<&Series> = head.all_series().collect();
        let mut bytes = Vec::new();
        encode(&head, &series, &mut bytes, &mut SlotSums::default());
        let r = Rollup::decode(&bytes, series.len()).unwrap();
        let m = r.merged_values(r.selves([0, 1]));
        let stacks = m.folded();
        assert_eq!(
            stacks,
            vec![("main;idle".to_string(), 10), ("main;work".to_string(), 21)]
        );
        assert_eq!(m.total, 31);
        let one = r.merged_values(r.selves([1]));
        assert_eq!(one.total, 16);
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(Rollup::decode(&bytes[..cut], series.len()).is_none());
        }
        assert!(Rollup::decode(&bytes, series.len() + 1).is_none());
        // Flipped bytes: an error or a rollup that reads without a panic, never a panic.
        for b in crate::encoding::flipped(&bytes, 0x9e37_79b9_7f4a_7c15, 3000) {
            if let Some(r) = Rollup::decode(&b, series.len()) {
                let _ = r.merged_values(r.selves([0, 1])).folded();
            }
        }
    }
}
