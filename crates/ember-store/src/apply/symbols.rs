//! One profile's symbols as the head sees them: each location's content fingerprint,
//! computed up front from the profile's own bytes, and its interned id, found through the head's memo of location fingerprints or made only
//! when a new stack needs it.
//!
//! The tables are reused from profile to profile ([`SymbolTables`]), so a profile
//! allocates none of them.

use ember_pprof::ProfileView;

use crate::TenantHead;
use crate::head::{self, fingerprint::Fingerprint};

/// Not interned yet.
const NONE: u32 = u32::MAX;

/// Not fingerprinted yet. A finished fingerprint is 0 with probability 2^-128, and then it
/// is only computed again on each use, to the same value: the sentinel never changes a key.
const UNPRINTED: u128 = 0;

/// The per-profile tables of [`ProfileSymbols`], kept emptied between profiles.
#[derive(Debug, Default)]
pub(super) struct SymbolTables {
    prints: Vec<u128>,
    function_prints: Vec<u128>,
    mapping_prints: Vec<u128>,
    string_prints: Vec<u128>,
    strings: Vec<u32>,
    mappings: Vec<u32>,
    functions: Vec<u32>,
    locations: Vec<u32>,
    lines: Vec<(u32, i64)>,
}

impl SymbolTables {
    /// Bytes of capacity held (what keeping them for the next profile costs).
    pub(super) fn capacity_bytes(&self) -> usize {
        (self.prints.capacity()
            + self.function_prints.capacity()
            + self.mapping_prints.capacity()
            + self.string_prints.capacity())
            * 16
            + (self.strings.capacity()
                + self.mappings.capacity()
                + self.functions.capacity()
                + self.locations.capacity())
                * 4
            + self.lines.capacity() * 16
    }
}

/// Clears `v` and fills it with `len` copies of `x`, keeping its allocation.
fn refill<T: Copy>(v: &mut Vec<T>, len: usize, x: T) {
    v.clear();
    v.resize(len, x);
}

/// The head's view of one profile's string, mapping, function and location tables.
pub(super) struct ProfileSymbols<'a, 'v> {
    profile: &'a ProfileView<'v>,
    /// Content fingerprint of each location, by table position, or [`UNPRINTED`]: its
    /// mapping, address, `is_folded` and lines (each line's function by its strings and
    /// start line), so equal content in any two profiles gives equal fingerprints whatever
    /// their pprof ids.
    prints: Vec<u128>,
    /// Content fingerprint of each function, or [`UNPRINTED`].
    function_prints: Vec<u128>,
    /// Content fingerprint of each mapping, or [`UNPRINTED`].
    mapping_prints: Vec<u128>,
    /// Fingerprint of each string's bytes, or [`UNPRINTED`]: for source file names, which
    /// many functions share (a Go file holds dozens of them), so that their bytes are
    /// hashed once per profile instead of once per function.
    string_prints: Vec<u128>,
    /// The start of a fingerprint under the head's keys.
    start: Fingerprint,
    /// Whether the location ids are `1..=n` in table order (Go's and most producers'), so
    /// that id `i` is at position `i - 1`: the stack keys then read `prints` by id
    /// without asking the profile's id index for each of a profile's ~15,000 ids (a call
    /// into another crate per id).
    dense_ids: bool,
    /// Head string id of each string of the table, or [`NONE`].
    strings: Vec<u32>,
    /// Head mapping id + 1 of each mapping, or [`NONE`].
    mappings: Vec<u32>,
    /// Head function id of each function, or [`NONE`].
    functions: Vec<u32>,
    /// Head location id of each location, or [`NONE`].
    locations: Vec<u32>,
    /// Scratch for one location's lines.
    lines: Vec<(u32, i64)>,
}

impl<'a, 'v> ProfileSymbols<'a, 'v> {
    /// The symbols of `profile` under `head`'s keys, in `tables` (emptied here): every
    /// location fingerprinted, nothing interned yet.
    pub(super) fn new(
        head: &TenantHead,
        profile: &'a ProfileView<'v>,
        tables: SymbolTables,
    ) -> Self {
        let SymbolTables {
            mut prints,
            mut function_prints,
            mut mapping_prints,
            mut string_prints,
            mut strings,
            mut mappings,
            mut functions,
            mut locations,
            mut lines,
        } = tables;
        refill(&mut prints, profile.location.len(), UNPRINTED);
        refill(&mut function_prints, profile.function.len(), UNPRINTED);
        refill(&mut mapping_prints, profile.mapping.len(), UNPRINTED);
        refill(&mut string_prints, profile.string_count(), UNPRINTED);
        refill(&mut strings, profile.string_count(), NONE);
        refill(&mut mappings, profile.mapping.len(), NONE);
        refill(&mut functions, profile.function.len(), NONE);
        refill(&mut locations, profile.location.len(), NONE);
        lines.clear();
        let mut symbols = ProfileSymbols {
            profile,
            prints,
            function_prints,
            mapping_prints,
            string_prints,
            start: head.fingerprints().start(),
            dense_ids: profile
                .location
                .iter()
                .zip(1u64..)
                .all(|(l, id)| l.id == id),
            strings,
            mappings,
            functions,
            locations,
            lines,
        };
        // Every fingerprint up front, table by table: in table order the reads of the
        // profile's tables and strings go forward through memory, while computed on first
        // use (in the order samples meet them) they missed the cache, costing twice as
        // much, and real profiles (Go's) list only locations their samples use.
        for at in 0..profile.mapping.len() {
            symbols.mapping_print(at);
        }
        for at in 0..profile.function.len() {
            symbols.function_print(at);
        }
        for at in 0..profile.location.len() {
            symbols.print_first(at);
        }
        symbols
    }

