//! The columnar encoding of a head, as blocks store it: [`TenantHead::encode`] and
//! [`TenantHead::merge_encoded`] with their varint and column helpers.

use super::*;

use crate::encoding::{
    Reader, gcd_of, put_deltas, put_divided, put_labels, put_signed, put_str, put_varint,
};

/// A sample label set as encoded: `(key, value)` string ids.
type LabelSet = Box<[(u32, u32)]>;

/// Tag of the sample-label part of an encoded head.
const SAMPLE_LABELS_TAG: u64 = 1;

impl TenantHead {
    /// Columnar encoding of the whole head: string table; mapping, function and location
    /// tables as one column per field; stack-tree parent and location columns; then per
    /// series its labels, period, a delta-encoded time column, and per profile its sorted
    /// node ids (delta varints), the gcd of its values and the values divided by it (CPU
    /// values are multiples of the period, so this turns 4-byte varints into 1-byte ones).
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_with(out, false);
    }

    /// [`TenantHead::encode`] as a block section of the current format holds it: without
    /// the columns and set ids of the profiles its time chunks hold
    /// ([`crate::chunks::holds`]), which are written there.
    pub(crate) fn encode_section(&self, out: &mut Vec<u8>) {
        self.encode_with(out, true);
    }

    fn encode_with(&self, out: &mut Vec<u8>, chunked: bool) {
        let own = |s: &Series| !(chunked && crate::chunks::holds(&s.labels, s.profiles.len()));
        self.encode_tables(out);
        put_varint(out, self.series.len() as u64);
        for s in &self.series {
            put_labels(out, &s.labels);
            put_signed(out, s.period);
            put_varint(out, s.profiles.len() as u64);
            put_deltas(out, s.profiles.iter().map(|p| p.time_nanos));
            let kept = s.profiles.iter().filter(|_| own(s));
            kept.for_each(|p| Self::put_profile_columns(out, p));
        }
        if self.encode_label_set_table(out) {
            let kept = self.series.iter().filter(|s| own(s));
            kept.flat_map(|s| &s.profiles)
                .for_each(|p| Self::put_profile_sets(out, p));
        }
    }

    /// The part of [`TenantHead::encode`] before the series: string table; mapping, function
    /// and location columns; stack-tree columns.
    pub(crate) fn encode_tables(&self, out: &mut Vec<u8>) {
        put_varint(out, self.strings.len() as u64);
        for s in &self.strings {
            put_str(out, s);
        }
        let m = &self.mappings.items;
        put_varint(out, m.len() as u64);
        m.iter().for_each(|m| put_varint(out, m.start));
        m.iter().for_each(|m| put_varint(out, m.limit));
        m.iter().for_each(|m| put_varint(out, m.offset));
        m.iter().for_each(|m| put_varint(out, m.filename.into()));
        m.iter().for_each(|m| put_varint(out, m.build_id.into()));
        m.iter().for_each(|m| put_varint(out, m.flags.into()));
        let f = &self.functions.items;
        put_varint(out, f.len() as u64);
        f.iter().for_each(|f| put_varint(out, f.name.into()));
        f.iter().for_each(|f| put_varint(out, f.system_name.into()));
        f.iter().for_each(|f| put_varint(out, f.filename.into()));
        f.iter().for_each(|f| put_signed(out, f.start_line));
        let l = &self.locations.items;
        put_varint(out, l.len() as u64);
        l.iter().for_each(|l| put_varint(out, l.mapping.into()));
        let mut prev = 0u64;
        for loc in l {
            put_signed(out, loc.address.wrapping_sub(prev) as i64);
            prev = loc.address;
        }
        l.iter()
            .for_each(|l| put_varint(out, (l.lines.len() as u64) << 1 | u64::from(l.is_folded)));
        l.iter()
            .flat_map(|l| l.lines.iter())
            .for_each(|(f, _)| put_varint(out, (*f).into()));
        l.iter()
            .flat_map(|l| l.lines.iter())
            .for_each(|(_, n)| put_signed(out, *n));
        put_varint(out, self.nodes.len() as u64);
        for (parent, _) in &self.nodes {
            put_varint(out, u64::from(*parent));
        }
        for (_, loc) in &self.nodes {
            put_varint(out, u64::from(*loc));
        }
    }

    /// About the bytes [`TenantHead::encode`] writes, a little more rather than less: what a
    /// block writer reserves before encoding (an encoding buffer grown by doubling copied
    /// the whole encoding twice over and faulted in fresh pages for each copy). Reserved
    /// pages that are never written are never touched.
    pub(crate) fn encoded_size_hint(&self) -> usize {
        let strings: usize = self.strings.iter().map(|s| s.len() + 2).sum();
        let lines: usize = self.locations.items.iter().map(|l| l.lines.len()).sum();
        let mut profiles = 0usize;
        for s in &self.series {
            profiles += 64
                + s.labels
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 4)
                    .sum::<usize>();
            for p in &s.profiles {
                // Count, time and gcd; per entry a node delta and a value (three bytes each
                // at most for nearly all), and a set id when it has sets.
                profiles += 16 + p.nodes.len() * 6 + p.sets.len() * 3;
            }
        }
        strings
            + self.mappings.items.len() * 40
            + self.functions.items.len() * 16
            + self.locations.items.len() * 12
            + lines * 8
            + self.nodes.len() * 8
            + self.label_sets.items.len() * 16
            + profiles
    }

    /// The optional sample-label part, after the series (a head without sample labels
    /// writes nothing, so its encoding is what it was before sample labels were kept):
    /// tag 1; the label sets after the empty set 0, each a pair count and `(key, value)`
    /// string ids; then for every profile in series order its entries' set ids, or 0 when
    /// it has none.
    ///
    /// This writes the tag and the sets and returns `true` (the caller then writes every
    /// profile's ids with [`TenantHead::put_profile_sets`]), or nothing and `false` without sets.
    pub(crate) fn encode_label_set_table(&self, out: &mut Vec<u8>) -> bool {
        if self.label_sets.items.len() <= 1 {
            return false;
        }
        put_varint(out, SAMPLE_LABELS_TAG);
        put_varint(out, self.label_sets.items.len() as u64 - 1);
        for set in &self.label_sets.items[1..] {
            put_varint(out, set.len() as u64);
            for (k, v) in set.iter() {
                put_varint(out, u64::from(*k));
                put_varint(out, u64::from(*v));
            }
        }
        true
    }

    /// Adds everything of an [`TenantHead::encode`]d head to this one (symbols re-interned).
    /// Returns `None` on malformed input (nothing partial is visible to callers' invariants:
    /// profiles are inserted only after their series decoded completely).
    pub fn merge_encoded(&mut self, bytes: &[u8]) -> Option<()> {
        let mut d = Decoded::parse(bytes, false)?;
        let (strings, nodes) = self.merge_tables(&mut d)?;
        let sets = self.merge_label_sets(&strings, d.label_sets.iter().map(|s| &s[..]))?;
        for (labels, period, profiles) in d.series {
            for mut p in profiles {
                Self::remap_profile(&mut p, &nodes, &sets);
                self.insert_with_period(labels.clone(), p, period);
            }
        }
        Some(())
    }

    /// Adds the symbol tables and stack tree of an [`TenantHead::encode`]d head to this one,
    /// not its series (what a streaming compaction holds: `crate::block::merge`). Returns
    /// this head's id of each of its strings and of each of its stack nodes, and the
    /// position in `bytes` where its series start; `None` on malformed tables.
    pub(crate) fn merge_encoded_tables(&mut self, bytes: &[u8]) -> Option<TablesMerged> {
        let mut d = Decoded::parse(bytes, true)?;
        let (strings, nodes) = self.merge_tables(&mut d)?;
        Some(TablesMerged {
            strings,
            nodes,
            series_at: d.ends[4],
        })
    }

    /// Interns the mappings, functions, locations and stack nodes of `d` (taken out of it):
    /// this head's id of each string and of each node of `d`.
    fn merge_tables(&mut self, d: &mut Decoded<'_>) -> Option<(Vec<u32>, Vec<u32>)> {
        let strings: Vec<u32> = d.strings.iter().map(|s| self.intern(s)).collect();
        let sid = |id: u32| -> Option<u32> { strings.get(id as usize).copied() };
        let mut mappings = Vec::with_capacity(d.mappings.len());
        for m in std::mem::take(&mut d.mappings) {
            mappings.push(self.mapping(MappingSym {
                filename: sid(m.filename)?,
                build_id: sid(m.build_id)?,
                ..m
            }));
        }
        let mut functions = Vec::with_capacity(d.functions.len());
        for f in std::mem::take(&mut d.functions) {
            functions.push(self.function(FunctionSym {
                name: sid(f.name)?,
                system_name: sid(f.system_name)?,
                filename: sid(f.filename)?,
                start_line: f.start_line,
            }));
        }
        let mut locations = Vec::with_capacity(d.locations.len());
        for l in std::mem::take(&mut d.locations) {
            let lines: Option<Box<[(u32, i64)]>> = l
                .lines
                .iter()
                .map(|(f, n)| Some((*functions.get(*f as usize)?, *n)))
                .collect();
            let mapping = match l.mapping {
                0 => 0,
                m => *mappings.get(m as usize - 1)? + 1,
            };
            locations.push(self.location(LocationSym {
                mapping,
                lines: lines?,
                ..l
            }));
        }
        let mut nodes: Vec<u32> = Vec::with_capacity(d.nodes.len());
        for (i, &(parent, loc)) in d.nodes.iter().enumerate() {
            let node = if i == 0 {
                0
            } else {
                self.child(nodes[parent as usize], locations[loc as usize])
            };
            nodes.push(node);
        }
        d.nodes = Vec::new();
        Some((strings, nodes))
    }

    /// Interns sample label sets of an encoded head (`(key, value)` ids of its strings,
    /// `strings` mapping them to this head's): this head's id of each of its set ids, the
    /// empty set 0 first. `None` when a string id is out of range.
    pub(crate) fn merge_label_sets<'s>(
        &mut self,
        strings: &[u32],
        label_sets: impl Iterator<Item = &'s [(u32, u32)]>,
    ) -> Option<Vec<u32>> {
        let sid = |id: u32| -> Option<u32> { strings.get(id as usize).copied() };
        let mut sets: Vec<u32> = vec![0];
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for set in label_sets {
            pairs.clear();
            for (k, v) in set.iter() {
                pairs.push((sid(*k)?, sid(*v)?));
            }
            sets.push(self.label_set(&mut pairs));
        }
        Some(sets)
    }

    /// A head holding exactly an [`TenantHead::encode`]d head, for reading only: tables are
    /// taken as they are (ids unchanged, nothing re-interned) and no lookup map is built but
    /// the frame-name tree's, which is dropped at the end. Several times cheaper than
    /// [`TenantHead::merge_encoded`] into an empty head, which is what a query pays for every
    /// block it decodes. `None` on malformed input.
    pub(crate) fn decode_read_only(bytes: &[u8]) -> Option<TenantHead> {
        let d = Decoded::parse(bytes, false)?;
        let mut h = TenantHead::new();
        h.strings = d.strings.iter().map(|s| Box::<str>::from(*s)).collect();
        if h.strings.first().is_none_or(|s| !s.is_empty()) {
            return None;
        }
        h.mappings.items = d.mappings;
        h.functions.items = d.functions;
        let name_of = |f: &FunctionSym| f.name;
        h.location_frames = d
            .locations
            .iter()
            .map(|l| -> Box<[u32]> {
                if l.lines.is_empty() {
                    Box::new([0])
                } else {
                    l.lines
                        .iter()
                        .rev()
                        .map(|(f, _)| h.functions.items.get(*f as usize).map_or(0, name_of))
                        .collect()
                }
            })
            .collect();
        // A location without lines is named by its address, as `TenantHead::location` does;
        // the encoded table already holds those names (the head interned them), so one
        // address is one string id, as it was.
        let mut addresses: HashMap<Box<str>, u32> = h
            .strings
            .iter()
            .enumerate()
            .filter(|(_, s)| s.starts_with("0x"))
            .map(|(i, s)| (s.clone(), i as u32))
            .collect();
        for (i, l) in d.locations.iter().enumerate() {
            if l.lines.is_empty() {
                let name: Box<str> = format!("0x{:x}", l.address).into();
                let next = h.strings.len() as u32;
                let id = *addresses.entry(name.clone()).or_insert(next);
                if id == next {
                    h.strings.push(name);
                }
                h.location_frames[i] = Box::new([id]);
            }
        }
        h.locations.items = d.locations;
        h.nodes = d.nodes;
        h.node_frame = Vec::with_capacity(h.nodes.len());
        h.node_frame.push(0);
        for i in 1..h.nodes.len() {
            let (parent, loc) = h.nodes[i];
            let mut f = h.node_frame[parent as usize];
            for &name in h.location_frames[loc as usize].iter() {
                f = match h.frame_ids.get(&(f, name)) {
                    Some(&id) => id,
                    None => {
                        let id = h.frames.len() as u32;
                        h.frames.push((f, name));
                        h.frame_ids.insert((f, name), id);
                        id
                    }
                };
            }
            h.node_frame.push(f);
        }
        h.frame_ids = FastMap::default();
        h.string_ids = FastMap::default();
        let mut keys: Vec<u32> = d
            .label_sets
            .iter()
            .flat_map(|s| s.iter().map(|p| p.0))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        h.sample_keys = keys;
        h.label_sets.items.extend(d.label_sets);
        for (labels, period, profiles) in d.series {
            for p in profiles {
                h.insert_with_period(labels.clone(), p, period);
            }
        }
        Some(h)
    }
}

