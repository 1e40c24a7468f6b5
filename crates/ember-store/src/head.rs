//! The in-memory head of one tenant: series, label index and de-duplicated symbols.
//!
//! Owns how profiles live in memory. Everything a pprof profile says about code is interned
//! once per tenant and shared by every profile of every series: strings, mappings (with
//! build ids), functions (name, system name, file, start line) and locations (mapping,
//! address, inlined lines). Stacks are interned as nodes of one shared tree of locations
//! (`(parent node, location)` pairs), so a stack seen in thousands of profiles is stored
//! once and a profile is just sorted `(node, value)` pairs.
//!
//! Two merges are answered from that: a pprof merge sums values per stack node (identical
//! stacks of locations add up, and the result keeps file, line, address and mapping), and a
//! flame graph merge folds those sums once more onto a second, derived tree keyed by frame
//! *names* (`node_frame`), so stacks that differ only in addresses (two builds, two
//! mappings) still add up by name. Both walk integers only and resolve symbols at the end.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::Hash;

use crate::selector::Selector;

mod codec;
pub(crate) mod fingerprint;
mod intern;
mod tables;

/// A `HashMap` with rustc's Fx hash for the symbol and stack maps: their keys are small
/// integers and short strings from the tenant's own data, looked up once per frame of every
/// ingested sample, where SipHash's DoS resistance is not worth its cost.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// Sorted `(name, value)` label pairs identifying a series.
pub type Labels = Vec<(String, String)>;

/// One stored profile of one series (one sample type).
///
/// A profile is a list of `(stack node, sample label set, value)` entries sorted by node then
/// label set; a profile none of whose samples has labels keeps `sets` empty (every entry is
/// in set 0, the empty set), so unlabelled data costs nothing for the feature.
#[derive(Debug, Clone, Default)]
pub struct StoredProfile {
    /// Timestamp, unix nanoseconds.
    pub time_nanos: i64,
    /// Leaf nodes of the shared stack tree, ascending (a node repeats when its samples carry
    /// different label sets).
    pub nodes: Vec<u32>,
    /// Value per entry, same order.
    pub values: Vec<i64>,
    /// Sample label set per entry ([`TenantHead::label_set_pairs`]), same order; empty when
    /// every entry is in the empty set 0.
    pub sets: Vec<u32>,
}

impl StoredProfile {
    /// Sum of the values.
    pub fn total(&self) -> i64 {
        self.values.iter().fold(0i64, |a, v| a.saturating_add(*v))
    }

    /// The sample label set of entry `i` (0, the empty set, when the profile has none).
    pub fn set(&self, i: usize) -> u32 {
        self.sets.get(i).copied().unwrap_or(0)
    }
}

/// A series: its labels and profiles sorted by time.
#[derive(Debug, Clone)]
pub struct Series {
    /// Labels, sorted by name.
    pub labels: Labels,
    /// Profiles, sorted by `time_nanos`.
    pub profiles: Vec<StoredProfile>,
    /// Sampling period of the latest profile (pprof `period`), 0 if unknown.
    pub period: i64,
}

/// An interned mapping (a loaded binary). String fields are ids of [`TenantHead::string`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MappingSym {
    /// Load address.
    pub start: u64,
    /// End of the mapped range.
    pub limit: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// Binary path (string id).
    pub filename: u32,
    /// Build id (string id).
    pub build_id: u32,
    /// pprof's `has_functions`, `has_filenames`, `has_line_numbers`, `has_inline_frames`
    /// as bits 0..3.
    pub flags: u8,
}

/// An interned function. String fields are ids of [`TenantHead::string`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionSym {
    /// Name shown to people.
    pub name: u32,
    /// Linker/mangled name.
    pub system_name: u32,
    /// Source file.
    pub filename: u32,
    /// First line of the function.
    pub start_line: i64,
}

