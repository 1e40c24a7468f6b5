//! The in-memory head of one tenant: series, label index and de-duplicated symbols.
//!
//! Owns how profiles live in memory. Frame names are interned once per tenant, and stacks
//! are interned as nodes of one shared call tree (`(parent, frame)` pairs), so a stack seen
//! in thousands of profiles is stored once and a profile is just `(node, value)` pairs.
//! Merging a selection therefore adds integers per node and only resolves names at the end.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::selector::Selector;

/// Sorted `(name, value)` label pairs identifying a series.
pub type Labels = Vec<(String, String)>;

/// One stored profile of one series (one sample type).
#[derive(Debug, Clone)]
pub struct StoredProfile {
    /// Timestamp, unix nanoseconds.
    pub time_nanos: i64,
    /// Leaf node ids of the shared call tree.
    pub nodes: Vec<u32>,
    /// Value per node, same order.
    pub values: Vec<i64>,
}

impl StoredProfile {
    /// Sum of the values.
    pub fn total(&self) -> i64 {
        self.values.iter().fold(0i64, |a, v| a.saturating_add(*v))
    }
}

/// A series: its labels and profiles sorted by time.
#[derive(Debug, Clone)]
pub struct Series {
    /// Labels, sorted by name.
    pub labels: Labels,
    /// Profiles, sorted by `time_nanos`.
    pub profiles: Vec<StoredProfile>,
}

/// All data of one tenant.
#[derive(Debug)]
pub struct TenantHead {
    strings: Vec<Box<str>>,
    string_ids: HashMap<Box<str>, u32>,
    /// Call-tree nodes: (parent node, frame string id); node 0 is the root.
    nodes: Vec<(u32, u32)>,
    node_ids: HashMap<(u32, u32), u32>,
    series: Vec<Series>,
    series_ids: HashMap<Labels, u32>,
    /// Label index: name → value → series ids.
    postings: BTreeMap<String, BTreeMap<String, Vec<u32>>>,
    /// Number of profiles stored.
    pub profiles: u64,
}

impl Default for TenantHead {
    fn default() -> Self {
        TenantHead::new()
    }
}

impl TenantHead {
    /// An empty head.
    pub fn new() -> Self {
        TenantHead {
            strings: Vec::new(),
            string_ids: HashMap::new(),
            // Node 0 is the root every stack hangs from.
            nodes: vec![(0, 0)],
            node_ids: HashMap::new(),
            series: Vec::new(),
            series_ids: HashMap::new(),
            postings: BTreeMap::new(),
            profiles: 0,
        }
    }

