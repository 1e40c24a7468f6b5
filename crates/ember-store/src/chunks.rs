//! Time chunks of a block section: per service and ten-minute window, the profiles of its
//! series folded onto the frame names they use, each chunk compressed on its own, so a narrow
//! read decodes only the rows of the service and time range it selects.
//!
//! Owns the narrow read of a block. A section of a closed day holds a whole day of a service
//! (8,640 profiles of ~650 stacks, some 365k distinct stacks on a high-churn day); a flame
//! graph of one hour inside it used to decode the whole section (its symbol tables, its stack
//! tree, every profile) and fold it onto frames: 150-300 ms cold, most of it allocating and
//! zeroing memory for what the hour does not need. The section's rollup ([`crate::rollup`])
//! answers only for the whole section. A chunk holds the profiles of one aligned ten-minute
//! window of the series of one service (`service_name`) with its own frame-name tree (only
//! the frames those profiles use) and names, so an hour reads six or seven chunks, whatever
//! the section's size, and sums the profiles of the selected series it covers (edges
//! included, profile by profile: the answer is the raw one exactly, see `tests/tiers.rs`).
//! Series of one service share their frames (its pods, and the sample types of one profile),
//! so they share a chunk's tree: chunks per series held the same tree up to ten times over
//! on the realistic workload (5 pods, 2 sample types), and the tree and names are nearly all
//! of a chunk.
//!
//! What a narrow read of chunks does not answer goes to the whole section (with its chunks'
//! columns put back): averaged series (a mean is taken per stack node over the query's
//! profiles, not per frame), sample-label filters, and pprof output (chunks name frames, the
//! section's tables hold the locations). Averaged series get no chunks.
//!
//! ```text
//! chunk = names: count, strings (names[0] = ""); frames after the root: count, each frame's
//!         distance to its parent (parents come first), each frame's name index;
//!         stack nodes: count, the section's node ids as ascending deltas, each node's frame;
//!         profiles: count, then per profile (series by series as the index lists them):
//!         entry count, node index deltas (ascending, by node then sample label set), gcd
//!         of its values, values / gcd (zigzag), set id count (0 or the entry count), the
//!         entries' sample label set ids
//! ```
//!
//! The profiles' columns are the section's (blocks of the current format store them only
//! here, `crate::block`): a narrow read maps each entry's node to its frame and adds
//! (a frame can come more than once in a profile), a whole-section read puts the columns
//! back into the section's encoding. Chunks of the fourth format (`EMBERBLK4`) hold no node
//! map: their entries are frames with the profile's sum on each, and the section held the
//! columns.
//!
//! The block index lists each section's chunks (offset, length, and per series it holds:
//! series position and profile count), service by service and in time order within a
//! service, so a service's chunks lie one after another in the file and a read of several is
//! one ranged read.

use crate::block::fold::{LocalNames, SlotSet, put_frames};
use crate::encoding::{Reader, gcd_of, put_divided, put_varint};
use crate::head::{Series, TenantHead};

/// Width of a chunk's window, aligned to the Unix epoch (so to UTC hours and days): a
/// ten-minute window of a 10 s series is 60 profiles, and an hour reads six or seven chunks.
pub(crate) const CHUNK_NANOS: i64 = 600 * 1_000_000_000;

/// Where one chunk is: its bytes in the block and the profiles it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkRef {
    /// Byte offset of the compressed chunk in the block.
    pub(crate) offset: u64,
    /// Its compressed length.
    pub(crate) len: u64,
    /// Profiles in the chunk.
    pub(crate) profiles: u32,
}

/// One series' run of profiles in a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// Position of the chunk in the section's chunk list.
    pub(crate) chunk: u32,
    /// Position of the run's first profile among the series' profiles.
    pub(crate) first: u32,
    /// Profiles in the run.
    pub(crate) count: u32,
    /// Position of the run's first profile among the chunk's profiles.
    pub(crate) at: u32,
}

/// A chunk about to be written: which profiles of which series it holds.
pub(crate) struct Pending<'a> {
    /// `(series position, first profile position, profiles)` per series it holds.
    pub(crate) runs: Vec<(u32, u32, &'a [crate::StoredProfile])>,
}

