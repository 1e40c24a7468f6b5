//! [`ProfileBuilder`]: constructs valid, compact profiles by interning
//! strings, mappings, functions and locations and by merging samples with
//! identical stacks and labels. Merging and compaction reuse it.

use crate::ids::FastMap;
use crate::proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};

/// A label to attach to a sample in [`ProfileBuilder::add_sample`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleLabel<'a> {
    /// A string label: `(key, value)`.
    Str(&'a str, &'a str),
    /// A numeric label: `(key, value, unit)`; the unit may be `""`.
    Num(&'a str, i64, &'a str),
}

/// Builds a [`Profile`] incrementally; everything added is deduplicated, so
/// the result is compact and passes [`crate::validate`].
///
/// Ids handed out are the 1-based positions in the respective tables. Ids
/// passed back in (`mapping_id`, `function_id`, `location_ids`) must be ones
/// this builder returned; anything else yields a profile that
/// [`crate::validate`] rejects (the builder itself never panics).
#[derive(Debug)]
pub struct ProfileBuilder {
    profile: Profile,
    strings: FastMap<Box<str>, i64>,
    mappings: FastMap<[u64; 6], u64>,
    functions: FastMap<[i64; 4], u64>,
    // [mapping_id, address, is_folded, (function_id, line, column)*]
    locations: FastMap<Box<[u64]>, u64>,
    // [n_locations, location ids..., (key, str, num, num_unit)* sorted]
    samples: FastMap<Box<[u64]>, usize>,
    scratch: Vec<u64>,
    label_scratch: Vec<Label>,
}

impl ProfileBuilder {
    /// Starts a profile with the given `(type, unit)` sample types.
    pub fn new(sample_types: &[(&str, &str)]) -> Self {
        let mut b = ProfileBuilder {
            profile: Profile::default(),
            strings: FastMap::default(),
            mappings: FastMap::default(),
            functions: FastMap::default(),
            locations: FastMap::default(),
            samples: FastMap::default(),
            scratch: Vec::new(),
            label_scratch: Vec::new(),
        };
        b.string("");
        for &(t, u) in sample_types {
            let vt = ValueType {
                r#type: b.string(t),
                unit: b.string(u),
            };
            b.profile.sample_type.push(vt);
        }
        b
    }

    /// Sets the period type `(type, unit)` and the sampling period.
    pub fn set_period(&mut self, period_type: (&str, &str), period: i64) {
        self.profile.period_type = Some(ValueType {
            r#type: self.string(period_type.0),
            unit: self.string(period_type.1),
        });
        self.profile.period = period;
    }

    /// Sets collection time and duration, both in nanoseconds.
    pub fn set_time(&mut self, time_nanos: i64, duration_nanos: i64) {
        self.profile.time_nanos = time_nanos;
        self.profile.duration_nanos = duration_nanos;
    }

    /// Names the sample type that viewers should show by default.
    pub fn set_default_sample_type(&mut self, type_name: &str) {
        self.profile.default_sample_type = self.string(type_name);
    }

    /// Adds a free-form comment.
    pub fn add_comment(&mut self, comment: &str) {
        let c = self.string(comment);
        self.profile.comment.push(c);
    }