    /// The same symbols with stack keys read through the profile's id index only (the
    /// reference the by-id path is tested against).
    #[cfg(test)]
    pub(super) fn through_the_id_index(mut self) -> Self {
        self.dense_ids = false;
        self
    }

    /// The tables, for the next profile.
    pub(super) fn into_tables(self) -> SymbolTables {
        SymbolTables {
            prints: self.prints,
            function_prints: self.function_prints,
            mapping_prints: self.mapping_prints,
            string_prints: self.string_prints,
            strings: self.strings,
            mappings: self.mappings,
            functions: self.functions,
            locations: self.locations,
            lines: self.lines,
        }
    }

    /// The content fingerprint of the mapping at table position `at` (a valid position).
    fn mapping_print(&mut self, at: usize) -> u128 {
        if self.mapping_prints[at] != UNPRINTED {
            return self.mapping_prints[at];
        }
        let profile = self.profile;
        let m = &profile.mapping[at];
        let mut f = self.start;
        f.word(m.memory_start);
        f.word(m.memory_limit);
        f.word(m.file_offset);
        f.bytes(profile.string_bytes(m.filename));
        f.bytes(profile.string_bytes(m.build_id));
        f.word(
            u64::from(m.has_functions)
                | u64::from(m.has_filenames) << 1
                | u64::from(m.has_line_numbers) << 2
                | u64::from(m.has_inline_frames) << 3,
        );
        let print = f.finish();
        self.mapping_prints[at] = print;
        print
    }

    /// The content fingerprint of the function at table position `at` (a valid position).
    fn function_print(&mut self, at: usize) -> u128 {
        if self.function_prints[at] != UNPRINTED {
            return self.function_prints[at];
        }
        let profile = self.profile;
        let func = &profile.function[at];
        let mut f = self.start;
        let name = profile.string_bytes(func.name);
        f.bytes(name);
        // Go's functions carry their name twice (one string): a marker word instead of
        // hashing the same bytes again. A byte string's feed starts with its length, never
        // `u64::MAX`, so the marker cannot stand for other content.
        let system_name = profile.string_bytes(func.system_name);
        if func.system_name == func.name || system_name == name {
            f.word(u64::MAX);
        } else {
            f.bytes(system_name);
        }
        // The file by its string's fingerprint (a fixed-size feed, so the fields still
        // cannot run into each other).
        f.print(self.string_print(func.filename));
        f.word(func.start_line as u64);
        let print = f.finish();
        self.function_prints[at] = print;
        print
    }

    /// The fingerprint of string `i`'s bytes (of "" when out of range), computed once per
    /// profile.
    fn string_print(&mut self, i: i64) -> u128 {
        let slot = usize::try_from(i)
            .ok()
            .filter(|i| *i < self.string_prints.len());
        if let Some(p) = slot
            .map(|i| self.string_prints[i])
            .filter(|p| *p != UNPRINTED)
        {
            return p;
        }
        let mut f = self.start;
        f.bytes(self.profile.string_bytes(i));
        let print = f.finish();
        if let Some(i) = slot {
            self.string_prints[i] = print;
        }
        print
    }

    /// The content fingerprint of the location at table position `at` (a valid position).
    #[inline]
    fn print(&mut self, at: usize) -> u128 {
        match self.prints[at] {
            UNPRINTED => self.print_first(at),
            p => p,
        }
    }

    /// Computes [`ProfileSymbols::print`]: what the head keeps of a location, a
    /// mapping it can resolve (else none) and the lines whose function it can resolve
    /// (others are dropped).
    #[inline(never)]
    fn print_first(&mut self, at: usize) -> u128 {
        let profile = self.profile;
        let loc = &profile.location[at];
        let mut f = self.start;
        match profile.mapping_position(loc.mapping_id) {
            Some(i) => {
                f.word(1);
                f.print(self.mapping_print(i));
            }
            None => f.word(0),
        }
        f.word(loc.address);
        f.word(u64::from(loc.is_folded));
        for l in profile.location_lines(loc) {
            if let Some(i) = profile.function_position(l.function_id) {
                f.print(self.function_print(i));
                f.word(l.line as u64);
            }
        }
        let print = f.finish();
        self.prints[at] = print;
        print
    }

