//! A borrowed, flat view of a profile.proto message, for hot ingest paths.
//!
//! [`decode`](crate::decode) builds an owned [`Profile`]: one `String` per string-table entry
//! and three `Vec`s per sample, which is most of the cost of ingesting a small CPU profile.
//! [`ProfileView`] walks the same bytes once and keeps strings as ranges of the input and
//! every sample's location ids, values and labels in three shared columns, so decoding costs
//! a handful of allocations however many samples the profile has.
//!
//! The contract is parity with the owned decoder, so callers can switch without changing
//! what they accept: [`ProfileView::parse`] succeeds exactly when [`decode`](crate::decode)
//! of the same raw bytes would, the view holds the same data ([`ProfileView::to_profile`]
//! equals the decoded profile), and it has passed the same [`validate`](crate::validate)
//! rules. On failure the error is the owned decoder's, so messages name the offending field
//! the same way on both paths.

use std::borrow::Cow;
use std::ops::Range;

use crate::codec::{decode_raw, legacy_kind};
use crate::error::PprofError;
use crate::ids::IdIndex;
use crate::proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};

mod tables;

pub use tables::ViewTables;

/// Deepest nesting of protobuf groups skipped in unknown fields (prost's recursion limit).
const MAX_GROUP_DEPTH: u32 = 100;

/// Why the fast walk stopped; only used to decide to ask the owned decoder for the error.
type Walk<T> = Result<T, &'static str>;

/// A location of a [`ProfileView`]: `line` is a range of [`ProfileView::lines`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocationView {
    /// Unique nonzero id.
    pub id: u64,
    /// Id of the mapping (0 = none).
    pub mapping_id: u64,
    /// Instruction address.
    pub address: u64,
    /// The (inlined) lines, innermost first, as a range of [`ProfileView::lines`].
    pub line: Range<usize>,
    /// pprof's `is_folded`.
    pub is_folded: bool,
}

/// A sample of a [`ProfileView`]: ranges of the view's shared columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleView {
    /// Location ids, leaf first, as a range of [`ProfileView::sample_location_ids`].
    pub location_id: Range<usize>,
    /// One value per sample type, as a range of [`ProfileView::sample_values`].
    pub value: Range<usize>,
    /// Labels, as a range of [`ProfileView::sample_labels`].
    pub label: Range<usize>,
}

/// A decoded and validated profile that borrows its strings from the input bytes.
#[derive(Debug)]
pub struct ProfileView<'a> {
    /// The message's bytes, which the string table points into.
    raw: &'a [u8],
    /// The string table as `(start, end)` byte ranges of `raw`: ranges rather than slices,
    /// so the table has no lifetime and its allocation is handed on to the next parse with
    /// the other tables ([`ViewTables`]); growing it from nothing was a reallocation chain
    /// per profile (~1,800 strings in a realistic one).
    strings: Vec<(usize, usize)>,
    /// Sample types (string indices).
    pub sample_type: Vec<ValueType>,
    /// Samples; their data lives in the shared columns below.
    pub sample: Vec<SampleView>,
    /// Mappings.
    pub mapping: Vec<Mapping>,
    /// Locations; their lines live in [`ProfileView::lines`].
    pub location: Vec<LocationView>,
    /// Functions.
    pub function: Vec<Function>,
    /// Lines of every location, concatenated.
    pub lines: Vec<Line>,
    /// Location ids of every sample, concatenated.
    pub sample_location_ids: Vec<u64>,
    /// Values of every sample, concatenated.
    pub sample_values: Vec<i64>,
    /// Labels of every sample, concatenated.
    pub sample_labels: Vec<Label>,
    /// `drop_frames` string index.
    pub drop_frames: i64,
    /// `keep_frames` string index.
    pub keep_frames: i64,
    /// Time of collection, unix nanoseconds.
    pub time_nanos: i64,
    /// Duration of the profile.
    pub duration_nanos: i64,
    /// The kind of events between sampled occurrences.
    pub period_type: Option<ValueType>,
    /// Events between sampled occurrences.
    pub period: i64,
    /// Comment string indices.
    pub comment: Vec<i64>,
    /// Default sample type string index.
    pub default_sample_type: i64,
    /// Documentation link string index.
    pub doc_url: i64,
    mapping_ids: IdIndex,
    function_ids: IdIndex,
    location_ids: IdIndex,
    /// The largest `id.wrapping_sub(1)` over [`ProfileView::sample_location_ids`] (so an id
    /// of 0 makes it `u64::MAX`), folded in while the ids are decoded: the check that
    /// every id is a location's is then one comparison instead of another pass over the
    /// column (6 % of a realistic profile's parse).
    sample_location_top: u64,
}