/// An interned location: an address in a mapping and the (inlined) lines there, innermost
/// first as in pprof.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LocationSym {
    /// Mapping index + 1 (0 = no mapping).
    pub mapping: u32,
    /// Instruction address.
    pub address: u64,
    /// `(function index, line)`, innermost first.
    pub lines: Box<[(u32, i64)]>,
    /// pprof's `is_folded`.
    pub is_folded: bool,
}

/// A location's fields with borrowed lines: what [`TenantHead::location_of`] looks up.
struct LocationKey<'l> {
    mapping: u32,
    address: u64,
    lines: &'l [(u32, i64)],
    is_folded: bool,
}

/// The fields of a location, owned ([`LocationSym`]) or borrowed ([`LocationKey`]): the
/// interner's map, keyed by `LocationSym`, is searched with a `LocationKey` through it.
trait LocationParts {
    fn parts(&self) -> LocationKey<'_>;
}

impl LocationParts for LocationSym {
    fn parts(&self) -> LocationKey<'_> {
        LocationKey {
            mapping: self.mapping,
            address: self.address,
            lines: &self.lines,
            is_folded: self.is_folded,
        }
    }
}

impl LocationParts for LocationKey<'_> {
    fn parts(&self) -> LocationKey<'_> {
        LocationKey { ..*self }
    }
}

impl<'a> std::borrow::Borrow<dyn LocationParts + 'a> for LocationSym {
    fn borrow(&self) -> &(dyn LocationParts + 'a) {
        self
    }
}

impl Hash for dyn LocationParts + '_ {
    /// Feeds the hasher exactly what `#[derive(Hash)]` on [`LocationSym`] does (its fields
    /// in declaration order; `Box<[T]>` hashes as `[T]`), as `Borrow` requires.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let k = self.parts();
        k.mapping.hash(state);
        k.address.hash(state);
        k.lines.hash(state);
        k.is_folded.hash(state);
    }
}

impl PartialEq for dyn LocationParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.parts(), other.parts());
        a.mapping == b.mapping
            && a.address == b.address
            && a.lines == b.lines
            && a.is_folded == b.is_folded
    }
}

impl Eq for dyn LocationParts + '_ {}

/// Values interned once, each with a dense id.
#[derive(Debug)]
struct Interner<T> {
    items: Vec<T>,
    ids: FastMap<T, u32>,
}

impl<T: Hash + Eq + Clone> Interner<T> {
    fn new() -> Self {
        Interner {
            items: Vec::new(),
            ids: FastMap::default(),
        }
    }

    fn intern(&mut self, v: T) -> (u32, bool) {
        if let Some(&id) = self.ids.get(&v) {
            return (id, false);
        }
        let id = self.items.len() as u32;
        self.items.push(v.clone());
        self.ids.insert(v, id);
        (id, true)
    }
}