    /// The key of a stack of pprof location ids (leaf first) in the head's stack table:
    /// the fingerprint of its locations' fingerprints. Unknown ids are left out, as the
    /// walk into the tree leaves them out.
    pub(super) fn stack_key(&mut self, ids: &[u64]) -> u128 {
        let mut f = self.start;
        if self.dense_ids {
            // Every location was fingerprinted in `new`, so `prints` is final; an id out
            // of `1..=n` is unknown (`wrapping_sub` takes 0 past the end too).
            for id in ids {
                if let Some(p) = self.prints.get((*id as usize).wrapping_sub(1)) {
                    f.print(*p);
                }
            }
            return f.finish();
        }
        let profile = self.profile;
        for id in ids {
            if let Some(at) = profile.location_position(*id) {
                f.print(self.print(at));
            }
        }
        f.finish()
    }

    /// The keyed fingerprint of a sample's labels as the profile sends them: each key's
    /// and string value's bytes, or a numeric value, in order. Not a stack or location
    /// fingerprint: a domain word keeps the kinds apart.
    pub(super) fn labels_print(&self, labels: &[ember_pprof::Label]) -> u128 {
        let mut f = self.start;
        f.word(u64::MAX - 1);
        for l in labels {
            f.bytes(self.profile.string_bytes(l.key));
            if l.str != 0 {
                f.bytes(self.profile.string_bytes(l.str));
            } else {
                // A length is below 2^63: the marker cannot read as a string's feed.
                f.word(u64::MAX);
                f.word(l.num as u64);
            }
        }
        f.finish()
    }

    /// The head's id of string `i` (a sample label's key or value), interned on first use.
    pub(super) fn string(&mut self, head: &mut TenantHead, i: i64) -> u32 {
        let profile = self.profile;
        cached(&mut self.strings, i, || head.intern(&profile.string(i)))
    }

    /// The head's id of string `i` as part of a symbol ([`TenantHead::intern_symbol`]).
    fn symbol(&mut self, head: &mut TenantHead, i: i64) -> u32 {
        let profile = self.profile;
        cached(&mut self.strings, i, || {
            head.intern_symbol(profile.string_bytes(i))
        })
    }

    /// The head's id + 1 of the mapping at table position `at`, interned on first use.
    fn mapping(&mut self, head: &mut TenantHead, at: usize) -> u32 {
        if let Some(&id) = self.mappings.get(at).filter(|id| **id != NONE) {
            return id;
        }
        let Some(m) = self.profile.mapping.get(at) else {
            return 0;
        };
        let sym = head::MappingSym {
            start: m.memory_start,
            limit: m.memory_limit,
            offset: m.file_offset,
            filename: self.symbol(head, m.filename),
            build_id: self.symbol(head, m.build_id),
            flags: u8::from(m.has_functions)
                | u8::from(m.has_filenames) << 1
                | u8::from(m.has_line_numbers) << 2
                | u8::from(m.has_inline_frames) << 3,
        };
        let id = head.mapping(sym) + 1;
        self.mappings[at] = id;
        id
    }

    /// The head's id of the function at table position `at`, interned on first use.
    fn function(&mut self, head: &mut TenantHead, at: usize) -> u32 {
        if let Some(&id) = self.functions.get(at).filter(|id| **id != NONE) {
            return id;
        }
        let f = &self.profile.function[at];
        let sym = head::FunctionSym {
            name: self.symbol(head, f.name),
            system_name: self.symbol(head, f.system_name),
            filename: self.symbol(head, f.filename),
            start_line: f.start_line,
        };
        let id = head.function(sym);
        self.functions[at] = id;
        id
    }

    /// The head's id of the location at table position `at` (a valid position): found by
    /// its content fingerprint when the head has interned that content before, else
    /// interned with its mapping and functions.
    pub(super) fn location(&mut self, head: &mut TenantHead, at: usize) -> u32 {
        if self.locations[at] != NONE {
            return self.locations[at];
        }
        let print = self.print(at);
        if let Some(id) = head.location_by_print(print) {
            self.locations[at] = id;
            return id;
        }
        let profile = self.profile;
        let loc = &profile.location[at];
        let mut lines = std::mem::take(&mut self.lines);
        lines.clear();
        for l in profile.location_lines(loc) {
            if let Some(i) = profile.function_position(l.function_id) {
                lines.push((self.function(head, i), l.line));
            }
        }
        let mapping = match profile.mapping_position(loc.mapping_id) {
            Some(i) => self.mapping(head, i),
            None => 0,
        };
        let id = head.location_of(mapping, loc.address, &lines, loc.is_folded);
        head.remember_location(print, id);
        self.lines = lines;
        self.locations[at] = id;
        id
    }
}

/// `ids[i]`, from `intern` the first time (out of range: `intern` every time).
fn cached(ids: &mut [u32], i: i64, intern: impl FnOnce() -> u32) -> u32 {
    match usize::try_from(i).ok().and_then(|i| ids.get_mut(i)) {
        Some(slot) if *slot != NONE => *slot,
        Some(slot) => {
            *slot = intern();
            *slot
        }
        None => intern(),
    }
}
