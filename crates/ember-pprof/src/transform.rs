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
use crate::proto::Profile;
use crate::query::string;

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

/// Per function position: does its name match?
fn function_matches(profile: &Profile, re: &Regex) -> Vec<bool> {
    profile
        .function
        .iter()
        .map(|f| re.is_match(string(profile, f.name)))
        .collect()
}

/// Per location position: does any frame of it match?
fn location_matches(profile: &Profile, re: &Regex) -> Vec<bool> {
    let fmatch = function_matches(profile, re);
    let functions = IdIndex::lenient(profile.function.iter().map(|f| f.id));
    profile
        .location
        .iter()
        .map(|loc| {
            if loc.line.is_empty() {
                re.is_match(&format!("{:#x}", loc.address))
            } else {
                loc.line
                    .iter()
                    .any(|l| functions.get(l.function_id).is_some_and(|p| fmatch[p]))
            }
        })
        .collect()
}

fn sample_matches(
    profile: &Profile,
    matches: &[bool],
    index: &IdIndex,
    s: &crate::proto::Sample,
) -> bool {
    let _ = profile;
    s.location_id
        .iter()
        .any(|&id| index.get(id).is_some_and(|p| matches[p]))
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
    let matches = location_matches(profile, re);
    let index = IdIndex::lenient(profile.location.iter().map(|l| l.id));
    let keep: Vec<bool> = profile
        .sample
        .iter()
        .map(|s| sample_matches(profile, &matches, &index, s) == keep_matching)
        .collect();
    let mut it = keep.into_iter();
    profile.sample.retain(|_| it.next().unwrap_or(false));
}

/// pprof `-hide`: removes matching frames but keeps the samples (their values
/// move to the remaining frames). Inlined lines that match are removed from
/// their location; a location left with no lines, or a line-less location
/// whose `0x<address>` matches, is removed from the stacks.
pub fn hide(profile: &mut Profile, re: &Regex) {
    let fmatch = function_matches(profile, re);
    let functions = IdIndex::lenient(profile.function.iter().map(|f| f.id));
    let mut gone = vec![false; profile.location.len()];
    for (pos, loc) in profile.location.iter_mut().enumerate() {
        if loc.line.is_empty() {
            gone[pos] = re.is_match(&format!("{:#x}", loc.address));
        } else {
            loc.line
                .retain(|l| !functions.get(l.function_id).is_some_and(|p| fmatch[p]));
            gone[pos] = loc.line.is_empty();
        }
    }
    let index = IdIndex::lenient(profile.location.iter().map(|l| l.id));
    for s in &mut profile.sample {
        s.location_id
            .retain(|&id| !index.get(id).is_some_and(|p| gone[p]));
    }
}

/// pprof `-prune_from`: in every stack, the leaf-most frame that matches
/// becomes the leaf; everything it called is dropped. Inside a location with
/// inlined lines, the lines inlined into the deepest matching function are
/// dropped too. Like pprof, this trims the shared location itself, so a stack
/// that passes through such a location and ends in a deeper match also loses
/// those inlined frames.
pub fn prune_from(profile: &mut Profile, re: &Regex) {
    let fmatch = function_matches(profile, re);
    let functions = IdIndex::lenient(profile.function.iter().map(|f| f.id));
    let mut prune_here = vec![false; profile.location.len()];
    for (pos, loc) in profile.location.iter_mut().enumerate() {
        if loc.line.is_empty() {
            prune_here[pos] = re.is_match(&format!("{:#x}", loc.address));
            continue;
        }
        // lines[0] is the innermost callee: the first match from that end is
        // the deepest matching function; its inlined callees are cut.
        if let Some(k) = loc
            .line
            .iter()
            .position(|l| functions.get(l.function_id).is_some_and(|p| fmatch[p]))
        {
            loc.line.drain(..k);
            prune_here[pos] = true;
        }
    }
    let index = IdIndex::lenient(profile.location.iter().map(|l| l.id));
    for s in &mut profile.sample {
        if let Some(k) = s
            .location_id
            .iter()
            .position(|&id| index.get(id).is_some_and(|p| prune_here[p]))
        {
            s.location_id.drain(..k);
        }
    }
}