/// What [`TenantHead::merge_encoded_tables`] returns: this head's ids of an encoded head's
/// strings and stack nodes, and where its series start.
pub(crate) struct TablesMerged {
    /// This head's id of each string of the encoded head.
    pub(crate) strings: Vec<u32>,
    /// This head's id of each stack node of the encoded head.
    pub(crate) nodes: Vec<u32>,
    /// Position of the series count in the encoding.
    pub(crate) series_at: usize,
}

/// An encoded head parsed into its tables with the block's own ids, every id checked
/// against the table it points into (so consumers may index without checks).
struct Decoded<'a> {
    strings: Vec<&'a str>,
    /// String fields are ids into `strings`.
    mappings: Vec<MappingSym>,
    functions: Vec<FunctionSym>,
    /// `mapping` is a mapping index + 1, `lines` hold function indexes.
    locations: Vec<LocationSym>,
    /// `(parent, location)`; node 0 is the root.
    nodes: Vec<(u32, u32)>,
    /// Labels, period and profiles (node ids of `nodes`, ascending) of each series.
    series: Vec<(Labels, i64, Vec<StoredProfile>)>,
    /// Sample label sets after the empty set 0 (string ids of `strings`); a profile's
    /// `sets` index this list plus one.
    label_sets: Vec<LabelSet>,
    /// Where the strings, mappings, functions, locations, stack tree and series end in the
    /// encoding (the sample-label part runs from the last to the end).
    ends: [usize; 6],
}

