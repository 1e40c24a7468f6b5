//! Turning merged stack-node sums back into a pprof profile with full symbols.
//!
//! Owns the mapping from tenant heads' interned tables to one self-contained pprof string,
//! mapping, function and location table: only what the merged samples reference is copied,
//! each once, with pprof's 1-based ids. A query may read several heads (the open head,
//! frozen heads, block sections), each with its own ids, so symbols are de-duplicated by
//! content across heads: the same function or location seen in two heads is one entry, and
//! identical stacks from two heads become identical location id lists.

use ember_pprof::{Function, Line, Location, Mapping, Profile, ValueType};

use crate::head::{FastMap, TenantHead};

/// A mapping by content, in output ids.
type MappingKey = (u64, u64, u64, i64, i64, u8);
/// A function by content, in output ids.
type FunctionKey = (i64, i64, i64, i64);
/// A location by content, in output ids.
type LocationKey = (u64, u64, Vec<(u64, i64)>, bool);

/// Collects the symbols of one output profile.
#[derive(Default)]
pub(crate) struct Builder {
    strings: Vec<String>,
    string_ids: FastMap<String, i64>,
    mappings: Vec<Mapping>,
    mapping_ids: FastMap<MappingKey, u64>,
    functions: Vec<Function>,
    function_ids: FastMap<FunctionKey, u64>,
    locations: Vec<Location>,
    location_ids: FastMap<LocationKey, u64>,
    /// Output ids by the current head's ids (reset by [`Builder::use_head`]).
    head_strings: FastMap<u32, i64>,
    head_mappings: FastMap<u32, u64>,
    head_functions: FastMap<u32, u64>,
    head_locations: FastMap<u32, u64>,
}

impl Builder {
    /// An empty profile.
    pub(crate) fn new() -> Self {
        let mut b = Builder::default();
        b.text("");
        b
    }

    /// Starts taking symbols from another head (its ids mean other things).
    pub(crate) fn next_head(&mut self) {
        self.head_strings.clear();
        self.head_mappings.clear();
        self.head_functions.clear();
        self.head_locations.clear();
    }

    fn head_string(&mut self, head: &TenantHead, id: u32) -> i64 {
        if let Some(&i) = self.head_strings.get(&id) {
            return i;
        }
        let i = self.text(head.string(id));
        self.head_strings.insert(id, i);
        i
    }

    /// Index of `s` in the output string table.
    pub(crate) fn text(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    /// A value type of the output profile.
    pub(crate) fn value_type(&mut self, r#type: &str, unit: &str) -> ValueType {
        ValueType {
            r#type: self.text(r#type),
            unit: self.text(unit),
        }
    }

    fn mapping(&mut self, head: &TenantHead, index: u32) -> u64 {
        if let Some(&id) = self.head_mappings.get(&index) {
            return id;
        }
        let Some(m) = head.mapping_sym(index).cloned() else {
            return 0;
        };
        let filename = self.head_string(head, m.filename);
        let build_id = self.head_string(head, m.build_id);
        let key = (m.start, m.limit, m.offset, filename, build_id, m.flags);
        let next = self.mappings.len() as u64 + 1;
        let id = *self.mapping_ids.entry(key).or_insert(next);
        if id == next {
            self.mappings.push(Mapping {
                id,
                memory_start: m.start,
                memory_limit: m.limit,
                file_offset: m.offset,
                filename,
                build_id,
                has_functions: m.flags & 1 != 0,
                has_filenames: m.flags & 2 != 0,
                has_line_numbers: m.flags & 4 != 0,
                has_inline_frames: m.flags & 8 != 0,
            });
        }
        self.head_mappings.insert(index, id);
        id
    }

    fn function(&mut self, head: &TenantHead, index: u32) -> u64 {
        if let Some(&id) = self.head_functions.get(&index) {
            return id;
        }
        let Some(f) = head.function_sym(index).cloned() else {
            return 0;
        };
        let name = self.head_string(head, f.name);
        let system_name = self.head_string(head, f.system_name);
        let filename = self.head_string(head, f.filename);
        let next = self.functions.len() as u64 + 1;
        let key = (name, system_name, filename, f.start_line);
        let id = *self.function_ids.entry(key).or_insert(next);
        if id == next {
            self.functions.push(Function {
                id,
                name,
                system_name,
                filename,
                start_line: f.start_line,
            });
        }
        self.head_functions.insert(index, id);
        id
    }

    /// The output location id of location `index` of `head` (copied with its mapping and
    /// functions on first use).
    pub(crate) fn location(&mut self, head: &TenantHead, index: u32) -> u64 {
        if let Some(&id) = self.head_locations.get(&index) {
            return id;
        }
        let Some(l) = head.location_sym(index).cloned() else {
            return 0;
        };
        let mapping_id = match l.mapping {
            0 => 0,
            m => self.mapping(head, m - 1),
        };
        let lines: Vec<(u64, i64)> = l
            .lines
            .iter()
            .map(|(f, n)| (self.function(head, *f), *n))
            .collect();
        let next = self.locations.len() as u64 + 1;
        let key = (mapping_id, l.address, lines, l.is_folded);
        let id = match self.location_ids.get(&key) {
            Some(&id) => id,
            None => {
                self.locations.push(Location {
                    id: next,
                    mapping_id,
                    address: l.address,
                    line: key
                        .2
                        .iter()
                        .map(|(function_id, line)| Line {
                            function_id: *function_id,
                            line: *line,
                            column: 0,
                        })
                        .collect(),
                    is_folded: l.is_folded,
                });
                self.location_ids.insert(key, next);
                next
            }
        };
        self.head_locations.insert(index, id);
        id
    }

    /// The profile holding every symbol used so far (no samples or types yet).
    pub(crate) fn finish(self) -> Profile {
        Profile {
            mapping: self.mappings,
            location: self.locations,
            function: self.functions,
            string_table: self.strings,
            ..Default::default()
        }
    }
}
