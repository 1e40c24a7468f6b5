//! In-place edits of a profile: scaling values, keeping chosen sample types,
//! and pprof-style frame filters (focus / ignore / hide / prune_from).
//!
//! Frame matching (all filters): a location matches when the regex finds a
//! match (unanchored, like pprof's `-focus`) in the name of the function of
//! any of its lines; a location without lines is matched as `0x<address>`.
//! Filters leave unreferenced entities behind; call [`crate::compact`] to
//! drop them.

use regex::Regex;

use crate::error::PprofError;
use crate::ids::IdIndex;
use crate::proto::{Line, Profile};
use crate::query::{address_frame, string};

/// Multiplies every sample value by `factor`, rounding to the nearest integer
/// (halves away from zero); results saturate at the `i64` range. A
/// non-finite factor is treated as 0 (NaN) or saturates (±inf).
pub fn scale(profile: &mut Profile, factor: f64) {
    if factor == 1.0 {
        return;
    }
    for s in &mut profile.sample {
        for v in &mut s.value {
            // `as` saturates and maps NaN to 0, which is exactly what we want.
            *v = (*v as f64 * factor).round() as i64;
        }
    }
}

/// Keeps only the sample types at `indices` (in that order, duplicates
/// allowed) in `sample_type` and in every sample. `default_sample_type` is
/// cleared if its type is no longer present.
pub fn filter_sample_types(profile: &mut Profile, indices: &[usize]) -> Result<(), PprofError> {
    let count = profile.sample_type.len();
    if let Some(&index) = indices.iter().find(|&&i| i >= count) {
        return Err(PprofError::SampleIndexOutOfRange { index, count });
    }
    profile.sample_type = indices.iter().map(|&i| profile.sample_type[i]).collect();
    for s in &mut profile.sample {
        let old = std::mem::take(&mut s.value);
        s.value = indices
            .iter()
            .map(|&i| old.get(i).copied().unwrap_or(0))
            .collect();
    }
    if profile.default_sample_type != 0 {
        let name = string(profile, profile.default_sample_type);
        if !profile
            .sample_type
            .iter()
            .any(|vt| string(profile, vt.r#type) == name)
        {
            profile.default_sample_type = 0;
        }
    }
    Ok(())
}

/// The regex of a frame filter applied the way the module documentation says: a line
/// matches when the name of its function does; a location without lines matches on the
/// name the folded view gives it, `0x<address>`.
struct FrameMatcher<'r> {
    re: &'r Regex,
    functions: IdIndex,
    /// Per function position: does its name match?
    by_function: Vec<bool>,
}

impl<'r> FrameMatcher<'r> {
    fn new(profile: &Profile, re: &'r Regex) -> Self {
        FrameMatcher {
            re,
            functions: IdIndex::lenient(profile.function.iter().map(|f| f.id)),
            by_function: profile
                .function
                .iter()
                .map(|f| re.is_match(string(profile, f.name)))
                .collect(),
        }
    }

    /// Does the function of `line` match?
    fn line(&self, line: &Line) -> bool {
        self.functions
            .get(line.function_id)
            .is_some_and(|p| self.by_function[p])
    }

    /// Does a location without lines at `address` match?
    fn bare(&self, address: u64) -> bool {
        self.re.is_match(&address_frame(address))
    }
}

/// Marks aligned with `profile.location`, looked up by location id; an unknown id is
/// unmarked.
struct LocationMarks {
    index: IdIndex,
    marked: Vec<bool>,
}

impl LocationMarks {
    fn new(profile: &Profile, marked: Vec<bool>) -> Self {
        LocationMarks {
            index: IdIndex::lenient(profile.location.iter().map(|l| l.id)),
            marked,
        }
    }

    fn get(&self, id: u64) -> bool {
        self.index.get(id).is_some_and(|p| self.marked[p])
    }
}

/// Marks every location for a filter: one without lines when its `0x<address>` matches,
/// one with lines as `lines` says, which may also trim them (hide, prune_from).
fn mark_locations(
    profile: &mut Profile,
    re: &Regex,
    lines: impl Fn(&mut Vec<Line>, &FrameMatcher<'_>) -> bool,
) -> LocationMarks {
    let matcher = FrameMatcher::new(profile, re);
    let marked = profile
        .location
        .iter_mut()
        .map(|loc| {
            if loc.line.is_empty() {
                matcher.bare(loc.address)
            } else {
                lines(&mut loc.line, &matcher)
            }
        })
        .collect();
    LocationMarks::new(profile, marked)
}

/// pprof `-focus`: keeps only samples with at least one matching frame.
pub fn focus(profile: &mut Profile, re: &Regex) {
    retain_by_match(profile, re, true);
}

/// pprof `-ignore`: drops every sample with at least one matching frame.
pub fn ignore(profile: &mut Profile, re: &Regex) {
    retain_by_match(profile, re, false);
}

/// Keeps the samples for which "has a frame matching `re`" equals `keep_matching`.
fn retain_by_match(profile: &mut Profile, re: &Regex, keep_matching: bool) {
    let matches = mark_locations(profile, re, |lines, m| lines.iter().any(|l| m.line(l)));
    profile
        .sample
        .retain(|s| s.location_id.iter().any(|&id| matches.get(id)) == keep_matching);
}

/// pprof `-hide`: removes matching frames but keeps the samples (their values
/// move to the remaining frames). Inlined lines that match are removed from
/// their location; a location left with no lines, or a line-less location
/// whose `0x<address>` matches, is removed from the stacks.
pub fn hide(profile: &mut Profile, re: &Regex) {
    let gone = mark_locations(profile, re, |lines, m| {
        lines.retain(|l| !m.line(l));
        lines.is_empty()
    });
    for s in &mut profile.sample {
        s.location_id.retain(|&id| !gone.get(id));
    }
}

/// pprof `-prune_from`: in every stack, the leaf-most frame that matches
/// becomes the leaf; everything it called is dropped. Inside a location with
/// inlined lines, the lines inlined into the deepest matching function are
/// dropped too. Like pprof, this trims the shared location itself, so a stack
/// that passes through such a location and ends in a deeper match also loses
/// those inlined frames.
pub fn prune_from(profile: &mut Profile, re: &Regex) {
    // lines[0] is the innermost callee: the first match from that end is the
    // deepest matching function; its inlined callees are cut.
    let prune_here = mark_locations(profile, re, |lines, m| {
        let Some(k) = lines.iter().position(|l| m.line(l)) else {
            return false;
        };
        lines.drain(..k);
        true
    });
    for s in &mut profile.sample {
        if let Some(k) = s.location_id.iter().position(|&id| prune_here.get(id)) {
            s.location_id.drain(..k);
        }
    }
}