impl<'a> ProfileView<'a> {
    /// Decodes and validates a raw (not gzip'd) profile.proto message.
    ///
    /// Succeeds exactly when [`decode`](crate::decode) of `raw` would; on failure returns the
    /// error that decoder gives (wire errors, legacy formats, validation errors naming the
    /// field). Inputs the walk does not understand are handed to the owned decoder so that
    /// the error is the canonical one.
    pub fn parse(raw: &'a [u8]) -> Result<ProfileView<'a>, PprofError> {
        ProfileView::parse_within(raw, u64::MAX)
    }

    /// [`ProfileView::parse`] that gives up, with [`PprofError::DecodedTooLarge`], once the
    /// view would take more than `max_bytes` of memory by [`ProfileView::decoded_bytes`]'s
    /// estimate. A profile of tiny messages (empty strings, empty samples: 2 bytes each on
    /// the wire, 16 to 48 bytes each decoded) is what this bounds: under any decompression
    /// limit it would otherwise cost ten to twenty times its size.
    pub fn parse_within(raw: &'a [u8], max_bytes: u64) -> Result<ProfileView<'a>, PprofError> {
        ProfileView::parse_into(raw, max_bytes, ViewTables::default())
    }

    /// [`ProfileView::parse_within`] filling `tables` (empty, maybe with capacity).
    fn parse_into(
        raw: &'a [u8],
        max_bytes: u64,
        tables: ViewTables,
    ) -> Result<ProfileView<'a>, PprofError> {
        if let Some(kind) = legacy_kind(raw) {
            return Err(PprofError::LegacyFormat { kind });
        }
        let walked = walk(raw, max_bytes, tables).and_then(|mut v| {
            v.index_and_validate()?;
            Ok(v)
        });
        match walked {
            Ok(v) => Ok(v),
            // Not handed to the owned decoder: it would build the same tables and more.
            Err(TOO_BIG) => Err(PprofError::DecodedTooLarge { limit: max_bytes }),
            Err(why) => match decode_raw(raw) {
                Err(e) => Err(e),
                // Parity is the contract (the fuzz target checks it); should a gap remain,
                // refuse clearly instead of storing something the walk did not read.
                Ok(_) => Err(PprofError::malformed(
                    "profile",
                    format!("encoding not supported by the ingest decoder ({why})"),
                )),
            },
        }
    }

    /// Memory the view's tables take (their elements; the strings are borrowed), what
    /// [`ProfileView::parse_within`] bounds. What is allocated may be up to twice this (a
    /// table grows by doubling); counting elements keeps the bound independent of where a
    /// table happens to be in its growth. The id indexes built after the walk are counted
    /// as much again as the mapping, function and location tables.
    pub fn decoded_bytes(&self) -> u64 {
        use std::mem::size_of;
        let bytes = self.strings.len() * size_of::<(usize, usize)>()
            + self.sample_type.len() * size_of::<ValueType>()
            + self.sample.len() * size_of::<SampleView>()
            + self.mapping.len() * 2 * size_of::<Mapping>()
            + self.location.len() * 2 * size_of::<LocationView>()
            + self.function.len() * 2 * size_of::<Function>()
            + self.lines.len() * size_of::<Line>()
            + (self.sample_location_ids.len() + self.sample_values.len() + self.comment.len())
                * size_of::<u64>()
            + self.sample_labels.len() * size_of::<Label>();
        bytes as u64
    }

    /// Number of string-table entries.
    pub fn string_count(&self) -> usize {
        self.strings.len()
    }

    /// String `index` of the string table ("" when out of range); invalid UTF-8 becomes
    /// U+FFFD as in [`decode`](crate::decode). Borrowed unless it had to be repaired.
    pub fn string(&self, index: i64) -> Cow<'a, str> {
        String::from_utf8_lossy(self.string_bytes(index))
    }