/// Whether a series of `labels` with `profiles` profiles has its profiles in time chunks
/// (then, in blocks of the current format, only there): every series but an averaged or
/// empty one.
pub(crate) fn holds(labels: &crate::Labels, profiles: usize) -> bool {
    profiles > 0 && !crate::read::averaged_labels(labels)
}

/// The chunks of `series` (the section's, in index order): per service, the profiles of
/// each aligned window, in time order. Averaged series get none.
pub(crate) fn plan<'a>(series: &[&'a Series]) -> Vec<Pending<'a>> {
    let mut services: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, s) in series.iter().enumerate() {
        if !holds(&s.labels, s.profiles.len()) {
            continue;
        }
        let service = s
            .labels
            .iter()
            .find(|(n, _)| n == crate::SERVICE_LABEL)
            .map_or("", |(_, v)| v.as_str());
        services.entry(service).or_default().push(i);
    }
    let window = |p: &crate::StoredProfile| p.time_nanos.div_euclid(CHUNK_NANOS);
    let mut out = Vec::new();
    for members in services.values() {
        // Next profile position of each member series.
        let mut next = vec![0usize; members.len()];
        // The earliest window some member has profiles left in.
        let earliest = |next: &[usize]| {
            members
                .iter()
                .zip(next)
                .filter_map(|(i, n)| series[*i].profiles.get(*n).map(window))
                .min()
        };
        while let Some(w) = earliest(&next) {
            let mut runs = Vec::new();
            for (i, n) in members.iter().zip(&mut next) {
                let profiles = &series[*i].profiles;
                let end = *n + profiles[*n..].partition_point(|p| window(p) == w);
                if end > *n {
                    runs.push((*i as u32, *n as u32, &profiles[*n..end]));
                }
                *n = end;
            }
            out.push(Pending { runs });
        }
    }
    out
}

/// Buffers the writer reuses from chunk to chunk (sized to the head's nodes and frames once).
#[derive(Default)]
pub(crate) struct ChunkWriter {
    /// The head's stack nodes the chunk's profiles use, and the same in ascending order.
    used: SlotSet,
    nodes: Vec<u32>,
    /// Per head node, its position in `nodes` (meaningful for the chunk's nodes only).
    local: Vec<u32>,
    /// The head frames the chunk keeps (its nodes' frames and their ancestors).
    kept_set: SlotSet,
    kept: Vec<u32>,
    /// Per head frame, its id in the chunk being written (0: the root, or not in it).
    new_id: Vec<u32>,
    names: LocalNames,
}

impl ChunkWriter {
    /// Encodes `chunk` into `out` (cleared first), in the current format: frames, the map
    /// from the chunk's stack nodes to them, and each profile's columns as the section held
    /// them before (node ids, values, sample label set ids; see the module's format).
    pub(crate) fn encode(&mut self, head: &TenantHead, chunk: &Pending<'_>, out: &mut Vec<u8>) {
        let (frames, nodes) = (head.frame_count(), head.node_count());
        self.used.reserve_slots(nodes);
        self.kept_set.reserve_slots(frames);
        if self.new_id.len() < frames {
            self.new_id.resize(frames, 0);
        }
        if self.local.len() < nodes {
            self.local.resize(nodes, 0);
        }
        out.clear();
        let profiles = || chunk.runs.iter().flat_map(|r| r.2.iter());
        for p in profiles() {
            for &n in &p.nodes {
                self.used.insert(n);
            }
        }
        self.nodes.clear();
        let (ordered, local) = (&mut self.nodes, &mut self.local);
        self.used.drain(|n| {
            local[n as usize] = ordered.len() as u32;
            ordered.push(n);
        });
        // The nodes' frames and their ancestors, in head order (parents come first there).
        for &n in &self.nodes {
            let mut f = head.frame_of(n);
            while f != 0 && self.kept_set.insert(f) {
                f = head.frame_parent(f);
            }
        }
        self.kept.clear();
        let (kept, new_id) = (&mut self.kept, &mut self.new_id);
        self.kept_set.drain(|f| {
            kept.push(f);
            new_id[f as usize] = kept.len() as u32;
        });
        put_frames(out, head, kept, new_id, &mut self.names);
        put_varint(out, self.nodes.len() as u64);
        let mut last = 0u32;
        for &n in &self.nodes {
            put_varint(out, u64::from(n - last));
            last = n;
        }
        for &n in &self.nodes {
            put_varint(out, u64::from(new_id[head.frame_of(n) as usize]));
        }
        put_varint(out, profiles().count() as u64);
        for p in profiles() {
            put_varint(out, p.nodes.len() as u64);
            // Entries are sorted by node (then set), so local ids ascend; wrapping deltas
            // keep any other order readable.
            let mut last = 0u32;
            for &n in &p.nodes {
                let i = local[n as usize];
                put_varint(out, u64::from(i.wrapping_sub(last)));
                last = i;
            }
            let g = gcd_of(p.values.iter().copied());
            put_varint(out, g as u64);
            put_divided(out, p.values.iter().copied(), g);
            put_varint(out, p.sets.len() as u64);
            p.sets.iter().for_each(|s| put_varint(out, u64::from(*s)));
        }
        for f in kept.iter() {
            new_id[*f as usize] = 0;
        }
    }
}

