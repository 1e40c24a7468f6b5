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

    /// The sum, without the frames that hold no value (profiles outside the range used
    /// them), compacted in place (a copy was a second set of fresh pages for a cold query).
    /// Names no frame uses stay: harmless to every reader of a merge.
    fn finish(self) -> Merged {
        let mut m = self.out;
        // Per frame, 1 when it or a descendant holds a value; then its new id plus one.
        let mut new_id: Vec<u32> = m.self_values.iter().map(|v| u32::from(*v != 0)).collect();
        for f in (1..new_id.len()).rev() {
            if new_id[f] != 0 {
                new_id[m.frames[f].0 as usize] = 1;
            }
        }
        new_id[0] = 1;
        m.total = m.self_values[0];
        let mut next = 1usize;
        for f in 1..m.frames.len() {
            if new_id[f] == 0 {
                continue;
            }
            // `next <= f`: frames move only towards the front, parents before children.
            let (parent, name) = m.frames[f];
            let v = m.self_values[f];
            m.frames[next] = (new_id[parent as usize] - 1, name);
            m.self_values[next] = v;
            m.total = m.total.saturating_add(v);
            new_id[f] = next as u32 + 1;
            next += 1;
        }
        m.frames.truncate(next);
        m.self_values.truncate(next);
        m
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
        // Sized once for every frame and name of the chunks: growing the table as chunks
        // came rehashed it (a tenth of a cold hour's time); the arrays' unused tail is never
        // touched, so never paged in.
        let frames: usize = chunks.iter().map(|c| c.frames.len()).sum();
        let names: usize = chunks.iter().map(|c| c.name_count()).sum();
        sum.frame_ids.reserve(frames);
        sum.name_ids.reserve(names);
        sum.out.frames.reserve(frames);
        sum.out.self_values.reserve(frames);
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
