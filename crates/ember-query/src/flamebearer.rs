//! Pyroscope's flamebearer JSON (`/pyroscope/render`, `/pyroscope/render-diff` and the
//! `flamebearer` format of the HTTP API): the `single` form with a timeline and the `double`
//! (diff) form.

use ember_store::Merged;
use serde_json::{Value, json};

use crate::tree::{DiffTree, Tree};

/// The parts `name:type:unit:period_type:period_unit` of the first profile type of `merged`
/// (empty strings when nothing matched).
pub(crate) fn type_parts(merged: &Merged) -> [String; 5] {
    let id = merged
        .profile_types
        .iter()
        .next()
        .map(String::as_str)
        .unwrap_or_default();
    let mut p = id.split(':');
    std::array::from_fn(|_| p.next().unwrap_or_default().to_string())
}

/// Pyroscope's metadata `units` and `sampleRate` for a sample type/unit.
pub fn units(sample_type: &str, unit: &str) -> (&'static str, i64) {
    match unit {
        "nanoseconds" => ("samples", 1_000_000_000),
        "microseconds" => ("samples", 1_000_000),
        "bytes" => ("bytes", 100),
        _ if sample_type.contains("goroutine") => ("goroutines", 100),
        _ if sample_type.contains("alloc") || sample_type.contains("inuse") => ("objects", 100),
        _ => ("samples", 100),
    }
}

/// The timeline of a flame graph: totals per `step_nanos` bucket from `start_nanos`.
#[derive(Debug, Clone)]
pub(crate) struct Timeline {
    pub(crate) start_nanos: i64,
    pub(crate) step_nanos: i64,
    pub(crate) samples: Vec<i64>,
}

/// Pyroscope's `timeline` object of `timeline` (whole seconds).
pub(crate) fn timeline_json(timeline: &Timeline) -> Value {
    json!({
        "startTime": timeline.start_nanos / 1_000_000_000,
        "samples": timeline.samples,
        "durationDelta": timeline.step_nanos / 1_000_000_000,
    })
}

/// The `single` flamebearer of `tree` (already truncated), typed by `merged`.
pub(crate) fn single(tree: &Tree, merged: &Merged, timeline: &Timeline, title: &str) -> Value {
    let (levels, max_self) = tree.levels();
    let [_, sample_type, unit, _, _] = type_parts(merged);
    let (units, sample_rate) = units(&sample_type, &unit);
    json!({
        "version": 1,
        "flamebearer": {
            "names": tree.names,
            "levels": levels,
            "numTicks": tree.nodes[0].total,
            "maxSelf": max_self,
        },
        "metadata": {
            "format": "single",
            "spyName": "",
            "sampleRate": sample_rate,
            "units": units,
            "name": title,
        },
        "timeline": timeline_json(timeline),
        "groups": null,
        "heatmap": null,
    })
}

/// The `double` flamebearer of `tree`, typed by the right side (the left when the right
/// matched nothing).
pub(crate) fn double(tree: &DiffTree, left: &Merged, right: &Merged, title: &str) -> Value {
    let typed = if right.profiles > 0 { right } else { left };
    let [_, sample_type, unit, _, _] = type_parts(typed);
    let (units, sample_rate) = units(&sample_type, &unit);
    let (levels, max_self) = tree.levels();
    json!({
        "version": 1,
        "flamebearer": {
            "names": tree.names,
            "levels": levels,
            "numTicks": tree.left_total().saturating_add(tree.right_total()),
            "maxSelf": max_self,
        },
        "metadata": {
            "format": "double",
            "spyName": "",
            "sampleRate": sample_rate,
            "units": units,
            "name": title,
        },
        "leftTicks": tree.left_total(),
        "rightTicks": tree.right_total(),
    })
}
