//! The tables of a [`ProfileView`] handed from one parse to the next.
//!
//! A view's columns (the string table's ranges, samples, their location ids and values,
//! locations, lines, functions)
//! are a few hundred kilobytes for a usual profile, built by pushing, so every parse grew
//! them from nothing: reallocations that copy what was read so far, and fresh pages the
//! kernel zeroes on first touch. An ingest path that parses profile after profile gives a
//! dropped view's tables, emptied, to the next parse ([`ProfileView::parse_reusing`]), which
//! then fills memory it already has. The content of a view never depends on what the
//! tables held before: they are cleared when taken back ([`ProfileView::into_tables`]).

use super::{LocationView, ProfileView, SampleView};
use crate::proto::{Function, Label, Line, Mapping};

/// The emptied tables of a dropped [`ProfileView`], kept with their capacity; see the
/// module documentation. `ViewTables::default()` is a set without capacity.
#[derive(Debug, Default)]
pub struct ViewTables {
    pub(super) strings: Vec<(usize, usize)>,
    pub(super) sample: Vec<SampleView>,
    pub(super) mapping: Vec<Mapping>,
    pub(super) location: Vec<LocationView>,
    pub(super) function: Vec<Function>,
    pub(super) lines: Vec<Line>,
    pub(super) sample_location_ids: Vec<u64>,
    pub(super) sample_values: Vec<i64>,
    pub(super) sample_labels: Vec<Label>,
}

impl ViewTables {
    /// Bytes the tables have allocated (their capacity): what keeping them costs, for a
    /// caller that bounds what it keeps.
    pub fn capacity_bytes(&self) -> usize {
        use std::mem::size_of;
        self.strings.capacity() * size_of::<(usize, usize)>()
            + self.sample.capacity() * size_of::<SampleView>()
            + self.mapping.capacity() * size_of::<Mapping>()
            + self.location.capacity() * size_of::<LocationView>()
            + self.function.capacity() * size_of::<Function>()
            + self.lines.capacity() * size_of::<Line>()
            + self.sample_location_ids.capacity() * size_of::<u64>()
            + self.sample_values.capacity() * size_of::<i64>()
            + self.sample_labels.capacity() * size_of::<Label>()
    }

    /// Empties every table, keeping its capacity.
    fn clear(&mut self) {
        self.strings.clear();
        self.sample.clear();
        self.mapping.clear();
        self.location.clear();
        self.function.clear();
        self.lines.clear();
        self.sample_location_ids.clear();
        self.sample_values.clear();
        self.sample_labels.clear();
    }
}

impl<'a> ProfileView<'a> {
    /// [`ProfileView::parse_within`] that fills `tables` (from an earlier view's
    /// [`ProfileView::into_tables`]) instead of new ones: the same result and the same
    /// errors, without growing the columns from nothing again. On an error the tables are
    /// dropped.
    pub fn parse_reusing(
        raw: &'a [u8],
        max_bytes: u64,
        mut tables: ViewTables,
    ) -> Result<ProfileView<'a>, crate::PprofError> {
        // Taken back cleared, but a caller may hand in tables it filled some other way.
        tables.clear();
        ProfileView::parse_into(raw, max_bytes, tables)
    }

    /// The view's tables, emptied, for the next [`ProfileView::parse_reusing`]; the rest of
    /// the view (its id indexes) is dropped.
    pub fn into_tables(self) -> ViewTables {
        let mut tables = ViewTables {
            strings: self.strings,
            sample: self.sample,
            mapping: self.mapping,
            location: self.location,
            function: self.function,
            lines: self.lines,
            sample_location_ids: self.sample_location_ids,
            sample_values: self.sample_values,
            sample_labels: self.sample_labels,
        };
        tables.clear();
        tables
    }
}