/// A chunk, decoded: its names and frame tree, and its profiles' entries left encoded (read
/// as they are summed, [`Chunk::for_each_entry`]). Decoding every entry into arrays took
/// more memory than the bytes themselves (12 bytes an entry against about 2), and a cold
/// query's time went to the kernel zeroing the fresh pages.
#[derive(Debug)]
pub(crate) struct Chunk {
    /// The decompressed chunk.
    bytes: Vec<u8>,
    /// Byte range of each name in `bytes` (checked UTF-8); `names[0]` is "".
    names: Vec<(u32, u32)>,
    /// `(parent, name)` of each frame, parents first; frame 0 is the root.
    pub(crate) frames: Vec<(u32, u32)>,
    /// Per stack node of the chunk, the section's node id and the chunk's frame; empty in
    /// chunks of the fourth format (their entries are frames).
    node_ids: Vec<u32>,
    node_frames: Vec<u32>,
    /// Whether entries are stack nodes with values and set ids (this format) rather than
    /// frames with values (the fourth).
    columns: bool,
    /// The largest sample label set id of its entries (0 when none).
    max_set: u32,
    /// Where each profile's entries start in `bytes` (one more than profiles).
    starts: Vec<u32>,
}

impl Chunk {
    /// Decodes a chunk of `profiles` profiles (every entry checked), of this format
    /// (`columns`) or the fourth; `None` when malformed.
    pub(crate) fn decode(bytes: Vec<u8>, profiles: usize, columns: bool) -> Option<Chunk> {
        let mut r = Reader::new(&bytes);
        let n = r.count()?;
        let mut names = Vec::with_capacity(n);
        for _ in 0..n {
            let s = r.str()?;
            let end = u32::try_from(r.position()).ok()?;
            names.push((end - s.len() as u32, end));
        }
        if names.first().is_none_or(|(a, b)| a != b) {
            return None;
        }
        let n_frames = r.count()?;
        let mut frames = Vec::with_capacity(n_frames + 1);
        frames.push((0u32, 0u32));
        for i in 0..n_frames {
            let d = r.u32()?;
            let id = i as u32 + 1;
            // Parents come first: the distance is at least 1 and reaches at most the root.
            frames.push((id.checked_sub(d).filter(|_| d >= 1)?, 0));
        }
        for f in frames.iter_mut().skip(1) {
            f.1 = r.u32().filter(|n| (*n as usize) < names.len())?;
        }
        let (mut node_ids, mut node_frames) = (Vec::new(), Vec::new());
        if columns {
            let n = r.count()?;
            node_ids.reserve_exact(n);
            let mut last = 0u32;
            for _ in 0..n {
                last = last.checked_add(r.u32()?)?;
                node_ids.push(last);
            }
            node_frames = r.column(n, |r| r.u32().filter(|f| (*f as usize) < frames.len()))?;
        }
        // Entries index nodes in this format, frames in the fourth.
        let targets = if columns {
            node_ids.len()
        } else {
            frames.len()
        };
        if r.count()? != profiles {
            return None;
        }
        let mut starts = Vec::with_capacity(profiles + 1);
        let mut max_set = 0u32;
        for _ in 0..profiles {
            starts.push(u32::try_from(r.position()).ok()?);
            let k = r.count()?;
            let mut last = 0u32;
            for _ in 0..k {
                last = if columns {
                    last.wrapping_add(r.u32()?)
                } else {
                    last.checked_add(r.u32()?)?
                };
                if last as usize >= targets {
                    return None;
                }
            }
            i64::try_from(r.varint()?).ok()?;
            for _ in 0..k {
                r.signed()?;
            }
            if columns {
                let s = r.count()?;
                if s != 0 && s != k {
                    return None;
                }
                for _ in 0..s {
                    max_set = max_set.max(r.u32()?);
                }
            }
        }
        starts.push(u32::try_from(r.position()).ok()?);
        r.at_end().then_some(Chunk {
            bytes,
            names,
            frames,
            node_ids,
            node_frames,
            columns,
            max_set,
            starts,
        })
    }