    /// The raw bytes of string `index` ("" when out of range), as the profile holds them:
    /// not checked for UTF-8. For keys that only need to tell strings apart (two byte
    /// strings equal here are equal after [`ProfileView::string`]'s repair), without the
    /// check's cost.
    pub fn string_bytes(&self, index: i64) -> &'a [u8] {
        let raw = self.raw;
        usize::try_from(index)
            .ok()
            .and_then(|i| self.strings.get(i))
            .and_then(|&(start, end)| raw.get(start..end))
            .unwrap_or(b"")
    }

    /// Position of the mapping with `id` in [`ProfileView::mapping`].
    pub fn mapping_position(&self, id: u64) -> Option<usize> {
        self.mapping_ids.get(id)
    }

    /// Position of the function with `id` in [`ProfileView::function`].
    pub fn function_position(&self, id: u64) -> Option<usize> {
        self.function_ids.get(id)
    }

    /// Position of the location with `id` in [`ProfileView::location`].
    pub fn location_position(&self, id: u64) -> Option<usize> {
        self.location_ids.get(id)
    }

    /// The lines of `location`, innermost first.
    pub fn location_lines(&self, location: &LocationView) -> &[Line] {
        self.lines.get(location.line.clone()).unwrap_or(&[])
    }

    /// `(location ids leaf first, values)` of `sample`.
    pub fn sample_data(&self, sample: &SampleView) -> (&[u64], &[i64]) {
        (
            self.sample_location_ids
                .get(sample.location_id.clone())
                .unwrap_or(&[]),
            self.sample_values.get(sample.value.clone()).unwrap_or(&[]),
        )
    }

    /// The owned [`Profile`] with the same content (what [`decode`](crate::decode) returns).
    pub fn to_profile(&self) -> Profile {
        fn part<T: Clone>(column: &[T], range: &Range<usize>) -> Vec<T> {
            column.get(range.clone()).unwrap_or(&[]).to_vec()
        }
        Profile {
            sample_type: self.sample_type.clone(),
            sample: self
                .sample
                .iter()
                .map(|s| Sample {
                    location_id: part(&self.sample_location_ids, &s.location_id),
                    value: part(&self.sample_values, &s.value),
                    label: part(&self.sample_labels, &s.label),
                })
                .collect(),
            mapping: self.mapping.clone(),
            location: self
                .location
                .iter()
                .map(|l| Location {
                    id: l.id,
                    mapping_id: l.mapping_id,
                    address: l.address,
                    line: part(&self.lines, &l.line),
                    is_folded: l.is_folded,
                })
                .collect(),
            function: self.function.clone(),
            string_table: (0..self.strings.len())
                .map(|i| String::from_utf8_lossy(self.string_bytes(i as i64)).into_owned())
                .collect(),
            drop_frames: self.drop_frames,
            keep_frames: self.keep_frames,
            time_nanos: self.time_nanos,
            duration_nanos: self.duration_nanos,
            period_type: self.period_type,
            period: self.period,
            comment: self.comment.clone(),
            default_sample_type: self.default_sample_type,
            doc_url: self.doc_url,
        }
    }

    /// Builds the id indexes and applies the rules of [`validate`](crate::validate).
    /// Only acceptance matters here: the error text comes from the owned decoder.
    ///
    /// The passes over the large tables (string indexes of functions and labels, the ids of
    /// every line, location and sample) are folds to the largest value, without an early
    /// exit or an index lookup per element: a valid profile, the usual case, is read to the
    /// end anyway, and this way in a straight loop.
    fn index_and_validate(&mut self) -> Walk<()> {
        if self
            .strings
            .first()
            .is_none_or(|&(start, end)| start != end)
        {
            return Err("string_table[0]");
        }
        // A string index is valid when below the table's length; read as `u64`, a negative
        // one is above any length, so the largest index decides for all of them.
        let n = self.strings.len() as u64;
        let ok = |i: i64| (i as u64) < n;
        let types_ok = self
            .sample_type
            .iter()
            .chain(&self.period_type)
            .all(|t| ok(t.r#type) && ok(t.unit));
        let header_ok = [
            self.drop_frames,
            self.keep_frames,
            self.default_sample_type,
            self.doc_url,
        ]
        .into_iter()
        .chain(self.comment.iter().copied())
        .all(ok);
        let as_u64 = |i: i64| i as u64;
        let tables_max = (self.mapping.iter())
            .fold(0, |m, x| m.max(as_u64(x.filename)).max(as_u64(x.build_id)))
            .max(self.function.iter().fold(0, |m, f| {
                m.max(as_u64(f.name))
                    .max(as_u64(f.system_name))
                    .max(as_u64(f.filename))
            }))
            .max(self.sample_labels.iter().fold(0, |m, l| {
                m.max(as_u64(l.key))
                    .max(as_u64(l.str))
                    .max(as_u64(l.num_unit))
            }));
        // (`n` is at least 1 here, so empty tables pass.)
        let tables_ok = tables_max < n;
        if !(types_ok && header_ok && tables_ok) {
            return Err("string index");
        }
        self.mapping_ids =
            IdIndex::build(self.mapping.iter().map(|m| m.id)).map_err(|_| "mapping id")?;
        self.function_ids =
            IdIndex::build(self.function.iter().map(|f| f.id)).map_err(|_| "function id")?;
        // Every line belongs to exactly one location, so the lines column is every
        // location's lines.
        let refs_ok =
            ids_or_zero_in(
                &self.mapping_ids,
                self.location.iter().map(|l| l.mapping_id),
            ) && ids_or_zero_in(&self.function_ids, self.lines.iter().map(|l| l.function_id));
        if !refs_ok {
            return Err("location reference");
        }
        self.location_ids =
            IdIndex::build(self.location.iter().map(|l| l.id)).map_err(|_| "location id")?;
        let types = self.sample_type.len();
        let samples_ok = self
            .sample
            .iter()
            .fold(true, |ok, s| ok & (s.value.len() == types))
            && ids_in(
                &self.location_ids,
                &self.sample_location_ids,
                self.sample_location_top,
            );
        if !samples_ok {
            return Err("sample");
        }
        Ok(())
    }
}

/// Whether every id of `ids` is in `index` (0 never is); `top` is the largest
/// `id.wrapping_sub(1)` of `ids`.
fn ids_in(index: &IdIndex, ids: &[u64], top: u64) -> bool {
    match index {
        // 1..=n: `id - 1` below n, 0 wrapping around to the largest value.
        IdIndex::Dense(n) => ids.is_empty() || top < *n as u64,
        IdIndex::Sparse(_) => ids.iter().all(|&id| index.get(id).is_some()),
    }
}

/// Whether every id of `ids` is 0 (none) or in `index`.
fn ids_or_zero_in(index: &IdIndex, mut ids: impl Iterator<Item = u64>) -> bool {
    match index {
        IdIndex::Dense(n) => ids.fold(0, u64::max) <= *n as u64,
        IdIndex::Sparse(_) => ids.all(|id| id == 0 || index.get(id).is_some()),
    }
}

/// Cursor over protobuf wire-format bytes. Every read is bounds-checked.
struct Wire<'a> {
    b: &'a [u8],
    pos: usize,
}