/// All data of one tenant.
#[derive(Debug)]
pub struct TenantHead {
    strings: Vec<Box<str>>,
    string_ids: FastMap<Box<str>, u32>,
    /// The strings of symbols (function names and files, mapping files and build ids) by
    /// their bytes as profiles send them, with the ids of `string_ids`: every profile looks
    /// up each of its symbols' strings, and in this small table they stay in cache, while
    /// `string_ids` also holds every sample label value (hundreds of thousands of span ids
    /// a day). Keyed by the raw bytes, a string known here needs no UTF-8 check.
    symbol_ids: FastMap<Box<[u8]>, u32>,
    mappings: Interner<MappingSym>,
    functions: Interner<FunctionSym>,
    locations: Interner<LocationSym>,
    /// Frame-name string ids of each location, outermost (caller) first.
    location_frames: Vec<Box<[u32]>>,
    /// Stack tree: (parent node, location index); node 0 is the root.
    nodes: Vec<(u32, u32)>,
    node_ids: tables::NodeTable,
    /// Leaf node by a 128-bit keyed fingerprint of a whole stack (of its locations' content
    /// at ingest, or of interned location ids): a stack seen before costs one fingerprint
    /// and one lookup instead of interning its symbols and a lookup per frame.
    stack_leaves: tables::StackTable,
    /// Location id by the 128-bit keyed fingerprint of a location's content as a profile
    /// sends it (mapping, address, lines with their functions' strings; see
    /// `apply/symbols.rs`): a new stack whose locations were seen before (nearly all of
    /// them are) finds each with one lookup instead of interning its functions, strings
    /// and mapping again. Per head, so per tenant: no entry is shared between tenants, and
    /// a renamed function changes the fingerprint, so it never finds a stale name.
    location_prints: FastMap<u128, u32>,
    /// Sample label set by the keyed fingerprint of a sample's labels as a profile sends
    /// them (keys and values by their bytes, in the profile's order): the sets that repeat
    /// from profile to profile (threads, endpoints) cost one lookup instead of interning
    /// their strings, sorting and looking the set up.
    label_set_prints: FastMap<u128, u32>,
    /// The random keys of the fingerprints (fresh for every head, so a client cannot craft
    /// two stacks with one fingerprint).
    fingerprint_keys: fingerprint::FingerprintKeys,
    /// Frame-name tree node of each stack node (flame graph merges).
    node_frame: Vec<u32>,
    /// Frame-name tree: (parent frame node, name string id); frame node 0 is the root.
    frames: Vec<(u32, u32)>,
    frame_ids: FastMap<(u32, u32), u32>,
    /// Sample label sets: sorted `(key, value)` string-id pairs; set 0 is the empty set.
    label_sets: Interner<Box<[(u32, u32)]>>,
    /// String ids of every key used in a sample label set, sorted.
    sample_keys: Vec<u32>,
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
        let mut h = TenantHead {
            strings: Vec::new(),
            string_ids: FastMap::default(),
            symbol_ids: FastMap::default(),
            mappings: Interner::new(),
            functions: Interner::new(),
            locations: Interner::new(),
            location_frames: Vec::new(),
            nodes: vec![(0, 0)],
            node_ids: tables::NodeTable::default(),
            stack_leaves: tables::StackTable::default(),
            location_prints: FastMap::default(),
            label_set_prints: FastMap::default(),
            fingerprint_keys: fingerprint::FingerprintKeys::random(),
            node_frame: vec![0],
            frames: vec![(0, 0)],
            frame_ids: FastMap::default(),
            label_sets: Interner::new(),
            sample_keys: Vec::new(),
            series: Vec::new(),
            series_ids: HashMap::new(),
            postings: BTreeMap::new(),
            profiles: 0,
        };
        // String 0 is "", as in pprof, so absent fields need no special case.
        h.intern("");
        // Label set 0 is the empty set: a sample without labels.
        h.label_sets.intern(Box::new([]));
        h
    }

    /// Interns a sample label set of `(key, value)` string ids (sorted and de-duplicated
    /// here); returns its id, 0 for the empty set.
    pub fn label_set(&mut self, pairs: &mut Vec<(u32, u32)>) -> u32 {
        if pairs.is_empty() {
            return 0;
        }
        pairs.sort_unstable();
        pairs.dedup();
        if let Some(&id) = self.label_sets.ids.get(&pairs[..]) {
            return id;
        }
        for (k, _) in pairs.iter() {
            if let Err(at) = self.sample_keys.binary_search(k) {
                self.sample_keys.insert(at, *k);
            }
        }
        self.label_sets.intern(pairs[..].into()).0
    }

    /// The `(key, value)` string-id pairs of sample label set `id` (empty when unknown).
    pub fn label_set_pairs(&self, id: u32) -> &[(u32, u32)] {
        self.label_sets
            .items
            .get(id as usize)
            .map_or(&[], |s| &s[..])
    }

    /// Number of sample label sets (dense ids `0..label_set_count`, 0 the empty set).
    pub fn label_set_count(&self) -> usize {
        self.label_sets.items.len()
    }

    /// Names of the sample labels any profile of the head carries, sorted by string id.
    pub fn sample_label_names(&self) -> impl Iterator<Item = &str> {
        self.sample_keys.iter().map(|k| self.string(*k))
    }

    /// Whether some sample of the head carries a label named `name`.
    pub fn has_sample_label(&self, name: &str) -> bool {
        self.sample_label_names().any(|k| k == name)
    }

    /// Interns a string.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(s.into());
        self.string_ids.insert(s.into(), id);
        id
    }

    /// The interned string `id` ("" when out of range).
    pub fn string(&self, id: u32) -> &str {
        self.strings.get(id as usize).map(|s| &**s).unwrap_or("")
    }

    /// Interns a mapping; returns its index.
    pub fn mapping(&mut self, m: MappingSym) -> u32 {
        self.mappings.intern(m).0
    }

    /// Interns a function; returns its index.
    pub fn function(&mut self, f: FunctionSym) -> u32 {
        self.functions.intern(f).0
    }

    /// Interns a location; returns its index. Function indexes in `lines` that do not exist
    /// are dropped, and a mapping index past the known ones becomes "no mapping".
    pub fn location(&mut self, l: LocationSym) -> u32 {
        self.location_of(l.mapping, l.address, &l.lines, l.is_folded)
    }

    /// [`TenantHead::location`] from borrowed lines: a location interned before is found
    /// without building its [`LocationSym`] (no allocation per location of every profile).
    pub fn location_of(
        &mut self,
        mapping: u32,
        address: u64,
        lines: &[(u32, i64)],
        is_folded: bool,
    ) -> u32 {
        let nf = self.functions.items.len() as u32;
        let filtered: Vec<(u32, i64)>;
        let lines = if lines.iter().any(|(f, _)| *f >= nf) {
            filtered = lines.iter().copied().filter(|(f, _)| *f < nf).collect();
            &filtered[..]
        } else {
            lines
        };
        let mapping = if mapping as usize > self.mappings.items.len() {
            0
        } else {
            mapping
        };
        let key = LocationKey {
            mapping,
            address,
            lines,
            is_folded,
        };
        if let Some(&id) = self.locations.ids.get(&key as &dyn LocationParts) {
            return id;
        }
        let (id, new) = self.locations.intern(LocationSym {
            mapping,
            address,
            lines: lines.into(),
            is_folded,
        });
        if new {
            let loc = &self.locations.items[id as usize];
            let frames: Box<[u32]> = if loc.lines.is_empty() {
                let addr = format!("0x{:x}", loc.address);
                Box::new([self.intern_owned(addr)])
            } else {
                let names: Vec<u32> = loc
                    .lines
                    .iter()
                    .rev()
                    .map(|(f, _)| self.functions.items[*f as usize].name)
                    .collect();
                names.into_boxed_slice()
            };
            self.location_frames.push(frames);
        }
        id
    }

    fn intern_owned(&mut self, s: String) -> u32 {
        self.intern(&s)
    }

    /// The stack node for location `location` called from node `parent`, created if new.
    /// Returns `parent` unchanged for an unknown location.
    pub fn child(&mut self, parent: u32, location: u32) -> u32 {
        if let Some(id) = self.node_ids.get(parent, location) {
            return id;
        }
        let (Some(frames), Some(&parent_frame)) = (
            self.location_frames.get(location as usize),
            self.node_frame.get(parent as usize),
        ) else {
            return parent;
        };
        let mut f = parent_frame;
        for &name in frames.iter() {
            f = match self.frame_ids.get(&(f, name)) {
                Some(&id) => id,
                None => {
                    let id = self.frames.len() as u32;
                    self.frames.push((f, name));
                    self.frame_ids.insert((f, name), id);
                    id
                }
            };
        }
        let id = self.nodes.len() as u32;
        self.node_ids.insert(parent, location, id);
        self.nodes.push((parent, location));
        self.node_frame.push(f);
        id
    }

    /// Every series, in creation order.
    pub fn all_series(&self) -> impl Iterator<Item = &Series> {
        self.series.iter()
    }

    /// Number of series.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Number of distinct interned strings and stack nodes (for metrics).
    pub fn symbol_counts(&self) -> (usize, usize) {
        (self.strings.len(), self.nodes.len())
    }

    /// `(strings, mappings, functions, locations, stack nodes)` interned.
    pub fn symbol_table_sizes(&self) -> (usize, usize, usize, usize, usize) {
        (
            self.strings.len(),
            self.mappings.items.len(),
            self.functions.items.len(),
            self.locations.items.len(),
            self.nodes.len(),
        )
    }

    /// Number of stack nodes (dense ids `0..node_count`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The interned mapping with index `i`.
    pub fn mapping_sym(&self, i: u32) -> Option<&MappingSym> {
        self.mappings.items.get(i as usize)
    }

    /// The interned function with index `i`.
    pub fn function_sym(&self, i: u32) -> Option<&FunctionSym> {
        self.functions.items.get(i as usize)
    }

    /// The interned location with index `i`.
    pub fn location_sym(&self, i: u32) -> Option<&LocationSym> {
        self.locations.items.get(i as usize)
    }

    /// Location indexes of the stack ending at `node`, leaf first (pprof sample order).
    pub fn stack_locations(&self, mut node: u32) -> Vec<u32> {
        let mut out = Vec::new();
        while node != 0 {
            let Some(&(parent, loc)) = self.nodes.get(node as usize) else {
                break;
            };
            out.push(loc);
            node = parent;
        }
        out
    }

    /// Whether a series with these labels exists.
    pub fn has_series(&self, labels: &Labels) -> bool {
        self.series_ids.contains_key(labels)
    }

    /// Adds a profile to the series with `labels` (sorted), creating the series if needed.
    pub fn insert(&mut self, labels: Labels, profile: StoredProfile) {
        self.insert_with_period(labels, profile, 0);
    }

    /// [`TenantHead::insert`], recording the sampling period (0 = keep the known one).
    pub fn insert_with_period(&mut self, labels: Labels, profile: StoredProfile, period: i64) {
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
                    period: 0,
                });
                id
            }
        };
        let series = &mut self.series[id as usize];
        if period != 0 {
            series.period = period;
        }
        let profiles = &mut series.profiles;
        // Profiles arrive mostly in time order: appending is the common case.
        if profiles
            .last()
            .is_none_or(|p| p.time_nanos <= profile.time_nanos)
        {
            profiles.push(profile);
        } else {
            let at = profiles.partition_point(|p| p.time_nanos <= profile.time_nanos);
            profiles.insert(at, profile);
        }
        self.profiles += 1;
    }

    /// Series matching the selector, using the label index for equality matchers.
    ///
    /// A matcher on a name the series lacks but some sample of this head carries as a sample
    /// label is not decided here: it selects samples, not series (see
    /// [`crate::Selector::matches_series`]), and the reads apply it per sample.
    pub fn select(&self, selector: &Selector) -> Vec<&Series> {
        use crate::selector::MatchOp;
        let sample_key = |name: &str| self.has_sample_label(name);
        let mut candidates: Option<BTreeSet<u32>> = None;
        for m in &selector.matchers {
            if let MatchOp::Eq(v) = &m.op
                && !v.is_empty()
                && !sample_key(&m.name)
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
                .filter(|s| selector.matches_series(&s.labels, sample_key))
                .collect(),
            None => self
                .series
                .iter()
                .filter(|s| selector.matches_series(&s.labels, sample_key))
                .collect(),
        }
    }

    /// Frame names from the root down to stack node `node` (inlined frames expanded).
    pub fn path(&self, node: u32) -> Vec<&str> {
        self.frame_path(self.node_frame.get(node as usize).copied().unwrap_or(0))
    }

    /// Frame-name tree node of stack node `node` (0 when unknown).
    pub fn frame_of(&self, node: u32) -> u32 {
        self.node_frame.get(node as usize).copied().unwrap_or(0)
    }

    /// Number of frame-name tree nodes.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// The parent of frame-name tree node `frame` (0 for the root or out of range).
    pub fn frame_parent(&self, frame: u32) -> u32 {
        self.frames.get(frame as usize).map_or(0, |f| f.0)
    }

    /// The interned name (string id) of frame `frame` (0 for the root or out of range).
    pub fn frame_name(&self, frame: u32) -> u32 {
        self.frames.get(frame as usize).map_or(0, |f| f.1)
    }

    /// Frame names from the root down to frame-name tree node `frame`.
    pub fn frame_path(&self, mut frame: u32) -> Vec<&str> {
        let mut out = Vec::new();
        while frame != 0 {
            let Some(&(parent, name)) = self.frames.get(frame as usize) else {
                break;
            };
            out.push(self.string(name));
            frame = parent;
        }
        out.reverse();
        out
    }
}