impl TenantHead {
    /// Maps a decoded profile's node and set ids (`nodes`, `sets`: this head's id of each id of
    /// its encoded head) and sorts its entries again by node then set: remapped ids lose the
    /// block's order, and sorted ids keep the deltas small. Ids were checked when decoded.
    pub(crate) fn remap_profile(p: &mut StoredProfile, nodes: &[u32], sets: &[u32]) {
        let mut entries: Vec<(u32, u32, i64)> = (0..p.nodes.len())
            .map(|i| {
                (
                    nodes.get(p.nodes[i] as usize).copied().unwrap_or(0),
                    sets.get(p.set(i) as usize).copied().unwrap_or(0),
                    p.values[i],
                )
            })
            .collect();
        entries.sort_unstable();
        p.nodes.clear();
        p.nodes.extend(entries.iter().map(|x| x.0));
        p.values.clear();
        p.values.extend(entries.iter().map(|x| x.2));
        if !p.sets.is_empty() {
            p.sets.clear();
            p.sets.extend(entries.iter().map(|x| x.1));
        }
    }

    /// One profile's columns as [`TenantHead::encode`] writes them: entry count, node ids as
    /// deltas, the gcd of the values and the values divided by it.
    pub(crate) fn put_profile_columns(out: &mut Vec<u8>, p: &StoredProfile) {
        put_varint(out, p.nodes.len() as u64);
        let mut last = 0u32;
        for n in &p.nodes {
            put_varint(out, u64::from(n.wrapping_sub(last)));
            last = *n;
        }
        let g = gcd_of(p.values.iter().copied());
        put_varint(out, g as u64);
        // Exact: g divides every value.
        put_divided(out, p.values.iter().copied(), g);
    }