/// Protobuf wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

impl<'a> Wire<'a> {
    fn new(b: &'a [u8]) -> Self {
        Wire { b, pos: 0 }
    }

    fn more(&self) -> bool {
        self.pos < self.b.len()
    }

    /// A base-128 varint of at most 10 bytes whose value fits 64 bits (prost's rule).
    #[inline(always)]
    fn varint(&mut self) -> Walk<u64> {
        // Most keys fit one byte, most ids, string indices and line numbers one or two.
        match self.b.get(self.pos..) {
            Some(&[b0, ..]) if b0 < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b0))
            }
            Some(&[b0, b1, ..]) if b1 < 0x80 => {
                self.pos += 2;
                Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7)
            }
            _ => self.varint_slow(),
        }
    }

    fn varint_slow(&mut self) -> Walk<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let byte = *self.b.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            if i == 9 && byte > 1 {
                return Err("varint overflow");
            }
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err("varint overflow")
    }

    /// `(field number, wire type)` of the next field.
    fn key(&mut self) -> Walk<(u64, u8)> {
        let key = self.varint()?;
        if key > u64::from(u32::MAX) {
            return Err("key out of range");
        }
        let (field, wire) = (key >> 3, (key & 7) as u8);
        if field == 0 || wire > FIXED32 {
            return Err("bad key");
        }
        Ok((field, wire))
    }

    fn take(&mut self, n: usize) -> Walk<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or("length overflow")?;
        let s = self.b.get(self.pos..end).ok_or("truncated field")?;
        self.pos = end;
        Ok(s)
    }

    /// The payload of a length-delimited field.
    fn bytes(&mut self) -> Walk<&'a [u8]> {
        let n = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
        self.take(n)
    }

    /// A length-delimited field parsed as a nested message.
    fn message(&mut self, wire: u8) -> Walk<Wire<'a>> {
        if wire != LEN {
            return Err("wire type");
        }
        Ok(Wire::new(self.bytes()?))
    }

    /// A singular varint field (later occurrences win, as in protobuf).
    fn scalar(&mut self, wire: u8) -> Walk<u64> {
        if wire != VARINT {
            return Err("wire type");
        }
        self.varint()
    }

    /// A repeated varint field, packed or not: appends to `out`.
    fn repeated<T>(&mut self, wire: u8, out: &mut Vec<T>, mut f: impl FnMut(u64) -> T) -> Walk<()> {
        match wire {
            VARINT => out.push(f(self.varint()?)),
            LEN => packed(self.bytes()?, out, f)?,
            _ => return Err("wire type"),
        }
        Ok(())
    }

    /// Skips an unknown field, including (nested) groups.
    fn skip(&mut self, field: u64, wire: u8, depth: u32) -> Walk<()> {
        match wire {
            VARINT => {
                self.varint()?;
            }
            FIXED64 => {
                self.take(8)?;
            }
            LEN => {
                self.bytes()?;
            }
            FIXED32 => {
                self.take(4)?;
            }
            START_GROUP => {
                if depth >= MAX_GROUP_DEPTH {
                    return Err("groups nested too deep");
                }
                loop {
                    let (f, w) = self.key()?;
                    if w == END_GROUP {
                        if f != field {
                            return Err("mismatched end group");
                        }
                        break;
                    }
                    self.skip(f, w, depth + 1)?;
                }
            }
            _ => return Err("unexpected end group"),
        }
        Ok(())
    }
}

