//! The compact binary flame graph (`format=flamebearer-bin`): the same tree as the
//! flamebearer JSON, laid out so a browser reads it without parsing. The web UI asks for it
//! because `JSON.parse` of a 100,000-node flamebearer (nested arrays of numbers, ~3 MB) and
//! the walk that turns it into typed arrays took most of the time to its first painted frame;
//! here every column is a typed array over the answer's own bytes.
//!
//! Layout (little-endian):
//!
//! | bytes | what |
//! |---|---|
//! | 4 | magic `EMFG` |
//! | 4 | `u32` H: length of the header |
//! | H | header, JSON: `format` (`single` or `double`), `units`, `sampleRate`, `name`, `numTicks`, `maxSelf`, `levels` (the number of nodes of each depth, root first), `names` (how many), `values` (`u32` or `f64`: the width of the value columns), `scale` (what a value column's numbers are multiplied by), and for `double` `leftTicks`, `rightTicks` |
//! | 0–7 | zero bytes, so the columns start at a multiple of 8 |
//! | 4·N or 8·N each | value columns, `u32` or `f64`: `single`: total, self; `double`: left total, left self, right total, right self |
//! | 4·N each | `u32` columns: name (index into the names), parent (index of the parent within the previous depth; 0 for the root) |
//! | 4·K | `u32` length of each name in UTF-16 code units (what a JavaScript string counts) |
//! | rest | the names' UTF-8 bytes back to back |
//!
//! N nodes in breadth-first order: depth by depth, each depth left to right, so a node's
//! children follow one another in its own order (by name), and a node starts where its parent
//! starts plus the totals of its earlier siblings (the flamebearer's x offsets, left for the
//! reader to add up). Values are written as `u32` multiples of `scale` (the greatest common
//! divisor of every value: a CPU profile's values are multiples of its sampling period) when
//! every value is such a multiple that fits, which halves those columns; otherwise as `f64`
//! with `scale` 1, exact up to 2^53 as JSON numbers are in a browser.
//!
//! A `single` answer asked for with a `min_share` (`minShare=`, the web UI's first paint)
//! holds only the nodes whose total is at least that share of the whole (an ancestor is at
//! least as heavy as its descendants, so every kept node's parent is kept). Those keep their
//! places: the header says `"x": true` and `"nodes"` (how many the whole tree has), a third
//! value column after total and self holds each node's x (its start, in the units of the
//! values: where it is in the whole tree, gaps of the nodes left out included), `levels`
//! goes on with zeros to the whole tree's depth, and the names are only those of the nodes
//! kept.

use ember_store::Merged;
use serde_json::json;

use crate::flamebearer::{type_parts, units};
use crate::tree::{DiffTree, Tree};

/// The first bytes of every answer.
pub const MAGIC: &[u8; 4] = b"EMFG";

/// The `Content-Type` of the answer.
pub const CONTENT_TYPE: &str = "application/vnd.ember.flamegraph";

/// The nodes of a tree in breadth-first order with each one's parent position within the
/// previous depth, and the number of nodes per depth.
struct Order {
    ids: Vec<u32>,
    parents: Vec<u32>,
    levels: Vec<usize>,
}

/// Walks depth by depth from node 0, `children(id)` giving a node's children in order, taking
/// only those that `keep`.
fn breadth_first<'a>(
    count: usize,
    children: impl Fn(u32) -> &'a [u32],
    keep: impl Fn(u32) -> bool,
) -> Order {
    let mut ids = Vec::with_capacity(count);
    let mut parents = Vec::with_capacity(count);
    let mut levels = Vec::new();
    ids.push(0u32);
    parents.push(0u32);
    let mut start = 0;
    while start < ids.len() {
        let end = ids.len();
        levels.push(end - start);
        for k in start..end {
            let parent = (k - start) as u32;
            for &c in children(ids[k]).iter().filter(|&&c| keep(c)) {
                ids.push(c);
                parents.push(parent);
            }
        }
        start = end;
    }
    Order {
        ids,
        parents,
        levels,
    }
}