    /// One profile's sample label set ids, in the sample-label part of an encoded head.
    pub(crate) fn put_profile_sets(out: &mut Vec<u8>, p: &StoredProfile) {
        put_varint(out, p.sets.len() as u64);
        p.sets.iter().for_each(|x| put_varint(out, u64::from(*x)));
    }

    /// Where the strings, mappings, functions, locations and stack tree (so the tables) of
    /// an encoded head end (the first five of [`TenantHead::PART_NAMES`]); `None` when
    /// malformed.
    pub(crate) fn table_ends(bytes: &[u8]) -> Option<[usize; 5]> {
        Decoded::parse(bytes, true).map(|d| [d.ends[0], d.ends[1], d.ends[2], d.ends[3], d.ends[4]])
    }

    /// Names of an encoded head's parts, in order (see [`TenantHead::encoded_parts`]).
    pub(crate) const PART_NAMES: [&'static str; 7] = [
        "strings",
        "mappings",
        "functions",
        "locations",
        "stack tree",
        "series and profile columns",
        "sample label sets and ids",
    ];

    /// The byte ranges of an [`TenantHead::encode`]d head's parts, named by
    /// [`TenantHead::PART_NAMES`] (what a block's bytes are spent on); `None` when malformed.
    pub(crate) fn encoded_parts(bytes: &[u8]) -> Option<Vec<std::ops::Range<usize>>> {
        let d = Decoded::parse(bytes, false)?;
        let mut out = Vec::with_capacity(Self::PART_NAMES.len());
        let mut start = 0;
        for end in d.ends.into_iter().chain([bytes.len()]) {
            out.push(start..end);
            start = end;
        }
        Some(out)
    }
}

