//! The node limit applied to a merged selection without building its whole call tree.
//!
//! A day of a busy service merges into millions of frames, of which a flame graph shows a
//! thousand. [`Tree::from_merged_cut`] computes totals on the merged frames' flat arrays,
//! then walks from the root heaviest-first, so only the kept nodes and their children are
//! ever looked at; the result is the tree [`Tree::truncate`] makes of the full tree.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use ember_store::Merged;

use crate::tree::{Node, Tree};

/// A frame waiting to be kept: heavier first, then shallower, then first in name order.
#[derive(PartialEq, Eq)]
struct Candidate {
    total: i64,
    /// Sibling positions (children in name order) from the root: its depth is the length,
    /// and comparing two of equal depth compares their places in a name-ordered walk.
    path: Vec<u32>,
    frame: u32,
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap pops the greatest: the heaviest, then the shallowest, then the first.
        self.total
            .cmp(&other.total)
            .then_with(|| Reverse(self.path.len()).cmp(&Reverse(other.path.len())))
            .then_with(|| Reverse(&self.path).cmp(&Reverse(&other.path)))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Tree {
    /// The call tree of `merged` cut to about `max_nodes` nodes (0 = no limit), equal to
    /// `Tree::from_merged(merged).truncate(max_nodes)` but in time proportional to the
    /// frames, not to building and sorting a node per frame. Falls back to exactly that when
    /// a value is negative (the heaviest-first walk relies on parents being at least as
    /// heavy as their children). A merge with frames left out ([`Merged::rest`], from
    /// `Store::merge_stacks_heavy`) counts each frame's `rest` in its total and in its
    /// `other` child.
    pub fn from_merged_cut(merged: &Merged, max_nodes: usize) -> Tree {
        let n = merged.frames.len();
        // A merge with frames left out (`rest`) goes through the cut below, the one place
        // that adds them back.
        let complete = merged.rest.is_empty();
        if complete && (max_nodes == 0 || n <= max_nodes + 1) {
            return Tree::from_merged(merged);
        }
        if complete && merged.self_values.iter().any(|v| *v < 0) {
            return Tree::from_merged(merged).truncate(max_nodes);
        }
        // Totals: parents come before children, so one reverse pass folds values up.
        let mut totals = merged.self_values.clone();
        totals.resize(n, 0);
        for (t, r) in totals.iter_mut().zip(&merged.rest) {
            *t = t.saturating_add(*r);
        }
        for f in (1..n).rev() {
            let p = merged.frames[f].0 as usize;
            totals[p] = totals[p].saturating_add(totals[f]);
        }
        let children = Children::new(merged);
        let by_name = |frame: u32| -> Vec<u32> {
            let mut kids = children.of(frame).to_vec();
            kids.sort_by(|a, b| name_of(merged, *a).cmp(name_of(merged, *b)));
            kids
        };
        // Heaviest-first from the root: each kept frame offers its children.
        let mut kept: Vec<u32> = Vec::with_capacity(max_nodes + 1);
        let mut is_kept = std::collections::HashSet::with_capacity(max_nodes + 1);
        let mut heap = BinaryHeap::new();
        let offer = |heap: &mut BinaryHeap<Candidate>, frame: u32, path: &[u32]| {
            for (i, c) in by_name(frame).into_iter().enumerate() {
                let mut p = path.to_vec();
                p.push(i as u32);
                heap.push(Candidate {
                    total: totals[c as usize].abs(),
                    path: p,
                    frame: c,
                });
            }
        };
        offer(&mut heap, 0, &[]);
        while max_nodes == 0 || kept.len() < max_nodes {
            let Some(c) = heap.pop() else { break };
            offer(&mut heap, c.frame, &c.path);
            is_kept.insert(c.frame);
            kept.push(c.frame);
        }
        build(merged, &totals, &is_kept, by_name)
    }
}

/// The children of every frame, in one array (counting sort by parent).
struct Children {
    start: Vec<u32>,
    list: Vec<u32>,
}

impl Children {
    fn new(merged: &Merged) -> Children {
        let n = merged.frames.len();
        let mut start = vec![0u32; n + 1];
        for &(p, _) in merged.frames.iter().skip(1) {
            start[p as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = vec![0u32; n.saturating_sub(1)];
        for (f, &(p, _)) in merged.frames.iter().enumerate().skip(1) {
            list[fill[p as usize] as usize] = f as u32;
            fill[p as usize] += 1;
        }
        Children { start, list }
    }

    fn of(&self, frame: u32) -> &[u32] {
        let f = frame as usize;
        &self.list[self.start[f] as usize..self.start[f + 1] as usize]
    }
}

fn name_of(merged: &Merged, frame: u32) -> &str {
    let name = merged.frames[frame as usize].1 as usize;
    merged.names.get(name).map_or("", String::as_str)
}

/// The tree of the kept frames: each kept frame's dropped children summed into one `other`
/// child, as [`Tree::truncate`] does.
fn build<'m>(
    merged: &'m Merged,
    totals: &[i64],
    kept: &std::collections::HashSet<u32>,
    by_name: impl Fn(u32) -> Vec<u32>,
) -> Tree {
    let mut names = vec!["total".to_string()];
    let mut name_ids: std::collections::HashMap<&'m str, u32> = std::collections::HashMap::new();
    let mut name_id = |names: &mut Vec<String>, s: &'m str| -> u32 {
        *name_ids.entry(s).or_insert_with(|| {
            names.push(s.to_string());
            (names.len() - 1) as u32
        })
    };
    let mut nodes = vec![Node {
        name: 0,
        parent: 0,
        total: totals[0],
        self_value: merged.self_values.first().copied().unwrap_or(0),
        children: Vec::new(),
    }];
    let mut stack = vec![(0u32, 0u32)];
    while let Some((frame, dst)) = stack.pop() {
        let mut dropped = merged.rest.get(frame as usize).copied().unwrap_or(0);
        for c in by_name(frame) {
            if !kept.contains(&c) {
                dropped = dropped.saturating_add(totals[c as usize]);
                continue;
            }
            let id = nodes.len() as u32;
            let name = name_id(&mut names, name_of(merged, c));
            nodes.push(Node {
                name,
                parent: dst,
                total: totals[c as usize],
                self_value: merged.self_values[c as usize],
                children: Vec::new(),
            });
            nodes[dst as usize].children.push(id);
            stack.push((c, id));
        }
        if dropped != 0 {
            let id = nodes.len() as u32;
            let name = name_id(&mut names, "other");
            nodes.push(Node {
                name,
                parent: dst,
                total: dropped,
                self_value: dropped,
                children: Vec::new(),
            });
            nodes[dst as usize].children.push(id);
        }
    }
    let mut tree = Tree { names, nodes };
    tree.sort_children();
    tree
}
