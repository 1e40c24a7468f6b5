//! Speedscope JSON (<https://www.speedscope.app/file-format-schema.json>) from pprof profiles and
//! folded stacks, and read back into a profile from any program's file
//! ([`speedscope_to_profile`]: sampled and evented profiles).
//!
//! Every sample type becomes one `"sampled"` profile; all profiles share one frame table. Frames
//! are function-level (name and file), matching how Ember folds stacks: a location's inlined
//! functions appear after their caller, and a location without symbols is `0x<address>`.

use crate::FormatError;
use crate::top::select_sample_index;
use ember_pprof::Profile;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The `$schema` value speedscope expects.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// A speedscope file (the subset of the schema Ember writes and reads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct File {
    /// Always [`SCHEMA`].
    #[serde(rename = "$schema")]
    pub schema: String,
    /// Data shared by all profiles.
    pub shared: Shared,
    /// One profile per sample type.
    pub profiles: Vec<SampledProfile>,
    /// Display name of the whole file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Index of the profile speedscope shows first.
    #[serde(
        rename = "activeProfileIndex",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub active_profile_index: Option<usize>,
    /// The program that wrote the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exporter: Option<String>,
}

/// The shared frame table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shared {
    /// Frames referenced by index from the profiles' samples.
    pub frames: Vec<Frame>,
}

/// One frame (function).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// Function name.
    pub name: String,
    /// Source file, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Line, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
    /// Column, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub col: Option<i64>,
}

/// A `"sampled"` profile: stacks (root first, frame indices) and their weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledProfile {
    /// Always `"sampled"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name shown in speedscope's profile selector.
    pub name: String,
    /// One of `none`, `nanoseconds`, `microseconds`, `milliseconds`, `seconds`, `bytes`.
    pub unit: String,
    /// Start of the value range (0).
    #[serde(rename = "startValue")]
    pub start_value: f64,
    /// End of the value range (the sum of the weights).
    #[serde(rename = "endValue")]
    pub end_value: f64,
    /// Stacks as frame indices, root first.
    pub samples: Vec<Vec<usize>>,
    /// Weight of each stack, in `unit`.
    pub weights: Vec<f64>,
}

/// Maps a pprof unit to the closest speedscope unit (`none` for counts and unknown units).
pub fn speedscope_unit(pprof_unit: &str) -> &'static str {
    match pprof_unit.to_ascii_lowercase().as_str() {
        "nanoseconds" | "nanosecond" | "ns" => "nanoseconds",
        "microseconds" | "microsecond" | "us" => "microseconds",
        "milliseconds" | "millisecond" | "ms" => "milliseconds",
        "seconds" | "second" | "s" => "seconds",
        "bytes" | "byte" | "b" => "bytes",
        _ => "none",
    }
}

#[derive(Default)]
struct FrameTable {
    frames: Vec<Frame>,
    index: HashMap<Frame, usize>,
}

impl FrameTable {
    fn intern(&mut self, frame: Frame) -> usize {
        if let Some(&i) = self.index.get(&frame) {
            return i;
        }
        self.frames.push(frame.clone());
        self.index.insert(frame, self.frames.len() - 1);
        self.frames.len() - 1
    }
}