/// The varints of a packed repeated field, appended to `out` through `f`: one pass over the
/// bytes (the location ids of every sample are most of a profile's varints). Accepts exactly
/// what [`Wire::varint`] does: at most 10 bytes a value, the 10th at most 1, none truncated.
fn packed<T>(bytes: &[u8], out: &mut Vec<T>, mut f: impl FnMut(u64) -> T) -> Walk<()> {
    // Every varint ends with the one byte below 0x80: the exact count, so the column grows
    // once. (Summed as integers, which vectorises.)
    out.reserve(bytes.iter().map(|b| usize::from(*b < 0x80)).sum());
    let mut rest = bytes;
    loop {
        // Value by value, one- and two-byte varints without a loop: ids below 16,384 (the
        // location ids of samples, nearly all of a profile's varints) are one of those.
        match *rest {
            [] => return Ok(()),
            [b0, ref tail @ ..] if b0 < 0x80 => {
                out.push(f(u64::from(b0)));
                rest = tail;
            }
            [b0, b1, ref tail @ ..] if b1 < 0x80 => {
                out.push(f(u64::from(b0 & 0x7f) | u64::from(b1) << 7));
                rest = tail;
            }
            _ => {
                let mut w = Wire::new(rest);
                out.push(f(w.varint_slow()?));
                rest = rest.get(w.pos..).unwrap_or(&[]);
            }
        }
    }
}

fn value_type(mut w: Wire<'_>, into: &mut ValueType) -> Walk<()> {
    while w.more() {
        match w.key()? {
            (1, wire) => into.r#type = w.scalar(wire)? as i64,
            (2, wire) => into.unit = w.scalar(wire)? as i64,
            (f, wire) => w.skip(f, wire, 0)?,
        }
    }
    Ok(())
}

