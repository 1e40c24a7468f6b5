//! Read-only views of a profile: string lookup, sample-type selection and
//! the folded-stack rendering.

use std::fmt::Write as _;

use crate::error::PprofError;
use crate::ids::{FastMap, IdIndex};
use crate::proto::{Profile, ValueType};

/// The string at `index` in the string table, or `""` when out of range.
#[inline]
pub fn string(profile: &Profile, index: i64) -> &str {
    usize::try_from(index)
        .ok()
        .and_then(|i| profile.string_table.get(i))
        .map_or("", String::as_str)
}

/// `type/unit` of a sample type (`cpu/nanoseconds`): how Ember names a sample type in listings
/// and error messages, and one of the names [`sample_index`] accepts.
pub fn type_name(profile: &Profile, vt: &ValueType) -> String {
    format!(
        "{}/{}",
        string(profile, vt.r#type),
        string(profile, vt.unit)
    )
}

pub(crate) fn type_list(profile: &Profile) -> String {
    profile
        .sample_type
        .iter()
        .map(|vt| type_name(profile, vt))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Index of the sample type to show.
///
/// `Some(name)` matches a type name (`"cpu"`, `"alloc_space"`), a
/// `"type/unit"` pair, or a plain decimal index. `None` picks the type named by
/// `default_sample_type` when it is set and present, else the last type (the
/// pprof default).
pub fn sample_index(profile: &Profile, name: Option<&str>) -> Result<usize, PprofError> {
    let n = profile.sample_type.len();
    if n == 0 {
        return Err(PprofError::NoSampleTypes);
    }
    let Some(name) = name else {
        if profile.default_sample_type != 0 {
            let wanted = string(profile, profile.default_sample_type);
            if let Some(i) = profile
                .sample_type
                .iter()
                .position(|vt| string(profile, vt.r#type) == wanted)
            {
                return Ok(i);
            }
        }
        return Ok(n - 1);
    };
    if let Some(i) = profile
        .sample_type
        .iter()
        .position(|vt| string(profile, vt.r#type) == name)
    {
        return Ok(i);
    }
    if let Some((t, u)) = name.split_once('/')
        && let Some(i) = profile
            .sample_type
            .iter()
            .position(|vt| string(profile, vt.r#type) == t && string(profile, vt.unit) == u)
    {
        return Ok(i);
    }
    if let Ok(i) = name.parse::<usize>()
        && i < n
    {
        return Ok(i);
    }
    Err(PprofError::UnknownSampleType {
        requested: name.to_string(),
        available: type_list(profile),
    })
}

/// The frame name of a location without lines: `0x<address>`, as pprof shows it. The frame
/// filters match their regex against this same text.
pub(crate) fn address_frame(address: u64) -> String {
    format!("{address:#x}")
}

/// Display name of every location (position-aligned with
/// `profile.location`): its lines from last to first (caller before inlined
/// callee) joined by `;`, or `0x<address>` when it has no lines.
pub(crate) fn location_frames(profile: &Profile) -> Vec<String> {
    let functions = IdIndex::lenient(profile.function.iter().map(|f| f.id));
    profile
        .location
        .iter()
        .map(|loc| {
            if loc.line.is_empty() {
                return address_frame(loc.address);
            }
            let mut s = String::new();
            for (k, line) in loc.line.iter().rev().enumerate() {
                if k > 0 {
                    s.push(';');
                }
                if let Some(f) = functions.get(line.function_id) {
                    s.push_str(string(profile, profile.function[f].name));
                }
            }
            s
        })
        .collect()
}

/// Folded view of sample type `sample_index`: `("root;...;leaf", sum)` per
/// distinct stack, sorted by byte order, stacks summing to zero dropped.
///
/// A location's lines are emitted last→first (inlined callees after their
/// caller); a location without lines is `0x<hex address>`; a line whose
/// function is unknown contributes an empty name. Labels are ignored. An
/// out-of-range `sample_index` yields no stacks; unknown location ids are
/// skipped (a validated profile has none).
pub fn folded_stacks(profile: &Profile, sample_index: usize) -> Vec<(String, i64)> {
    let frames = location_frames(profile);
    let locations = IdIndex::lenient(profile.location.iter().map(|l| l.id));
    let mut sums: FastMap<String, i64> = FastMap::default();
    let mut key = String::new();
    for sample in &profile.sample {
        let Some(&v) = sample.value.get(sample_index) else {
            continue;
        };
        key.clear();
        let mut first = true;
        for &id in sample.location_id.iter().rev() {
            let Some(pos) = locations.get(id) else {
                continue;
            };
            if !first {
                key.push(';');
            }
            first = false;
            key.push_str(&frames[pos]);
        }
        if let Some(sum) = sums.get_mut(key.as_str()) {
            *sum = sum.wrapping_add(v);
        } else {
            sums.insert(key.clone(), v);
        }
    }
    let mut out: Vec<(String, i64)> = sums.into_iter().filter(|&(_, v)| v != 0).collect();
    out.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out
}

/// Writes `folded` as `stack value` lines; handy for tests and tools.
pub fn folded_to_string(folded: &[(String, i64)]) -> String {
    let mut s = String::new();
    for (stack, v) in folded {
        let _ = writeln!(s, "{stack} {v}");
    }
    s
}