impl<'a> Decoded<'a> {
    /// Parses an encoded head; with `tables_only`, only its tables (no series, no sample
    /// labels, and no check that the rest reads).
    fn parse(bytes: &'a [u8], tables_only: bool) -> Option<Decoded<'a>> {
        let mut r = Reader::new(bytes);
        let n_strings = r.count()?;
        let strings = r.column(n_strings, |r| r.str())?;
        let string = |id: u64| -> Option<u32> {
            let id = u32::try_from(id).ok()?;
            ((id as usize) < n_strings).then_some(id)
        };
        let mut ends = [0usize; 6];
        ends[0] = r.position();

        let n = r.count()?;
        let start = r.column(n, Reader::varint)?;
        let limit = r.column(n, Reader::varint)?;
        let offset = r.column(n, Reader::varint)?;
        let filename = r.column(n, Reader::varint)?;
        let build_id = r.column(n, Reader::varint)?;
        let flags = r.column(n, Reader::varint)?;
        let mut mappings = Vec::with_capacity(n);
        for i in 0..n {
            mappings.push(MappingSym {
                start: start[i],
                limit: limit[i],
                offset: offset[i],
                filename: string(filename[i])?,
                build_id: string(build_id[i])?,
                flags: u8::try_from(flags[i]).ok()?,
            });
        }
        ends[1] = r.position();

        let n = r.count()?;
        let name = r.column(n, Reader::varint)?;
        let system_name = r.column(n, Reader::varint)?;
        let filename = r.column(n, Reader::varint)?;
        let start_line = r.column(n, Reader::signed)?;
        let mut functions = Vec::with_capacity(n);
        for i in 0..n {
            functions.push(FunctionSym {
                name: string(name[i])?,
                system_name: string(system_name[i])?,
                filename: string(filename[i])?,
                start_line: start_line[i],
            });
        }
        ends[2] = r.position();

        let n = r.count()?;
        let mapping = r.column(n, Reader::u32)?;
        let mut prev = 0u64;
        let address = r.column(n, |r| {
            prev = prev.wrapping_add(r.signed()? as u64);
            Some(prev)
        })?;
        let line_counts = r.column(n, Reader::varint)?;
        let total_lines = line_counts
            .iter()
            .try_fold(0usize, |a, c| a.checked_add(usize::try_from(c >> 1).ok()?))?;
        if total_lines > bytes.len() {
            return None;
        }
        let line_fns = r.column(total_lines, Reader::u32)?;
        let line_nos = r.column(total_lines, Reader::signed)?;
        let mut locations = Vec::with_capacity(n);
        let mut at = 0usize;
        for i in 0..n {
            let k = (line_counts[i] >> 1) as usize;
            let mut lines = Vec::with_capacity(k);
            for j in at..at + k {
                if line_fns[j] as usize >= functions.len() {
                    return None;
                }
                lines.push((line_fns[j], line_nos[j]));
            }
            at += k;
            if mapping[i] as usize > mappings.len() {
                return None;
            }
            locations.push(LocationSym {
                mapping: mapping[i],
                address: address[i],
                lines: lines.into_boxed_slice(),
                is_folded: line_counts[i] & 1 == 1,
            });
        }
        ends[3] = r.position();

        let n_nodes = r.count()?;
        let parents = r.column(n_nodes, Reader::u32)?;
        let locs = r.column(n_nodes, Reader::u32)?;
        let mut nodes = Vec::with_capacity(n_nodes);
        for (i, (&parent, &loc)) in parents.iter().zip(&locs).enumerate() {
            // Parents come first; node 0 is the root, whatever its columns say.
            if i > 0 && (parent as usize >= i || loc as usize >= locations.len()) {
                return None;
            }
            nodes.push(if i == 0 { (0, 0) } else { (parent, loc) });
        }
        if nodes.is_empty() {
            nodes.push((0, 0));
        }
        ends[4] = r.position();
        if tables_only {
            ends[5] = ends[4];
            return Some(Decoded {
                strings,
                mappings,
                functions,
                locations,
                nodes,
                series: Vec::new(),
                label_sets: Vec::new(),
                ends,
            });
        }

        let n_series = r.count()?;
        let mut series = Vec::with_capacity(n_series);
        for _ in 0..n_series {
            let labels = r.labels()?;
            let period = r.signed()?;
            let n_profiles = r.count()?;
            let times = r.deltas(n_profiles)?;
            let mut profiles = Vec::with_capacity(n_profiles);
            for time_nanos in times {
                let n = r.count()?;
                let mut last = 0u32;
                let nodes_of = r.column(n, |r| {
                    last = last.wrapping_add(r.u32()?);
                    ((last as usize) < nodes.len()).then_some(last)
                })?;
                let g = i64::try_from(r.varint()?).ok()?;
                let values = r.column(n, |r| Some(r.signed()?.saturating_mul(g)))?;
                profiles.push(StoredProfile {
                    time_nanos,
                    nodes: nodes_of,
                    values,
                    sets: Vec::new(),
                });
            }
            series.push((labels, period, profiles));
        }
        ends[5] = r.position();
        let label_sets = if r.at_end() {
            Vec::new()
        } else {
            parse_sample_labels(&mut r, n_strings, &mut series)?
        };
        r.at_end().then_some(Decoded {
            strings,
            mappings,
            functions,
            locations,
            nodes,
            series,
            label_sets,
            ends,
        })
    }
}

/// The sample-label part of an encoded head (see [`TenantHead::encode_label_set_table`]): the
/// label sets, and each profile's set ids put into `series`.
fn parse_sample_labels(
    r: &mut Reader<'_>,
    n_strings: usize,
    series: &mut [(Labels, i64, Vec<StoredProfile>)],
) -> Option<Vec<LabelSet>> {
    let string = |id: u64| -> Option<u32> {
        let id = u32::try_from(id).ok()?;
        ((id as usize) < n_strings).then_some(id)
    };
    if r.varint()? != SAMPLE_LABELS_TAG {
        return None;
    }
    let n = r.count()?;
    let mut label_sets = Vec::with_capacity(n);
    for _ in 0..n {
        let k = r.count()?;
        let pairs = r.column(k, |r| Some((string(r.varint()?)?, string(r.varint()?)?)))?;
        label_sets.push(pairs.into_boxed_slice());
    }
    for p in series.iter_mut().flat_map(|s| s.2.iter_mut()) {
        let k = r.count()?;
        if k != 0 && k != p.nodes.len() {
            return None;
        }
        p.sets = r.column(k, |r| r.u32().filter(|x| *x as usize <= n))?;
    }
    Some(label_sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Symbolized and address-only locations (two mappings sharing an address), a few
    /// stacks, two series.
    fn head() -> TenantHead {
        let mut h = TenantHead::new();
        let file = h.intern("/bin/app");
        let m1 = h.mapping(MappingSym {
            start: 0x1000,
            limit: 0x9000,
            offset: 0,
            filename: file,
            build_id: 0,
            flags: 1,
        }) + 1;
        let m2 = h.mapping(MappingSym {
            start: 0xa000,
            limit: 0xb000,
            offset: 0,
            filename: file,
            build_id: 0,
            flags: 0,
        }) + 1;
        let name = h.intern("main");
        let main = h.function(FunctionSym {
            name,
            system_name: name,
            filename: file,
            start_line: 1,
        });
        let located = h.location(LocationSym {
            mapping: m1,
            address: 0x1100,
            lines: Box::new([(main, 3)]),
            is_folded: false,
        });
        let bare: Vec<u32> = [(m1, 0x1234), (m2, 0x1234), (m2, 0xa010)]
            .iter()
            .map(|&(mapping, address)| {
                h.location(LocationSym {
                    mapping,
                    address,
                    lines: Box::new([]),
                    is_folded: false,
                })
            })
            .collect();
        let stacks = [
            vec![bare[0], located],
            vec![bare[1], located],
            vec![bare[2], bare[1], located],
        ];
        for (i, labels) in [
            vec![("s".to_string(), "a".to_string())],
            vec![("s".to_string(), "b".to_string())],
        ]
        .into_iter()
        .enumerate()
        {
            // The second series' samples carry sample labels (one stack in two spans).
            let (span, a, b) = (h.intern("span_id"), h.intern("a1"), h.intern("b2"));
            let sets = [
                h.label_set(&mut vec![(span, a)]),
                h.label_set(&mut vec![(span, b)]),
            ];
            let mut entries: Vec<(u32, u32, i64)> = stacks
                .iter()
                .enumerate()
                .map(|(j, s)| (h.stack(s), sets[j % 2], (i * 10 + j + 1) as i64))
                .collect();
            if i == 1 {
                entries.push((h.stack(&stacks[0]), sets[1], 7));
            }
            entries.sort_unstable();
            h.insert_with_period(
                labels,
                StoredProfile {
                    time_nanos: 5 + i as i64,
                    nodes: entries.iter().map(|e| e.0).collect(),
                    values: entries.iter().map(|e| e.2).collect(),
                    sets: if i == 1 {
                        entries.iter().map(|e| e.1).collect()
                    } else {
                        Vec::new()
                    },
                },
                10,
            );
        }
        h
    }

    /// `(frame names, sample labels, value)` of each stored entry.
    type Stacks = Vec<(Vec<String>, Vec<(String, String)>, i64)>;

    /// Every profile's stacks as frame names with their sample labels, per series.
    fn view(h: &TenantHead) -> Vec<(Labels, Stacks)> {
        h.all_series()
            .map(|s| {
                let mut stacks: Stacks = s
                    .profiles
                    .iter()
                    .flat_map(|p| (0..p.nodes.len()).map(move |i| (p, i)))
                    .map(|(p, i)| {
                        let labels = h
                            .label_set_pairs(p.set(i))
                            .iter()
                            .map(|(k, v)| (h.string(*k).to_string(), h.string(*v).to_string()))
                            .collect();
                        let frames = h.path(p.nodes[i]).iter().map(|x| x.to_string()).collect();
                        (frames, labels, p.values[i])
                    })
                    .collect();
                stacks.sort();
                (s.labels.clone(), stacks)
            })
            .collect()
    }

    #[test]
    fn read_only_decode_equals_merging_into_an_empty_head() {
        let original = head();
        let mut bytes = Vec::new();
        original.encode(&mut bytes);
        let mut merged = TenantHead::new();
        merged.merge_encoded(&bytes).unwrap();
        let read_only = TenantHead::decode_read_only(&bytes).unwrap();
        assert_eq!(view(&read_only), view(&original));
        assert_eq!(view(&merged), view(&original));
        // One address, one frame name: the two mappings' 0x1234 share a frame node.
        assert_eq!(read_only.frame_count(), merged.frame_count());
        // Flipped bytes (sample-label part included): refused or read, never a panic, and
        // a head that decodes answers reads.
        for b in crate::encoding::flipped(&bytes, 0x2545_f491_4f6c_dd1d, 3000) {
            if let Some(h) = TenantHead::decode_read_only(&b) {
                let _ = view(&h);
            }
            let mut m = TenantHead::new();
            if m.merge_encoded(&b).is_some() {
                let _ = view(&m);
            }
        }
        // Corrupt input is refused, never a panic.
        for cut in [1, bytes.len() / 3, bytes.len() - 1] {
            assert!(TenantHead::decode_read_only(&bytes[..cut]).is_none());
        }
    }
}