fn label(mut w: Wire<'_>) -> Walk<Label> {
    let mut l = Label::default();
    while w.more() {
        match w.key()? {
            (1, wire) => l.key = w.scalar(wire)? as i64,
            (2, wire) => l.str = w.scalar(wire)? as i64,
            (3, wire) => l.num = w.scalar(wire)? as i64,
            (4, wire) => l.num_unit = w.scalar(wire)? as i64,
            (f, wire) => w.skip(f, wire, 0)?,
        }
    }
    Ok(l)
}

fn sample(mut w: Wire<'_>, v: &mut ProfileView<'_>) -> Walk<SampleView> {
    // Each column only grows while this sample is read, so its part is one range even when
    // the fields arrive interleaved.
    let starts = (
        v.sample_location_ids.len(),
        v.sample_values.len(),
        v.sample_labels.len(),
    );
    let mut top = v.sample_location_top;
    while w.more() {
        match w.key()? {
            (1, wire) => w.repeated(wire, &mut v.sample_location_ids, |id| {
                top = top.max(id.wrapping_sub(1));
                id
            })?,
            (2, wire) => w.repeated(wire, &mut v.sample_values, |x| x as i64)?,
            (3, wire) => {
                let l = label(w.message(wire)?)?;
                v.sample_labels.push(l);
            }
            (f, wire) => w.skip(f, wire, 0)?,
        }
    }
    v.sample_location_top = top;
    Ok(SampleView {
        location_id: starts.0..v.sample_location_ids.len(),
        value: starts.1..v.sample_values.len(),
        label: starts.2..v.sample_labels.len(),
    })
}

fn mapping(mut w: Wire<'_>) -> Walk<Mapping> {
    let mut m = Mapping::default();
    while w.more() {
        match w.key()? {
            (1, wire) => m.id = w.scalar(wire)?,
            (2, wire) => m.memory_start = w.scalar(wire)?,
            (3, wire) => m.memory_limit = w.scalar(wire)?,
            (4, wire) => m.file_offset = w.scalar(wire)?,
            (5, wire) => m.filename = w.scalar(wire)? as i64,
            (6, wire) => m.build_id = w.scalar(wire)? as i64,
            (7, wire) => m.has_functions = w.scalar(wire)? != 0,
            (8, wire) => m.has_filenames = w.scalar(wire)? != 0,
            (9, wire) => m.has_line_numbers = w.scalar(wire)? != 0,
            (10, wire) => m.has_inline_frames = w.scalar(wire)? != 0,
            (f, wire) => w.skip(f, wire, 0)?,
        }
    }
    Ok(m)
}

fn line(mut w: Wire<'_>) -> Walk<Line> {
    let mut l = Line::default();
    while w.more() {
        match w.key()? {
            (1, wire) => l.function_id = w.scalar(wire)?,
            (2, wire) => l.line = w.scalar(wire)? as i64,
            (3, wire) => l.column = w.scalar(wire)? as i64,
            (f, wire) => w.skip(f, wire, 0)?,
        }
    }
    Ok(l)
}

fn location(mut w: Wire<'_>, lines: &mut Vec<Line>) -> Walk<LocationView> {
    let start = lines.len();
    let mut l = LocationView {
        id: 0,
        mapping_id: 0,
        address: 0,
        line: 0..0,
        is_folded: false,
    };
    while w.more() {
        match w.key()? {
            (1, wire) => l.id = w.scalar(wire)?,
            (2, wire) => l.mapping_id = w.scalar(wire)?,
            (3, wire) => l.address = w.scalar(wire)?,
            (4, wire) => lines.push(line(w.message(wire)?)?),
            (5, wire) => l.is_folded = w.scalar(wire)? != 0,
            (f, wire) => w.skip(f, wire, 0)?,
        }
    }
    l.line = start..lines.len();
    Ok(l)
}

fn function(mut w: Wire<'_>) -> Walk<Function> {
    let mut f = Function::default();
    while w.more() {
        match w.key()? {
            (1, wire) => f.id = w.scalar(wire)?,
            (2, wire) => f.name = w.scalar(wire)? as i64,
            (3, wire) => f.system_name = w.scalar(wire)? as i64,
            (4, wire) => f.filename = w.scalar(wire)? as i64,
            (5, wire) => f.start_line = w.scalar(wire)? as i64,
            (n, wire) => w.skip(n, wire, 0)?,
        }
    }
    Ok(f)
}

