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
#[derive(Debug, Default)]
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

impl TenantHead {
    /// An empty head.
    pub fn new() -> Self {
        TenantHead {
            nodes: vec![(0, 0)],
            ..Default::default()
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
