//! A block section's part of a narrow flame graph, from its time chunks ([`crate::chunks`]):
//! the chunks holding the selected series' profiles in range, summed onto one frame tree by
//! `(parent, name)`. What the section holds outside the range is never decoded.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::block::Section;
use crate::head::FastMap;
use crate::read::Merged;
use crate::{PROFILE_TYPE_LABEL, Store, StoreError};

/// Sums chunks into one call tree by frame name (parents first).
struct ChunkSum {
    out: Merged,
    name_ids: FastMap<String, u32>,
    /// Frame id by `(parent << 32) | name`.
    frame_ids: FastMap<u64, u32>,
    /// Per frame of the chunk being added, its id in `out` (reused from chunk to chunk).
    ids: Vec<u32>,
    names: Vec<u32>,
}

impl ChunkSum {
    fn new() -> Self {
        let mut name_ids = FastMap::default();
        name_ids.insert(String::new(), 0);
        ChunkSum {
            out: Merged::default(),
            name_ids,
            frame_ids: FastMap::default(),
            ids: Vec::new(),
            names: Vec::new(),
        }
    }

    /// Adds the profiles at positions `ranges` of `chunk`.
    fn add(&mut self, chunk: &crate::chunks::Chunk, ranges: &[std::ops::Range<usize>]) {
        let out = &mut self.out;
        self.names.clear();
        for i in 0..chunk.name_count() {
            let n = chunk.name(i);
            let id = match self.name_ids.get(n) {
                Some(&id) => id,
                None => {
                    let id = out.names.len() as u32;
                    out.names.push(n.to_string());
                    self.name_ids.insert(n.to_string(), id);
                    id
                }
            };
            self.names.push(id);
        }
        self.ids.clear();
        self.ids.push(0);
        for &(parent, name) in &chunk.frames[1..] {
            let key = (self.ids[parent as usize], self.names[name as usize]);
            let next = out.frames.len() as u32;
            let id = *self
                .frame_ids
                .entry(u64::from(key.0) << 32 | u64::from(key.1))
                .or_insert(next);
            if id == next {
                out.frames.push(key);
                out.self_values.push(0);
            }
            self.ids.push(id);
        }
        let ids = &self.ids;
        for range in ranges {
            chunk.for_each_entry(range.clone(), |f, v| {
                let e = &mut out.self_values[ids[f as usize] as usize];
                *e = e.saturating_add(v);
            });
        }
    }

    /// The sum, without the frames that hold no value (profiles outside the range used them),
    /// and without the names no frame uses.
    fn finish(self) -> Merged {
        let m = self.out;
        let mut keep: Vec<bool> = m.self_values.iter().map(|v| *v != 0).collect();
        for f in (1..keep.len()).rev() {
            if keep[f] {
                keep[m.frames[f].0 as usize] = true;
            }
        }
        let mut out = Merged::default();
        out.self_values[0] = m.self_values[0];
        out.total = m.self_values[0];
        let mut new_id = vec![0u32; m.frames.len()];
        let mut name_ids = vec![u32::MAX; m.names.len()];
        name_ids[0] = 0;
        let kept = keep.iter().filter(|k| **k).count();
        out.frames.reserve(kept);
        out.self_values.reserve(kept);
        for f in 1..m.frames.len() {
            if !keep[f] {
                continue;
            }
            let (parent, name) = m.frames[f];
            let slot = &mut name_ids[name as usize];
            if *slot == u32::MAX {
                *slot = out.names.len() as u32;
                out.names.push(m.names[name as usize].clone());
            }
            new_id[f] = out.frames.len() as u32;
            out.frames.push((new_id[parent as usize], *slot));
            out.self_values.push(m.self_values[f]);
            out.total = out.total.saturating_add(m.self_values[f]);
        }
        out
    }
}

impl Store {
    /// The profiles in `[start, end]` of the series at index positions `selected` of
    /// `section` (all with chunks, none averaged), summed onto frames from the chunks that
    /// hold them.
    pub(super) fn merge_chunks(
        &self,
        section: &Arc<Section>,
        selected: &[usize],
        start: i64,
        end: i64,
    ) -> Result<Merged, StoreError> {
        let (mut profiles, mut series) = (0usize, 0usize);
        let mut types = std::collections::BTreeSet::new();
        // Per chunk to read, the ranges of its profiles to add.
        let mut wanted: BTreeMap<usize, Vec<std::ops::Range<usize>>> = BTreeMap::new();
        for &i in selected {
            let s = &section.series[i];
            let range = s.in_range(start, end);
            if range.is_empty() {
                continue;
            }
            let Some(runs) = section.runs_of(i, range.clone()) else {
                continue;
            };
            profiles += range.len();
            series += 1;
            if let Some((_, v)) = s.labels.iter().find(|(n, _)| n == PROFILE_TYPE_LABEL) {
                types.insert(v.clone());
            }
            for run in runs {
                // The range's profiles within this run, as positions in its chunk.
                let first = run.first as usize;
                let lo = range.start.max(first) - first;
                let hi = range.end.min(first + run.count as usize) - first;
                let at = run.at as usize;
                wanted
                    .entry(run.chunk as usize)
                    .or_default()
                    .push(at + lo..at + hi.max(lo));
            }
        }
        let positions: Vec<usize> = wanted.keys().copied().collect();
        let chunks = self.cache.chunks(&self.objects, section, &positions)?;
        let mut sum = ChunkSum::new();
        // Sized once for every frame of the chunks (consecutive chunks share most of them):
        // growing the table chunk by chunk rehashed it several times per query.
        let frames: usize = chunks.iter().map(|c| c.frames.len()).sum();
        sum.frame_ids.reserve(frames / 2);
        sum.out.frames.reserve(frames / 2);
        sum.out.self_values.reserve(frames / 2);
        for (chunk, ranges) in chunks.iter().zip(wanted.values()) {
            sum.add(chunk, ranges);
        }
        let mut m = sum.finish();
        m.profiles = profiles;
        m.series = series;
        m.profile_types = types;
        Ok(m)
    }
}