/// Converts a profile. With `sample_index` `None` every sample type becomes one profile and the
/// default one is active; otherwise only the selected type (`go tool pprof -sample_index`
/// syntax) is written. Samples with a zero or negative value are left out (speedscope cannot
/// show negative weights). A `pprof -diff_base` profile becomes two profiles per sample type,
/// `... base` (its negated base samples, as positive weights: they add up to the total `go tool
/// pprof` divides by) and `... new`, the new one active, rather than the new side alone.
pub fn profile_to_speedscope(
    profile: &Profile,
    sample_index: Option<&str>,
    name: &str,
) -> Result<File, FormatError> {
    let default = select_sample_index(profile, sample_index)?;
    let indices: Vec<usize> = if sample_index.is_some() {
        vec![default]
    } else {
        (0..profile.sample_type.len()).collect()
    };
    let string = |i: i64| ember_pprof::string(profile, i);
    let functions: HashMap<u64, &ember_pprof::Function> =
        profile.function.iter().map(|f| (f.id, f)).collect();
    let mut table = FrameTable::default();
    // Frames of each location, caller first (inlined callees after the function they are inlined into).
    let mut location_frames: HashMap<u64, Vec<usize>> = HashMap::new();
    for loc in &profile.location {
        let frames = if loc.line.is_empty() {
            vec![table.intern(Frame {
                name: format!("0x{:x}", loc.address),
                file: None,
                line: None,
                col: None,
            })]
        } else {
            loc.line
                .iter()
                .rev()
                .map(|line| {
                    let (name, file) = match functions.get(&line.function_id) {
                        Some(f) => (string(f.name).to_owned(), string(f.filename).to_owned()),
                        None => (String::new(), String::new()),
                    };
                    table.intern(Frame {
                        name,
                        file: (!file.is_empty()).then_some(file),
                        line: None,
                        col: None,
                    })
                })
                .collect()
        };
        location_frames.insert(loc.id, frames);
    }
    // The sides of a -diff_base profile (base samples are negated): (which samples, their
    // sign, the name's suffix); one side of everything otherwise.
    let sides: &[(Option<bool>, i64, &str)] = if ember_pprof::has_diff_base(profile) {
        &[(Some(true), -1, " base"), (Some(false), 1, " new")]
    } else {
        &[(None, 1, "")]
    };
    let mut profiles = Vec::with_capacity(indices.len() * sides.len());
    let mut active = 0;
    for (&index, &(side, sign, suffix)) in indices
        .iter()
        .flat_map(|i| sides.iter().map(move |s| (i, s)))
    {
        if index == default {
            // The last side of the default type: the new profile of a diff.
            active = profiles.len();
        }
        let st = &profile.sample_type[index];
        let mut samples = Vec::new();
        let mut weights = Vec::new();
        for sample in &profile.sample {
            if side.is_some_and(|base| ember_pprof::is_diff_base_sample(profile, sample) != base) {
                continue;
            }
            let v = sample
                .value
                .get(index)
                .copied()
                .unwrap_or(0)
                .saturating_mul(sign);
            if v <= 0 {
                continue;
            }
            let stack: Vec<usize> = sample
                .location_id
                .iter()
                .rev()
                .filter_map(|id| location_frames.get(id))
                .flatten()
                .copied()
                .collect();
            samples.push(stack);
            weights.push(v as f64);
        }
        let end_value = weights.iter().sum();
        profiles.push(SampledProfile {
            kind: "sampled".to_owned(),
            name: format!("{} ({}){suffix}", string(st.r#type), string(st.unit)),
            unit: speedscope_unit(string(st.unit)).to_owned(),
            start_value: 0.0,
            end_value,
            samples,
            weights,
        });
    }
    Ok(File {
        schema: SCHEMA.to_owned(),
        shared: Shared {
            frames: table.frames,
        },
        profiles,
        name: Some(name.to_owned()),
        active_profile_index: Some(active),
        exporter: Some(format!("ember@{}", env!("CARGO_PKG_VERSION"))),
    })
}

/// Converts folded stacks (one `"sampled"` profile, unit `none`). Lines with a non-positive
/// count are left out; differential lines use their first count.
pub fn folded_to_speedscope(folded: &crate::folded::Folded, name: &str) -> File {
    let mut table = FrameTable::default();
    let mut samples = Vec::with_capacity(folded.lines.len());
    let mut weights = Vec::with_capacity(folded.lines.len());
    for line in &folded.lines {
        if line.count <= 0.0 || !line.count.is_finite() {
            continue;
        }
        let stack = line
            .stack
            .split(';')
            .map(|frame| {
                table.intern(Frame {
                    name: frame.to_owned(),
                    file: None,
                    line: None,
                    col: None,
                })
            })
            .collect();
        samples.push(stack);
        weights.push(line.count);
    }
    let end_value = weights.iter().sum();
    File {
        schema: SCHEMA.to_owned(),
        shared: Shared {
            frames: table.frames,
        },
        profiles: vec![SampledProfile {
            kind: "sampled".to_owned(),
            name: name.to_owned(),
            unit: "none".to_owned(),
            start_value: 0.0,
            end_value,
            samples,
            weights,
        }],
        name: Some(name.to_owned()),
        active_profile_index: Some(0),
        exporter: Some(format!("ember@{}", env!("CARGO_PKG_VERSION"))),
    }
}

impl File {
    /// Serialises the file as compact JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain structs of strings and numbers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A speedscope file as other programs write it: `"sampled"` and `"evented"` profiles.
#[derive(Deserialize)]
struct InFile {
    shared: InShared,
    profiles: Vec<InProfile>,
}

#[derive(Deserialize)]
struct InShared {
    frames: Vec<Frame>,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum InProfile {
    #[serde(rename = "sampled")]
    Sampled {
        #[serde(default)]
        name: String,
        unit: String,
        samples: Vec<Vec<usize>>,
        weights: Vec<f64>,
    },
    #[serde(rename = "evented")]
    Evented {
        #[serde(default)]
        name: String,
        unit: String,
        events: Vec<InEvent>,
    },
}

/// An open (`O`) or close (`C`) event of an evented profile.
#[derive(Deserialize)]
struct InEvent {
    #[serde(rename = "type")]
    kind: String,
    at: f64,
    frame: usize,
}

/// The pprof sample type `(type, unit)` of a speedscope unit.
fn sample_type_of(unit: &str) -> (&'static str, &'static str) {
    match unit {
        "nanoseconds" => ("time", "nanoseconds"),
        "microseconds" => ("time", "microseconds"),
        "milliseconds" => ("time", "milliseconds"),
        "seconds" => ("time", "seconds"),
        "bytes" => ("space", "bytes"),
        _ => ("samples", "count"),
    }
}

/// Reads speedscope JSON (any number of `"sampled"` or `"evented"` profiles) into one
/// profile: one sample type per distinct unit (`none` → `samples/count`, time units →
/// `time/<unit>`, `bytes` → `space/bytes`), a function per frame (name, file, line), weights
/// rounded to integers. An evented profile becomes one sample per stretch of time with an
/// unchanged stack, weighted by its length. With several profiles (speedscope's threads), each
/// sample carries the label `profile` = the profile's name, so nothing is merged away.
///
/// Errors name what does not follow the schema (a frame index out of range, a close event that
/// does not match the open frame, sample and weight counts that differ).
pub fn speedscope_to_profile(bytes: &[u8]) -> Result<Profile, String> {
    let file: InFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let mut types: Vec<(&str, &str)> = Vec::new();
    for p in &file.profiles {
        let unit = match p {
            InProfile::Sampled { unit, .. } | InProfile::Evented { unit, .. } => unit,
        };
        let t = sample_type_of(unit);
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types.is_empty() {
        return Err("no profiles".to_owned());
    }
    let mut builder = ember_pprof::ProfileBuilder::new(&types);
    let frames = &file.shared.frames;
    let mut locations: Vec<Option<u64>> = vec![None; frames.len()];
    let labelled = file.profiles.len() > 1;
    for (n, p) in file.profiles.iter().enumerate() {
        let (name, unit) = match p {
            InProfile::Sampled { name, unit, .. } | InProfile::Evented { name, unit, .. } => {
                (name.as_str(), unit.as_str())
            }
        };
        let column = types
            .iter()
            .position(|&t| t == sample_type_of(unit))
            .unwrap_or(0);
        let stacks = match p {
            InProfile::Sampled {
                samples, weights, ..
            } => {
                if samples.len() != weights.len() {
                    return Err(format!(
                        "profile {n} ({name:?}): {} samples but {} weights",
                        samples.len(),
                        weights.len()
                    ));
                }
                samples
                    .iter()
                    .cloned()
                    .zip(weights.iter().copied())
                    .collect()
            }
            InProfile::Evented { events, .. } => evented_stacks(n, name, events)?,
        };
        let mut values = vec![0i64; types.len()];
        let mut leaf_first = Vec::new();
        for (stack, weight) in stacks {
            leaf_first.clear();
            for &frame in stack.iter().rev() {
                let f = frames.get(frame).ok_or_else(|| {
                    format!(
                        "profile {n} ({name:?}): frame {frame} of {} frames",
                        frames.len()
                    )
                })?;
                let loc = *locations[frame].get_or_insert_with(|| {
                    let file = f.file.as_deref().unwrap_or("");
                    let function = builder.function(&f.name, &f.name, file);
                    builder.location(0, 0, &[(function, f.line.unwrap_or(0))])
                });
                leaf_first.push(loc);
            }
            values[column] = weight.round() as i64;
            let label = [ember_pprof::SampleLabel::Str("profile", name)];
            builder.add_sample(&leaf_first, &values, if labelled { &label } else { &[] });
        }
    }
    Ok(builder.build())
}

/// The `(stack, duration)` stretches of an evented profile, root first.
fn evented_stacks(
    n: usize,
    name: &str,
    events: &[InEvent],
) -> Result<Vec<(Vec<usize>, f64)>, String> {
    let mut out = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut last = events.first().map_or(0.0, |e| e.at);
    for e in events {
        if !stack.is_empty() && e.at > last {
            out.push((stack.clone(), e.at - last));
        }
        last = e.at;
        match e.kind.as_str() {
            "O" => stack.push(e.frame),
            "C" => {
                if stack.pop() != Some(e.frame) {
                    return Err(format!(
                        "profile {n} ({name:?}): close of frame {} at {} does not match the open frames",
                        e.frame, e.at
                    ));
                }
            }
            other => {
                return Err(format!(
                    "profile {n} ({name:?}): unknown event type {other:?}"
                ));
            }
        }
    }
    Ok(out)
}
