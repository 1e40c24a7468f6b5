//! Turning merged stack-node sums back into a pprof profile with full symbols.
//!
//! Owns the mapping from a tenant head's interned tables to a self-contained pprof string,
//! mapping, function and location table: only what the merged samples reference is copied,
//! each once, with pprof's 1-based ids.

use std::collections::HashMap;

use ember_pprof::{Function, Line, Location, Mapping, Profile, ValueType};

use crate::head::TenantHead;

/// Collects the symbols of one output profile.
pub(crate) struct Builder<'a> {
    head: &'a TenantHead,
    strings: Vec<String>,
    string_ids: HashMap<u32, i64>,
    extra_strings: HashMap<String, i64>,
    mappings: Vec<Mapping>,
    mapping_ids: HashMap<u32, u64>,
    functions: Vec<Function>,
    function_ids: HashMap<u32, u64>,
    locations: Vec<Location>,
    location_ids: HashMap<u32, u64>,
}

impl<'a> Builder<'a> {
    /// An empty profile over `head`'s symbols.
    pub(crate) fn new(head: &'a TenantHead) -> Self {
        Builder {
            head,
            strings: vec![String::new()],
            string_ids: HashMap::from([(0, 0)]),
            extra_strings: HashMap::from([(String::new(), 0)]),
            mappings: Vec::new(),
            mapping_ids: HashMap::new(),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
        }
    }

    fn head_string(&mut self, id: u32) -> i64 {
        if let Some(&i) = self.string_ids.get(&id) {
            return i;
        }
        let i = self.text(self.head.string(id));
        self.string_ids.insert(id, i);
        i
    }

    /// Index of `s` in the output string table.
    pub(crate) fn text(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.extra_strings.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.extra_strings.insert(s.to_string(), i);
        i
    }

    /// A value type of the output profile.
    pub(crate) fn value_type(&mut self, r#type: &str, unit: &str) -> ValueType {
        ValueType {
            r#type: self.text(r#type),
            unit: self.text(unit),
        }
    }

    fn mapping(&mut self, index: u32) -> u64 {
        if let Some(&id) = self.mapping_ids.get(&index) {
            return id;
        }
        let Some(m) = self.head.mapping_sym(index).cloned() else {
            return 0;
        };
        let id = self.mappings.len() as u64 + 1;
        let filename = self.head_string(m.filename);
        let build_id = self.head_string(m.build_id);
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
        self.mapping_ids.insert(index, id);
        id
    }

    fn function(&mut self, index: u32) -> u64 {
        if let Some(&id) = self.function_ids.get(&index) {
            return id;
        }
        let Some(f) = self.head.function_sym(index).cloned() else {
            return 0;
        };
        let id = self.functions.len() as u64 + 1;
        let name = self.head_string(f.name);
        let system_name = self.head_string(f.system_name);
        let filename = self.head_string(f.filename);
        self.functions.push(Function {
            id,
            name,
            system_name,
            filename,
            start_line: f.start_line,
        });
        self.function_ids.insert(index, id);
        id
    }

    /// The output location id of head location `index` (copied with its mapping and
    /// functions on first use).
    pub(crate) fn location(&mut self, index: u32) -> u64 {
        if let Some(&id) = self.location_ids.get(&index) {
            return id;
        }
        let Some(l) = self.head.location_sym(index).cloned() else {
            return 0;
        };
        let mapping_id = match l.mapping {
            0 => 0,
            m => self.mapping(m - 1),
        };
        let line = l
            .lines
            .iter()
            .map(|(f, n)| Line {
                function_id: self.function(*f),
                line: *n,
                column: 0,
            })
            .collect();
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id,
            address: l.address,
            line,
            is_folded: l.is_folded,
        });
        self.location_ids.insert(index, id);
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