/// One pass over the top-level message; indexes and validation come after.
/// The walk's refusal of a profile whose tables pass the caller's memory bound.
const TOO_BIG: &str = "decoded size limit";

/// Fields walked between two checks of the decoded size: the check is a dozen
/// multiplications, and what 64 fields add is small next to any useful bound, except a
/// single large message, which is checked before it is read.
const CHECK_EVERY: u32 = 64;

/// Most bytes one byte of a packed repeated field (a sample's location ids or values) or of
/// a message's fields can decode to: a one-byte varint becomes a `u64`.
const MAX_EXPANSION: u64 = 8;

fn walk(raw: &[u8], max_bytes: u64, tables: ViewTables) -> Walk<ProfileView<'_>> {
    let mut v = ProfileView {
        raw,
        strings: tables.strings,
        sample_type: Vec::new(),
        sample: tables.sample,
        mapping: tables.mapping,
        location: tables.location,
        function: tables.function,
        lines: tables.lines,
        sample_location_ids: tables.sample_location_ids,
        sample_values: tables.sample_values,
        sample_labels: tables.sample_labels,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: 0,
        duration_nanos: 0,
        period_type: None,
        period: 0,
        comment: Vec::new(),
        default_sample_type: 0,
        doc_url: 0,
        mapping_ids: IdIndex::Dense(0),
        function_ids: IdIndex::Dense(0),
        location_ids: IdIndex::Dense(0),
        sample_location_top: 0,
    };
    let mut w = Wire::new(raw);
    let mut fields = 0u32;
    let over = |v: &ProfileView<'_>, more: usize| {
        v.decoded_bytes()
            .saturating_add((more as u64).saturating_mul(MAX_EXPANSION))
            > max_bytes
    };
    while w.more() {
        fields = fields.wrapping_add(1);
        if fields.is_multiple_of(CHECK_EVERY) && over(&v, 0) {
            return Err(TOO_BIG);
        }
        match w.key()? {
            (1, wire) => {
                let mut t = ValueType::default();
                value_type(w.message(wire)?, &mut t)?;
                v.sample_type.push(t);
            }
            (2, wire) => {
                let m = w.message(wire)?;
                if m.b.len() > 1024 && over(&v, m.b.len()) {
                    return Err(TOO_BIG);
                }
                let s = sample(m, &mut v)?;
                v.sample.push(s);
            }
            (3, wire) => v.mapping.push(mapping(w.message(wire)?)?),
            (4, wire) => {
                let m = w.message(wire)?;
                if m.b.len() > 1024 && over(&v, m.b.len()) {
                    return Err(TOO_BIG);
                }
                let l = location(m, &mut v.lines)?;
                v.location.push(l);
            }
            (5, wire) => v.function.push(function(w.message(wire)?)?),
            (6, wire) => {
                if wire != LEN {
                    return Err("wire type");
                }
                let s = w.bytes()?;
                // `w` reads `raw` itself, so its position is the string's end in `raw`.
                v.strings.push((w.pos - s.len(), w.pos));
            }
            (7, wire) => v.drop_frames = w.scalar(wire)? as i64,
            (8, wire) => v.keep_frames = w.scalar(wire)? as i64,
            (9, wire) => v.time_nanos = w.scalar(wire)? as i64,
            (10, wire) => v.duration_nanos = w.scalar(wire)? as i64,
            (11, wire) => {
                // A repeated optional message merges into the one already read.
                let m = w.message(wire)?;
                value_type(m, v.period_type.get_or_insert_with(ValueType::default))?;
            }
            (12, wire) => v.period = w.scalar(wire)? as i64,
            (13, wire) => w.repeated(wire, &mut v.comment, |x| x as i64)?,
            (14, wire) => v.default_sample_type = w.scalar(wire)? as i64,
            (15, wire) => v.doc_url = w.scalar(wire)? as i64,
            (f, wire) => w.skip(f, wire, 0)?,
        }
    }
    Ok(v)
}