    /// Approximate heap bytes (for the cache's budget).
    pub(crate) fn approx_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.names.capacity() * 8
            + self.frames.capacity() * 8
            + (self.node_ids.capacity() + self.node_frames.capacity()) * 4
            + self.starts.capacity() * 4
    }

    /// The largest of the section's stack nodes its entries use (`None`: none, or a chunk
    /// of the fourth format).
    pub(crate) fn max_node(&self) -> Option<u32> {
        self.node_ids.last().copied()
    }

    /// The largest sample label set id of its entries (0 when none).
    pub(crate) fn max_set(&self) -> u32 {
        self.max_set
    }

    /// Number of names; [`Chunk::name`] takes `0..name_count()`.
    pub(crate) fn name_count(&self) -> usize {
        self.names.len()
    }

    /// The names from the root down to frame `f`, joined by `;` (tests compare chunks by
    /// these paths).
    #[cfg(test)]
    pub(crate) fn path(&self, mut f: u32) -> String {
        let mut names = Vec::new();
        while f != 0 {
            let (parent, name) = self.frames[f as usize];
            names.push(self.name(name as usize).to_string());
            f = parent;
        }
        names.reverse();
        names.join(";")
    }

    /// Name `i` ("" out of range).
    pub(crate) fn name(&self, i: usize) -> &str {
        self.names
            .get(i)
            .and_then(|&(a, b)| self.bytes.get(a as usize..b as usize))
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// Calls `f(frame, value)` for every entry of the chunk's profiles at positions `range`
    /// (checked at decode: frames are in range). A frame can come more than once in one
    /// profile (several of its stack nodes): callers add.
    pub(crate) fn for_each_entry(
        &self,
        range: std::ops::Range<usize>,
        mut f: impl FnMut(u32, i64),
    ) {
        let lo = self.starts.get(range.start).copied().unwrap_or(0) as usize;
        let hi = self.starts.get(range.end).copied().unwrap_or(0) as usize;
        let mut r = Reader::new(self.bytes.get(lo..hi.max(lo)).unwrap_or(&[]));
        while !r.at_end() {
            let Some(k) = r.count() else { return };
            // Ids first, then the gcd and values: ids are read again from `ids_at`.
            let ids_at = r.clone();
            for _ in 0..k {
                r.varint();
            }
            let g = r.varint().and_then(|g| i64::try_from(g).ok()).unwrap_or(1);
            let mut ids = ids_at;
            let mut last = 0u32;
            for _ in 0..k {
                last = last.wrapping_add(ids.u32().unwrap_or(0));
                let v = r.signed().unwrap_or(0).saturating_mul(g);
                let frame = if self.columns {
                    self.node_frames.get(last as usize).copied().unwrap_or(0)
                } else {
                    last
                };
                f(frame, v);
            }
            if self.columns {
                for _ in 0..r.count().unwrap_or(0) {
                    r.varint();
                }
            }
        }
    }

    /// Profile `j`'s columns as the section held them: its entries' stack nodes (the
    /// section's ids), values and sample label set ids (none when it has none). Only chunks
    /// of this format hold them: `false` for the fourth, or `j` out of range.
    pub(crate) fn profile_columns(&self, j: usize, p: &mut crate::StoredProfile) -> bool {
        p.nodes.clear();
        p.values.clear();
        p.sets.clear();
        let (Some(&lo), Some(&hi)) = (self.starts.get(j), self.starts.get(j + 1)) else {
            return false;
        };
        if !self.columns {
            return false;
        }
        let mut r = Reader::new(self.bytes.get(lo as usize..hi as usize).unwrap_or(&[]));
        let k = r.count().unwrap_or(0);
        let mut last = 0u32;
        for _ in 0..k {
            last = last.wrapping_add(r.u32().unwrap_or(0));
            p.nodes
                .push(self.node_ids.get(last as usize).copied().unwrap_or(0));
        }
        let g = r.varint().and_then(|g| i64::try_from(g).ok()).unwrap_or(1);
        for _ in 0..k {
            p.values.push(r.signed().unwrap_or(0).saturating_mul(g));
        }
        for _ in 0..r.count().unwrap_or(0) {
            p.sets.push(r.u32().unwrap_or(0));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_it_encodes_and_refuses_corrupt_bytes() {
        let mut head = TenantHead::new();
        // Two series of one service (two pods), a third of another service; the first
        // two share a window, the second's later profile starts a second window.
        let put = |head: &mut TenantHead, service: &str, pod: &str, t: i64, v: i64| {
            let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
            b.add_folded_stack(&["main", "work"], &[v]);
            b.add_folded_stack(&["main", "idle"], &[5]);
            let bytes = ember_pprof::encode(&b.build());
            let raw =
                ember_pprof::decompress(&bytes, &ember_pprof::DecodeLimits::default()).unwrap();
            let view = ember_pprof::ProfileView::parse(&raw).unwrap();
            let labels = vec![vec![
                ("pod".to_string(), pod.to_string()),
                ("service_name".to_string(), service.to_string()),
            ]];
            crate::apply::apply_to(head, t, 0, &view, labels);
        };
        put(&mut head, "a", "p1", 1, 10);
        put(&mut head, "a", "p2", 2, 20);
        put(&mut head, "a", "p2", CHUNK_NANOS + 3, 30);
        put(&mut head, "b", "p1", 4, 40);
        let series: Vec<&Series> = head.all_series().collect();
        let planned = plan(&series);
        // Service a: window 0 (two series), window 1; service b: window 0.
        let shape: Vec<Vec<(u32, u32, usize)>> = planned
            .iter()
            .map(|c| c.runs.iter().map(|r| (r.0, r.1, r.2.len())).collect())
            .collect();
        let (p1, p2, b) = (0, 1, 2);
        assert_eq!(
            shape,
            vec![
                vec![(p1, 0, 1), (p2, 0, 1)],
                vec![(p2, 1, 1)],
                vec![(b, 0, 1)]
            ]
        );
        let mut w = ChunkWriter::default();
        let mut bytes = Vec::new();
        w.encode(&head, &planned[0], &mut bytes);
        let chunk = Chunk::decode(bytes.clone(), 2, true).unwrap();
        let path = |f: u32| chunk.path(f);
        for (profile, work) in [(0, 10), (1, 20)] {
            let mut got = Vec::new();
            chunk.for_each_entry(profile..profile + 1, |f, v| got.push((path(f), v)));
            got.sort();
            assert_eq!(
                got,
                vec![
                    ("main;idle".to_string(), 5),
                    ("main;work".to_string(), work)
                ]
            );
        }
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            assert!(Chunk::decode(bytes[..cut].to_vec(), 2, true).is_none());
        }
        assert!(Chunk::decode(bytes.clone(), 3, true).is_none());
        // Flipped bytes: refused or read without a panic.
        for b in crate::encoding::flipped(&bytes, 0x2545_f491_4f6c_dd1d, 3000) {
            if let Some(c) = Chunk::decode(b, 2, true) {
                c.for_each_entry(0..2, |f, _| assert!((f as usize) < c.frames.len()));
                for i in 0..c.name_count() {
                    let _ = c.name(i);
                }
            }
        }
    }
}
