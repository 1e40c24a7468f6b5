//! Top tables of a merged selection and of a diff, from the merged call tree by frame name (the
//! one flame graphs are drawn from) rather than from a pprof profile made of it: the table is
//! the same (`ember_formats::top_of_tree` writes what `ember_formats::top` writes of
//! [`pprof_profile`](crate::pprof_profile)), at the cost of one walk of the tree.

use ember_formats::{
    FrameTree, FunctionTotals, TopOptions, TopTable, top_of_functions, top_of_tree,
};
use ember_store::{Merged, Query, Store};
use rustc_hash::FxHashMap;

use crate::flamebearer::type_parts;

/// Most rows of a [`Format::TopJson`](crate::Format::TopJson) table: far more functions than
/// anyone reads, few enough that the answer stays small.
pub const TOP_JSON_ROWS: usize = 5_000;

/// The options of the JSON top table: every function by flat value, no cut-off by share.
pub(crate) fn json_options() -> TopOptions {
    TopOptions {
        node_count: TOP_JSON_ROWS,
        node_fraction: 0.0,
        ..TopOptions::default()
    }
}

/// A top table as JSON: `{type, unit, total, rows: [{name, self, total}]}` with raw values in
/// the sample unit (the reader formats them).
pub(crate) fn top_json(table: &TopTable) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = table
        .rows
        .iter()
        .map(|r| serde_json::json!({ "name": r.name, "self": r.flat, "total": r.cum }))
        .collect();
    serde_json::json!({
        "type": table.sample_type,
        "unit": table.sample_unit,
        "total": table.total,
        "rows": rows,
    })
}

/// The diff's top table as JSON, for a table of biggest movers: `{type, unit, leftTotal,
/// rightTotal, rows: [{name, self, total, leftSelf, leftTotal, rightSelf, rightTotal}]}`, one
/// row per function of either side with its values on each side (from each side's own full
/// table, so a function's total counts recursion once) and `self`/`total` the comparison minus
/// the baseline; rows by |self change|, then |total change|, at most [`TOP_JSON_ROWS`].
pub(crate) fn diff_top_json(left: &Merged, right: &Merged) -> serde_json::Value {
    let every = TopOptions {
        node_count: 0,
        node_fraction: 0.0,
        ..TopOptions::default()
    };
    let (l, r) = (
        merged_top_with(left, &every),
        merged_top_with(right, &every),
    );
    // name -> [left self, left total, right self, right total]
    let mut by_name: std::collections::BTreeMap<&str, [i64; 4]> = Default::default();
    for (side, table) in [(0, &l), (2, &r)] {
        for row in &table.rows {
            let v = by_name.entry(row.name.as_str()).or_default();
            v[side] = row.flat;
            v[side + 1] = row.cum;
        }
    }
    let mut rows: Vec<(&str, [i64; 4])> = by_name.into_iter().collect();
    let change = |v: &[i64; 4]| (v[2].saturating_sub(v[0]), v[3].saturating_sub(v[1]));
    rows.sort_by_key(|(name, v)| {
        let (s, t) = change(v);
        (
            std::cmp::Reverse((s.unsigned_abs(), t.unsigned_abs())),
            *name,
        )
    });
    rows.truncate(TOP_JSON_ROWS);
    let typed = if right.profiles > 0 { &r } else { &l };
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|(name, v)| {
            let (s, t) = change(v);
            serde_json::json!({
                "name": name, "self": s, "total": t,
                "leftSelf": v[0], "leftTotal": v[1], "rightSelf": v[2], "rightTotal": v[3],
            })
        })
        .collect();
    serde_json::json!({
        "type": typed.sample_type,
        "unit": typed.sample_unit,
        "leftTotal": l.total,
        "rightTotal": r.total,
        "rows": rows,
    })
}

/// The top table of `merged`, typed by its first profile type.
pub fn merged_top(merged: &Merged) -> TopTable {
    merged_top_with(merged, &TopOptions::default())
}

/// [`merged_top`] with explicit options.
pub(crate) fn merged_top_with(merged: &Merged, options: &TopOptions) -> TopTable {
    let [_, sample_type, sample_unit, _, _] = type_parts(merged);
    let tree = FrameTree {
        frames: &merged.frames,
        self_values: &merged.self_values,
        names: &merged.names,
        sample_type: &sample_type,
        sample_unit: &sample_unit,
    };
    top_of_tree(&tree, options)
}