/// The greatest common divisor of `a` and `b` (non-negative).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Writes the header (with the value columns' `values` width and `scale` added), its
/// padding, the value columns, the `u32` columns and the names.
fn encode(
    mut header: serde_json::Value,
    values: &[Vec<i64>],
    ints: &[Vec<u32>],
    names: &[String],
) -> Vec<u8> {
    let all = || values.iter().flatten().copied();
    let scale = all().fold(0u64, |g, v| gcd(g, v.unsigned_abs())).max(1);
    let narrow = all().all(|v| v >= 0 && v as u64 / scale <= u64::from(u32::MAX));
    let (width, scale) = if narrow { (4, scale) } else { (8, 1) };
    header["values"] = json!(if narrow { "u32" } else { "f64" });
    header["scale"] = json!(scale);
    let header = header.to_string();
    let pad = (8 - (8 + header.len()) % 8) % 8;
    let n = values.first().map_or(0, Vec::len);
    let text: usize = names.iter().map(String::len).sum();
    let size = 8
        + header.len()
        + pad
        + n * (width * values.len() + 4 * ints.len())
        + 4 * names.len()
        + text;
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.resize(out.len() + pad, 0);
    for column in values {
        for &v in column {
            if narrow {
                out.extend_from_slice(&((v as u64 / scale) as u32).to_le_bytes());
            } else {
                out.extend_from_slice(&(v as f64).to_le_bytes());
            }
        }
    }
    for column in ints {
        for v in column {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    for name in names {
        out.extend_from_slice(&(name.encode_utf16().count() as u32).to_le_bytes());
    }
    for name in names {
        out.extend_from_slice(name.as_bytes());
    }
    debug_assert_eq!(out.len(), size);
    out
}

/// The `single` binary flame graph of `tree` (already truncated), typed by `merged`; with a
/// `min_share` above 0 (and no negative value), only the nodes of at least that share of the
/// whole, each with its x (see the module docs).
pub(crate) fn single(tree: &Tree, merged: &Merged, title: &str, min_share: f64) -> Vec<u8> {
    let children = |id: u32| tree.nodes[id as usize].children.as_slice();
    let whole = breadth_first(tree.nodes.len(), children, |_| true);
    let prune = min_share > 0.0 && tree.nodes.iter().all(|n| n.total >= 0 && n.self_value >= 0);
    let (order, x) = if prune {
        // Where each node starts: its parent's start plus its earlier siblings' totals
        // (parents come before their children in breadth-first order).
        let mut x = vec![0i64; tree.nodes.len()];
        for &id in &whole.ids {
            let mut at = x[id as usize];
            for &c in children(id) {
                x[c as usize] = at;
                at = at.saturating_add(tree.nodes[c as usize].total);
            }
        }
        let least = min_share * tree.nodes[0].total as f64;
        let mut kept = breadth_first(tree.nodes.len(), children, |c| {
            tree.nodes[c as usize].total as f64 >= least
        });
        // The whole tree's depth, so a reader lays the graph out as tall as the whole one.
        kept.levels.resize(whole.levels.len(), 0);
        (kept, Some(x))
    } else {
        (whole, None)
    };
    let n = order.ids.len();
    let (mut total, mut self_value, mut name) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut max_self = 0i64;
    for &id in &order.ids {
        let node = &tree.nodes[id as usize];
        total.push(node.total);
        self_value.push(node.self_value);
        name.push(node.name);
        max_self = max_self.max(node.self_value);
    }
    let [_, sample_type, unit, _, _] = type_parts(merged);
    let (units, sample_rate) = units(&sample_type, &unit);
    let mut header = json!({
        "format": "single",
        "units": units,
        "sampleRate": sample_rate,
        "name": title,
        "numTicks": tree.nodes[0].total,
        "maxSelf": max_self,
        "levels": order.levels,
        "names": tree.names.len(),
    });
    let mut values = vec![total, self_value];
    let Some(x) = x else {
        return encode(header, &values, &[name, order.parents], &tree.names);
    };
    header["x"] = json!(true);
    header["nodes"] = json!(tree.nodes.len());
    values.push(order.ids.iter().map(|&id| x[id as usize]).collect());
    // Only the names of the nodes kept, in the order they are first used.
    let mut renamed = vec![u32::MAX; tree.names.len()];
    let mut names = Vec::new();
    for id in &mut name {
        let new = &mut renamed[*id as usize];
        if *new == u32::MAX {
            *new = names.len() as u32;
            names.push(tree.names[*id as usize].clone());
        }
        *id = *new;
    }
    header["names"] = json!(names.len());
    encode(header, &values, &[name, order.parents], &names)
}

/// The `double` binary flame graph of `tree`, typed by the right side (the left when the
/// right matched nothing), as [`crate::flamebearer::double`].
pub(crate) fn double(tree: &DiffTree, left: &Merged, right: &Merged, title: &str) -> Vec<u8> {
    let order = breadth_first(
        tree.nodes.len(),
        |id| &tree.nodes[id as usize].children,
        |_| true,
    );
    let n = order.ids.len();
    let mut values: Vec<Vec<i64>> = (0..4).map(|_| Vec::with_capacity(n)).collect();
    let mut name = Vec::with_capacity(n);
    let mut max_self = 0i64;
    for &id in &order.ids {
        let node = &tree.nodes[id as usize];
        for (column, v) in
            values
                .iter_mut()
                .zip([node.left.0, node.left.1, node.right.0, node.right.1])
        {
            column.push(v);
        }
        name.push(node.name);
        max_self = max_self.max(node.left.1).max(node.right.1);
    }
    let typed = if right.profiles > 0 { right } else { left };
    let [_, sample_type, unit, _, _] = type_parts(typed);
    let (units, sample_rate) = units(&sample_type, &unit);
    let header = json!({
        "format": "double",
        "units": units,
        "sampleRate": sample_rate,
        "name": title,
        "numTicks": tree.left_total().saturating_add(tree.right_total()),
        "maxSelf": max_self,
        "leftTicks": tree.left_total(),
        "rightTicks": tree.right_total(),
        "levels": order.levels,
        "names": tree.names.len(),
    });
    encode(header, &values, &[name, order.parents], &tree.names)
}

#[cfg(test)]
mod tests;