    /// Interns `s` and returns its string-table index (`""` is always 0).
    pub fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_string());
        self.strings.insert(s.into(), i);
        i
    }

    /// Interns a mapping and returns its id.
    pub fn mapping(
        &mut self,
        start: u64,
        limit: u64,
        offset: u64,
        filename: &str,
        build_id: &str,
    ) -> u64 {
        let filename = self.string(filename);
        let build_id = self.string(build_id);
        self.intern_mapping(Mapping {
            id: 0,
            memory_start: start,
            memory_limit: limit,
            file_offset: offset,
            filename,
            build_id,
            has_functions: false,
            has_filenames: false,
            has_line_numbers: false,
            has_inline_frames: false,
        })
    }

    /// Interns a mapping whose string fields are already indices into this
    /// builder's table; `id` is ignored.
    pub(crate) fn intern_mapping(&mut self, m: Mapping) -> u64 {
        let flags = u64::from(m.has_functions)
            | u64::from(m.has_filenames) << 1
            | u64::from(m.has_line_numbers) << 2
            | u64::from(m.has_inline_frames) << 3;
        let key = [
            m.memory_start,
            m.memory_limit,
            m.file_offset,
            m.filename as u64,
            m.build_id as u64,
            flags,
        ];
        if let Some(&id) = self.mappings.get(&key) {
            return id;
        }
        let id = self.profile.mapping.len() as u64 + 1;
        self.profile.mapping.push(Mapping { id, ..m });
        self.mappings.insert(key, id);
        id
    }

    /// Interns a function and returns its id.
    pub fn function(&mut self, name: &str, system_name: &str, filename: &str) -> u64 {
        let f = Function {
            id: 0,
            name: self.string(name),
            system_name: self.string(system_name),
            filename: self.string(filename),
            start_line: 0,
        };
        self.intern_function(f)
    }

    /// Interns a function whose string fields are already indices into this
    /// builder's table; `id` is ignored.
    pub(crate) fn intern_function(&mut self, f: Function) -> u64 {
        let key = [f.name, f.system_name, f.filename, f.start_line];
        if let Some(&id) = self.functions.get(&key) {
            return id;
        }
        let id = self.profile.function.len() as u64 + 1;
        self.profile.function.push(Function { id, ..f });
        self.functions.insert(key, id);
        id
    }

    /// Interns a location. `lines` are `(function_id, line)` pairs, innermost
    /// (inlined callee) first; `mapping_id` may be 0 for "unknown".
    pub fn location(&mut self, mapping_id: u64, address: u64, lines: &[(u64, i64)]) -> u64 {
        self.intern_location(
            mapping_id,
            address,
            false,
            lines.iter().map(|&(function_id, line)| Line {
                function_id,
                line,
                column: 0,
            }),
        )
    }

    /// Interns a location whose ids already belong to this builder.
    pub(crate) fn intern_location(
        &mut self,
        mapping_id: u64,
        address: u64,
        is_folded: bool,
        lines: impl Iterator<Item = Line> + Clone,
    ) -> u64 {
        self.scratch.clear();
        self.scratch
            .extend([mapping_id, address, u64::from(is_folded)]);
        for l in lines.clone() {
            self.scratch
                .extend([l.function_id, l.line as u64, l.column as u64]);
        }
        if let Some(&id) = self.locations.get(self.scratch.as_slice()) {
            return id;
        }
        let id = self.profile.location.len() as u64 + 1;
        self.profile.location.push(Location {
            id,
            mapping_id,
            address,
            line: lines.collect(),
            is_folded,
        });
        self.locations.insert(self.scratch.as_slice().into(), id);
        id
    }

    /// Adds a sample (`location_ids` leaf first, like pprof). Samples with the
    /// same stack and labels are merged by summing values. Missing values
    /// count as 0 and extra values are ignored, so the result stays valid.
    pub fn add_sample(&mut self, location_ids: &[u64], values: &[i64], labels: &[SampleLabel<'_>]) {
        let mut converted = std::mem::take(&mut self.label_scratch);
        converted.clear();
        for l in labels {
            converted.push(match *l {
                SampleLabel::Str(k, v) => Label {
                    key: self.string(k),
                    str: self.string(v),
                    num: 0,
                    num_unit: 0,
                },
                SampleLabel::Num(k, n, unit) => Label {
                    key: self.string(k),
                    str: 0,
                    num: n,
                    num_unit: self.string(unit),
                },
            });
        }
        self.add_sample_interned(
            location_ids,
            |i| values.get(i).copied().unwrap_or(0),
            &converted,
        );
        self.label_scratch = converted;
    }

    /// Adds a sample whose ids and label strings already belong to this
    /// builder; `value(i)` gives the value for sample type `i`.
    pub(crate) fn add_sample_interned(
        &mut self,
        location_ids: &[u64],
        value: impl Fn(usize) -> i64,
        labels: &[Label],
    ) {
        let ntypes = self.profile.sample_type.len();
        self.scratch.clear();
        self.scratch.push(location_ids.len() as u64);
        self.scratch.extend_from_slice(location_ids);
        let label_start = self.scratch.len();
        for l in labels {
            self.scratch
                .extend([l.key as u64, l.str as u64, l.num as u64, l.num_unit as u64]);
        }
        if labels.len() > 1 {
            // Label order carries no meaning; sort the key's 4-word records.
            let mut recs: Vec<[u64; 4]> = self.scratch[label_start..]
                .chunks_exact(4)
                .map(|c| [c[0], c[1], c[2], c[3]])
                .collect();
            recs.sort_unstable();
            self.scratch.truncate(label_start);
            for r in recs {
                self.scratch.extend(r);
            }
        }
        if let Some(&pos) = self.samples.get(self.scratch.as_slice()) {
            let s = &mut self.profile.sample[pos];
            for (i, v) in s.value.iter_mut().enumerate() {
                *v = v.wrapping_add(value(i));
            }
            return;
        }
        let pos = self.profile.sample.len();
        self.profile.sample.push(Sample {
            location_id: location_ids.to_vec(),
            value: (0..ntypes).map(value).collect(),
            label: labels.to_vec(),
        });
        self.samples.insert(self.scratch.as_slice().into(), pos);
    }

    /// Adds a stack given as function names, root first. Each name becomes
    /// one function (name = system name, no file) and one location (no
    /// mapping, address 0, one line).
    pub fn add_folded_stack(&mut self, frames_root_to_leaf: &[&str], values: &[i64]) {
        self.add_labelled_folded_stack(frames_root_to_leaf, values, &[]);
    }

    /// [`ProfileBuilder::add_folded_stack`] with sample labels: a stack added again with
    /// other labels is another sample (pprof keeps samples apart by labels).
    pub fn add_labelled_folded_stack(
        &mut self,
        frames_root_to_leaf: &[&str],
        values: &[i64],
        labels: &[SampleLabel<'_>],
    ) {
        let mut ids = Vec::with_capacity(frames_root_to_leaf.len());
        for name in frames_root_to_leaf.iter().rev() {
            let f = self.function(name, name, "");
            ids.push(self.location(0, 0, &[(f, 0)]));
        }
        self.add_sample(&ids, values, labels);
    }

    /// Mutable access to top-level fields (period, time, comments, ...) for
    /// the merge code, which copies them from source profiles.
    pub(crate) fn profile_mut(&mut self) -> &mut Profile {
        &mut self.profile
    }

    /// Read access to the profile built so far.
    pub(crate) fn profile(&self) -> &Profile {
        &self.profile
    }

    /// Finishes the profile.
    pub fn build(self) -> Profile {
        self.profile
    }
}