/// The top table of a selection, summed tier by tier ([`FunctionTotals`]): the table
/// [`merged_top`] writes of the full merge, without merging the tiers (a week of a busy
/// service is some 18 million frames, nearly all distinct). `None` when nothing matched.
/// Negative values (their |value| sums do not add up across tiers) take the full merge.
pub(crate) fn selection_top(
    store: &Store,
    tenant: &str,
    query: &Query,
    options: &TopOptions,
) -> Option<TopTable> {
    let mut sums = FunctionTotals::default();
    let mut meta = Merged::default();
    let mut negative = false;
    store.for_each_tier_merge(tenant, query, |m| {
        meta.profiles += m.profiles;
        meta.profile_types.extend(m.profile_types.iter().cloned());
        negative = negative || m.self_values.iter().any(|v| *v < 0);
        if !negative {
            let tree = FrameTree {
                frames: &m.frames,
                self_values: &m.self_values,
                names: &m.names,
                sample_type: "",
                sample_unit: "",
            };
            sums.add(&FunctionTotals::of_tree(&tree));
        }
    });
    if negative {
        let merged = store.merge_stacks(tenant, query);
        return (merged.profiles > 0 && !merged.is_empty())
            .then(|| merged_top_with(&merged, options));
    }
    if meta.profiles == 0 || sums.total == 0 {
        return None;
    }
    let [_, sample_type, sample_unit, _, _] = type_parts(&meta);
    Some(top_of_functions(&sums, &sample_type, &sample_unit, options))
}

/// The top table of the diff `right` minus `left` per stack, typed by the right side (the
/// left when the right is empty): the table of the diff's pprof (`pprof -diff_base=left
/// right`), with negative values where the right side spends less.
pub fn diff_top(left: &Merged, right: &Merged) -> TopTable {
    diff_top_with(left, right, &TopOptions::default())
}

/// [`diff_top`] with explicit options.
pub(crate) fn diff_top_with(left: &Merged, right: &Merged, options: &TopOptions) -> TopTable {
    let typed = if right.profiles > 0 { right } else { left };
    let [_, sample_type, sample_unit, _, _] = type_parts(typed);
    let diff = DiffFrames::new(left, right);
    let tree = FrameTree {
        frames: &diff.frames,
        self_values: &diff.deltas,
        names: &diff.names,
        sample_type: &sample_type,
        sample_unit: &sample_unit,
    };
    let mut sums = FunctionTotals::of_tree(&tree);
    // `go tool pprof -top -diff_base=left right` reads percentages against the base's total
    // (its `pprof::base` samples), the sum of every |change| only when the base is empty.
    let base: i64 = left
        .self_values
        .iter()
        .fold(0i64, |acc, v| acc.saturating_add(v.saturating_abs()));
    if base > 0 {
        sums.total = base;
    }
    top_of_functions(&sums, &sample_type, &sample_unit, options)
}

/// Both sides' call trees as one: a frame per distinct path of names, parents first, with
/// each stack's value right minus left (saturating, as the diff's pprof subtracts).
struct DiffFrames {
    frames: Vec<(u32, u32)>,
    deltas: Vec<i64>,
    names: Vec<String>,
}

impl DiffFrames {
    fn new(left: &Merged, right: &Merged) -> DiffFrames {
        let mut union = Union::default();
        let mut l = union.add(left);
        let r = union.add(right);
        // Frames only the right side has were added after the left side's values.
        l.resize(r.len(), 0);
        let deltas = l
            .iter()
            .zip(&r)
            .map(|(&l, &r)| r.saturating_sub(l))
            .collect();
        DiffFrames {
            frames: union.frames,
            deltas,
            names: union.names.into_iter().map(str::to_owned).collect(),
        }
    }
}

/// Call trees added up by path of names.
struct Union<'a> {
    frames: Vec<(u32, u32)>,
    names: Vec<&'a str>,
    // Fx hashing: a lookup per frame of both sides (millions for a day), keyed by this
    // union's own ids and the sides' names.
    name_ids: FxHashMap<&'a str, u32>,
    frame_ids: FxHashMap<(u32, u32), u32>,
}

impl Default for Union<'_> {
    fn default() -> Self {
        Union {
            frames: vec![(0, 0)],
            names: vec![""],
            name_ids: FxHashMap::from_iter([("", 0)]),
            frame_ids: FxHashMap::default(),
        }
    }
}

impl<'a> Union<'a> {
    /// Adds `side`'s frames (those new to the union after their parents) and returns its own
    /// values by union frame, summed where two of its frames have one path (saturating, as
    /// the stacks of a side are summed), for every frame of the union so far.
    fn add(&mut self, side: &'a Merged) -> Vec<i64> {
        let mut ids = vec![0u32; side.frames.len()];
        let mut values = vec![0i64; self.frames.len()];
        for (f, &(parent, name)) in side.frames.iter().enumerate() {
            let own = side.self_values.get(f).copied().unwrap_or(0);
            if f != 0 {
                let text = side.names.get(name as usize).map_or("", String::as_str);
                let name = *self.name_ids.entry(text).or_insert_with(|| {
                    self.names.push(text);
                    self.names.len() as u32 - 1
                });
                // Parents come first, so the parent's union id is known (a frame that breaks
                // the rule hangs from the root).
                let key = (ids.get(parent as usize).copied().unwrap_or(0), name);
                let id = *self.frame_ids.entry(key).or_insert_with(|| {
                    self.frames.push(key);
                    values.push(0);
                    self.frames.len() as u32 - 1
                });
                ids[f] = id;
            }
            let v = &mut values[ids[f] as usize];
            *v = v.saturating_add(own);
        }
        values
    }
}