    /// Interns a frame name.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.into());
        self.string_ids.insert(s.into(), id);
        id
    }

    /// The child of `parent` for frame `frame`, created if new.
    pub fn child(&mut self, parent: u32, frame: u32) -> u32 {
        if let Some(&id) = self.node_ids.get(&(parent, frame)) {
            return id;
        }
        let id = self.nodes.len() as u32;
        self.nodes.push((parent, frame));
        self.node_ids.insert((parent, frame), id);
        id
    }

    /// Number of series.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Number of distinct interned strings and call-tree nodes (for metrics).
    pub fn symbol_counts(&self) -> (usize, usize) {
        (self.strings.len(), self.nodes.len())
    }

    /// Whether a series with these labels exists.
    pub fn has_series(&self, labels: &Labels) -> bool {
        self.series_ids.contains_key(labels)
    }

    /// Adds a profile to the series with `labels` (sorted), creating the series if needed.
    pub fn insert(&mut self, labels: Labels, profile: StoredProfile) {
        let id = match self.series_ids.get(&labels) {
            Some(&id) => id,
            None => {
                let id = self.series.len() as u32;
                for (n, v) in &labels {
                    self.postings
                        .entry(n.clone())
                        .or_default()
                        .entry(v.clone())
                        .or_default()
                        .push(id);
                }
                self.series_ids.insert(labels.clone(), id);
                self.series.push(Series {
                    labels,
                    profiles: Vec::new(),
                });
                id
            }
        };
        let profiles = &mut self.series[id as usize].profiles;
        let at = profiles.partition_point(|p| p.time_nanos <= profile.time_nanos);
        profiles.insert(at, profile);
        self.profiles += 1;
    }

    /// Series matching the selector, using the label index for equality matchers.
    pub fn select(&self, selector: &Selector) -> Vec<&Series> {
        use crate::selector::MatchOp;
        let mut candidates: Option<BTreeSet<u32>> = None;
        for m in &selector.matchers {
            if let MatchOp::Eq(v) = &m.op
                && !v.is_empty()
            {
                let ids: BTreeSet<u32> = self
                    .postings
                    .get(&m.name)
                    .and_then(|vals| vals.get(v))
                    .map(|ids| ids.iter().copied().collect())
                    .unwrap_or_default();
                candidates = Some(match candidates {
                    Some(c) => c.intersection(&ids).copied().collect(),
                    None => ids,
                });
            }
        }
        match candidates {
            Some(ids) => ids
                .into_iter()
                .map(|id| &self.series[id as usize])
                .filter(|s| selector.matches(&s.labels))
                .collect(),
            None => self
                .series
                .iter()
                .filter(|s| selector.matches(&s.labels))
                .collect(),
        }
    }

    /// Frame names from the root down to `node`.
    pub fn path(&self, mut node: u32) -> Vec<&str> {
        let mut out = Vec::new();
        while node != 0 {
            let Some(&(parent, frame)) = self.nodes.get(node as usize) else {
                break;
            };
            out.push(self.strings.get(frame as usize).map(|s| &**s).unwrap_or(""));
            node = parent;
        }
        out.reverse();
        out
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_signed(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Cursor over an encoded head; every read checks bounds so corrupt blocks are errors.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn signed(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn count(&mut self) -> Option<usize> {
        // A count can never exceed the bytes left, which bounds allocations on corrupt input.
        let n = usize::try_from(self.varint()?).ok()?;
        (n <= self.b.len().saturating_sub(self.pos)).then_some(n)
    }

    fn str(&mut self) -> Option<&str> {
        let n = self.count()?;
        let s = std::str::from_utf8(self.b.get(self.pos..self.pos + n)?).ok()?;
        self.pos += n;
        Some(s)
    }
}

impl TenantHead {
    /// Columnar encoding of the whole head: string table; call-tree parent and frame columns;
    /// then per series its labels, a delta-encoded time column and per profile its sorted
    /// node ids (delta varints) and values (zigzag varints).
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_varint(out, self.strings.len() as u64);
        for s in &self.strings {
            put_str(out, s);
        }
        put_varint(out, self.nodes.len() as u64);
        for (parent, _) in &self.nodes {
            put_varint(out, u64::from(*parent));
        }
        for (_, frame) in &self.nodes {
            put_varint(out, u64::from(*frame));
        }
        put_varint(out, self.series.len() as u64);
        for s in &self.series {
            put_varint(out, s.labels.len() as u64);
            for (n, v) in &s.labels {
                put_str(out, n);
                put_str(out, v);
            }
            put_varint(out, s.profiles.len() as u64);
            let mut prev = 0i64;
            for p in &s.profiles {
                put_signed(out, p.time_nanos.wrapping_sub(prev));
                prev = p.time_nanos;
            }
            for p in &s.profiles {
                put_varint(out, p.nodes.len() as u64);
                let mut last = 0u32;
                for n in &p.nodes {
                    put_varint(out, u64::from(n.wrapping_sub(last)));
                    last = *n;
                }
                for v in &p.values {
                    put_signed(out, *v);
                }
            }
        }
    }

    /// Adds everything of an [`TenantHead::encode`]d head to this one (symbols re-interned).
    /// Returns `None` on malformed input (nothing partial is visible to callers' invariants:
    /// profiles are inserted only after their series decoded completely).
    pub fn merge_encoded(&mut self, bytes: &[u8]) -> Option<()> {
        let mut r = Reader { b: bytes, pos: 0 };
        let n_strings = r.count()?;
        let mut string_map = Vec::with_capacity(n_strings);
        for _ in 0..n_strings {
            let s = r.str()?;
            string_map.push(self.intern(s));
        }
        let n_nodes = r.count()?;
        let mut parents = Vec::with_capacity(n_nodes);
        for _ in 0..n_nodes {
            parents.push(r.varint()? as usize);
        }
        let mut node_map: Vec<u32> = Vec::with_capacity(n_nodes);
        for (i, &parent) in parents.iter().enumerate() {
            let frame = r.varint()? as usize;
            if i == 0 {
                node_map.push(0);
                continue;
            }
            let parent = *node_map.get(parent)?;
            let frame = *string_map.get(frame)?;
            node_map.push(self.child(parent, frame));
        }
        let n_series = r.count()?;
        for _ in 0..n_series {
            let n_labels = r.count()?;
            let mut labels = Labels::with_capacity(n_labels);
            for _ in 0..n_labels {
                let n = r.str()?.to_string();
                let v = r.str()?.to_string();
                labels.push((n, v));
            }
            let n_profiles = r.count()?;
            let mut times = Vec::with_capacity(n_profiles);
            let mut prev = 0i64;
            for _ in 0..n_profiles {
                prev = prev.wrapping_add(r.signed()?);
                times.push(prev);
            }
            let mut profiles = Vec::with_capacity(n_profiles);
            for time_nanos in times {
                let n = r.count()?;
                let mut nodes = Vec::with_capacity(n);
                let mut last = 0u32;
                for _ in 0..n {
                    last = last.wrapping_add(u32::try_from(r.varint()?).ok()?);
                    nodes.push(*node_map.get(last as usize)?);
                }
                let mut pairs = Vec::with_capacity(n);
                for node in nodes {
                    pairs.push((node, r.signed()?));
                }
                // Remapped ids lose the block's order; sorted ids keep the deltas small.
                pairs.sort_unstable();
                profiles.push(StoredProfile {
                    time_nanos,
                    nodes: pairs.iter().map(|p| p.0).collect(),
                    values: pairs.iter().map(|p| p.1).collect(),
                });
            }
            for p in profiles {
                self.insert(labels.clone(), p);
            }
        }
        (r.pos == bytes.len()).then_some(())
    }

    /// Drops profiles older than `cutoff_nanos` (retention).
    pub fn drop_before(&mut self, cutoff_nanos: i64) -> usize {
        let mut dropped = 0;
        for s in &mut self.series {
            let n = s.profiles.partition_point(|p| p.time_nanos < cutoff_nanos);
            s.profiles.drain(..n);
            dropped += n;
        }
        self.profiles -= dropped as u64;
        dropped
    }

    /// Earliest and latest profile time, if any.
    pub fn time_range(&self) -> Option<(i64, i64)> {
        let min = self
            .series
            .iter()
            .filter_map(|s| s.profiles.first())
            .map(|p| p.time_nanos)
            .min()?;
        let max = self
            .series
            .iter()
            .filter_map(|s| s.profiles.last())
            .map(|p| p.time_nanos)
            .max()?;
        Some((min, max))
    }
}