impl TenantHead {
    /// Whether the head holds no profile.
    pub fn is_empty(&self) -> bool {
        self.profiles == 0
    }

    /// Approximate heap bytes the head holds (for the block cache's budget): tables, the
    /// stack and frame trees, their lookup maps and every stored profile.
    pub fn approx_bytes(&self) -> usize {
        use std::mem::size_of;
        // A hashbrown entry plus its control byte, at the usual 7/8 load.
        fn map<K, V>(m: &FastMap<K, V>) -> usize {
            m.capacity() * (size_of::<(K, V)>() + 1)
        }
        let strings: usize = self.strings.iter().map(|s| s.len() + 16).sum();
        let string_ids: usize = map(&self.string_ids)
            + self.string_ids.keys().map(|s| s.len()).sum::<usize>()
            + map(&self.symbol_ids)
            + self.symbol_ids.keys().map(|s| s.len()).sum::<usize>();
        let tables = self.mappings.items.capacity() * size_of::<MappingSym>()
            + map(&self.mappings.ids)
            + self.functions.items.capacity() * size_of::<FunctionSym>()
            + map(&self.functions.ids)
            + self.locations.items.capacity() * size_of::<LocationSym>()
            + map(&self.locations.ids)
            + self
                .locations
                .items
                .iter()
                .map(|l| l.lines.len() * 16)
                .sum::<usize>()
            + self
                .location_frames
                .iter()
                .map(|f| f.len() * 4 + 16)
                .sum::<usize>();
        let trees = self.nodes.capacity() * 8
            + self.node_ids.bytes()
            + self.stack_leaves.bytes()
            + map(&self.location_prints)
            + map(&self.label_set_prints)
            + self.node_frame.capacity() * 4
            + self.frames.capacity() * 8
            + map(&self.frame_ids)
            + map(&self.label_sets.ids)
            + self
                .label_sets
                .items
                .iter()
                .map(|s| s.len() * 8 + 16)
                .sum::<usize>();
        let profiles: usize = self
            .series
            .iter()
            .map(|s| {
                s.profiles
                    .iter()
                    .map(|p| {
                        p.nodes.capacity() * 4
                            + p.values.capacity() * 8
                            + p.sets.capacity() * 4
                            + 80
                    })
                    .sum::<usize>()
                    + s.labels
                        .iter()
                        .map(|(n, v)| n.len() + v.len() + 48)
                        .sum::<usize>()
            })
            .sum();
        strings + string_ids + tables + trees + profiles
    }

    /// Drops the maps that only interning needs (strings, symbols, stack and frame nodes by
    /// content): a head decoded from a block is only read, and the maps are a third or more
    /// of its memory. Interning into the head afterwards would duplicate entries, so this is
    /// for read-only heads only.
    pub(crate) fn into_read_only(mut self) -> Self {
        self.string_ids = FastMap::default();
        self.symbol_ids = FastMap::default();
        self.mappings.ids = FastMap::default();
        self.functions.ids = FastMap::default();
        self.locations.ids = FastMap::default();
        self.node_ids = tables::NodeTable::default();
        self.stack_leaves = tables::StackTable::default();
        self.location_prints = FastMap::default();
        self.label_set_prints = FastMap::default();
        self.frame_ids = FastMap::default();
        self.label_sets.ids = FastMap::default();
        self.nodes.shrink_to_fit();
        self.node_frame.shrink_to_fit();
        self.frames.shrink_to_fit();
        self
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
