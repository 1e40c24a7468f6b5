//! Call trees built from merged stacks, node-limit truncation, and their flamebearer levels
//! (the encoding Pyroscope's flame graph UIs and `querier.v1` share).
//!
//! Truncation keeps the `max_nodes` heaviest nodes by total (plus the ancestors that make
//! them reachable), so a hot frame stays visible however deep it is; only the children that
//! did not make the cut are summed into one `other` node under their parent.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// One call-tree node.
#[derive(Debug, Clone)]
pub struct Node {
    /// Index into [`Tree::names`].
    pub name: u32,
    /// Parent node (the root is its own parent).
    pub parent: u32,
    /// Value of this node and everything below it.
    pub total: i64,
    /// Value of samples ending here.
    pub self_value: i64,
    /// Children, sorted by name.
    pub children: Vec<u32>,
}

/// A call tree; node 0 is the root named `total`.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Distinct frame names.
    pub names: Vec<String>,
    /// Nodes; index 0 is the root.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// Builds the tree of `(frames root→leaf, value)` stacks.
    pub fn from_stacks(stacks: &[(Vec<String>, i64)]) -> Tree {
        let mut names = vec!["total".to_string()];
        let mut name_ids: HashMap<String, u32> = HashMap::new();
        name_ids.insert("total".into(), 0);
        let mut nodes = vec![Node {
            name: 0,
            parent: 0,
            total: 0,
            self_value: 0,
            children: Vec::new(),
        }];
        let mut child_ids: HashMap<(u32, u32), u32> = HashMap::new();
        for (frames, value) in stacks {
            let mut node = 0u32;
            nodes[0].total = nodes[0].total.saturating_add(*value);
            for f in frames {
                let name = match name_ids.get(f.as_str()) {
                    Some(&id) => id,
                    None => {
                        let id = names.len() as u32;
                        names.push(f.clone());
                        name_ids.insert(f.clone(), id);
                        id
                    }
                };
                node = match child_ids.get(&(node, name)) {
                    Some(&c) => c,
                    None => {
                        let c = nodes.len() as u32;
                        nodes.push(Node {
                            name,
                            parent: node,
                            total: 0,
                            self_value: 0,
                            children: Vec::new(),
                        });
                        nodes[node as usize].children.push(c);
                        child_ids.insert((node, name), c);
                        c
                    }
                };
                let n = &mut nodes[node as usize];
                n.total = n.total.saturating_add(*value);
            }
            let n = &mut nodes[node as usize];
            n.self_value = n.self_value.saturating_add(*value);
        }
        let mut tree = Tree { names, nodes };
        tree.sort_children();
        tree
    }

    /// The call tree of a merged selection, node for frame (no strings built but the
    /// names the selection uses).
    pub fn from_merged(merged: &ember_store::Merged) -> Tree {
        let mut names = merged.names.clone();
        let root_name = "total".to_string();
        // Frame name 0 is "" in the merge; the tree's name 0 is the root's `total`, so a real
        // frame named "" gets its own entry.
        let empty = match names.first_mut() {
            Some(first) => {
                *first = root_name;
                names.push(String::new());
                (names.len() - 1) as u32
            }
            None => {
                names.push(root_name);
                0
            }
        };
        let mut nodes: Vec<Node> = merged
            .frames
            .iter()
            .zip(&merged.self_values)
            .enumerate()
            .map(|(i, (&(parent, name), &v))| Node {
                name: match (i, name) {
                    (0, _) => 0,
                    (_, 0) => empty,
                    (_, n) => n,
                },
                parent,
                total: v,
                self_value: v,
                children: Vec::new(),
            })
            .collect();
        if nodes.is_empty() {
            nodes.push(Node {
                name: 0,
                parent: 0,
                total: 0,
                self_value: 0,
                children: Vec::new(),
            });
        }
        // Parents come before children: a reverse pass folds totals up.
        for i in (1..nodes.len()).rev() {
            let (p, t) = (nodes[i].parent as usize, nodes[i].total);
            nodes[p].total = nodes[p].total.saturating_add(t);
        }
        for i in 1..nodes.len() {
            let p = nodes[i].parent as usize;
            nodes[p].children.push(i as u32);
        }
        let mut tree = Tree { names, nodes };
        tree.sort_children();
        tree
    }

    pub(crate) fn sort_children(&mut self) {
        let keys: Vec<u32> = self.nodes.iter().map(|n| n.name).collect();
        sort_children_by_name(
            &self.names,
            &keys,
            self.nodes.iter_mut().map(|n| &mut n.children),
        );
    }

    /// A copy keeping at most about `max_nodes` nodes (0 = no limit): the heaviest by total
    /// and their ancestors; dropped children of a kept node become one `other` child.
    pub fn truncate(&self, max_nodes: usize) -> Tree {
        if max_nodes == 0 || self.nodes.len() <= max_nodes + 1 {
            return self.clone();
        }
        let mut depth = vec![0u32; self.nodes.len()];
        for i in 1..self.nodes.len() {
            // Parents are created before their children, so their depth is known.
            depth[i] = depth[self.nodes[i].parent as usize] + 1;
        }
        // Ties (common: many frames hold one sample) go to the first in name order, so the
        // cut does not depend on the order in which the tree was built.
        let rank = self.preorder_ranks();
        let heavier = |a: &u32, b: &u32| {
            let (na, nb) = (&self.nodes[*a as usize], &self.nodes[*b as usize]);
            nb.total
                .abs()
                .cmp(&na.total.abs())
                .then(depth[*a as usize].cmp(&depth[*b as usize]))
                .then(rank[*a as usize].cmp(&rank[*b as usize]))
        };
        let mut order: Vec<u32> = (1..self.nodes.len() as u32).collect();
        // Only the heaviest `max_nodes` need ordering: with non-negative values a node's
        // ancestors are at least as heavy and shallower, so they come first and each of these
        // adds one node. Should they not suffice (negative values), the rest is ordered too.
        let (head, rest) = if order.len() > max_nodes {
            order.select_nth_unstable_by(max_nodes, heavier);
            order.split_at_mut(max_nodes)
        } else {
            order.split_at_mut(0)
        };
        head.sort_unstable_by(heavier);
        let mut keep = vec![false; self.nodes.len()];
        keep[0] = true;
        let mut kept = 0usize;
        let mut visit = |id: u32, kept: &mut usize| {
            let mut n = id;
            while !keep[n as usize] {
                keep[n as usize] = true;
                *kept += 1;
                n = self.nodes[n as usize].parent;
            }
        };
        for &id in head.iter() {
            if kept >= max_nodes {
                break;
            }
            visit(id, &mut kept);
        }
        if kept < max_nodes {
            rest.sort_unstable_by(heavier);
            for &id in rest.iter() {
                if kept >= max_nodes {
                    break;
                }
                visit(id, &mut kept);
            }
        }
        let mut names = self.names.clone();
        let other = names.len() as u32;
        names.push("other".into());
        let mut out = Tree {
            names,
            nodes: Vec::new(),
        };
        let mut stack = vec![(0u32, 0u32)];
        out.nodes.push(Node {
            children: Vec::new(),
            ..self.nodes[0].clone()
        });
        while let Some((src, dst)) = stack.pop() {
            let mut dropped = 0i64;
            for &c in &self.nodes[src as usize].children {
                let cn = &self.nodes[c as usize];
                if keep[c as usize] {
                    let id = out.nodes.len() as u32;
                    out.nodes.push(Node {
                        name: cn.name,
                        parent: dst,
                        total: cn.total,
                        self_value: cn.self_value,
                        children: Vec::new(),
                    });
                    out.nodes[dst as usize].children.push(id);
                    stack.push((c, id));
                } else {
                    dropped = dropped.saturating_add(cn.total);
                }
            }
            if dropped != 0 {
                let id = out.nodes.len() as u32;
                out.nodes.push(Node {
                    name: other,
                    parent: dst,
                    total: dropped,
                    self_value: dropped,
                    children: Vec::new(),
                });
                out.nodes[dst as usize].children.push(id);
            }
        }
        out.sort_children();
        out
    }

    /// Each node's position in a depth-first walk with children in name order.
    fn preorder_ranks(&self) -> Vec<u32> {
        let mut rank = vec![0u32; self.nodes.len()];
        let mut next = 0u32;
        let mut stack = vec![0u32];
        while let Some(id) = stack.pop() {
            rank[id as usize] = next;
            next += 1;
            stack.extend(self.nodes[id as usize].children.iter().rev());
        }
        rank
    }

    /// Flamebearer levels: per depth, `[x offset from the previous node's end, total, self,
    /// name index]` quadruples, plus `maxSelf`.
    pub fn levels(&self) -> (Vec<Vec<i64>>, i64) {
        let mut levels: Vec<Vec<i64>> = Vec::new();
        let mut ends: Vec<i64> = Vec::new();
        let mut max_self = 0i64;
        // (node, depth, x)
        let mut stack = vec![(0u32, 0usize, 0i64)];
        while let Some((id, d, x)) = stack.pop() {
            let n = &self.nodes[id as usize];
            if levels.len() <= d {
                levels.push(Vec::new());
                ends.push(0);
            }
            levels[d].extend_from_slice(&[x - ends[d], n.total, n.self_value, i64::from(n.name)]);
            ends[d] = x + n.total;
            max_self = max_self.max(n.self_value);
            let mut cx = x;
            let mut kids = Vec::with_capacity(n.children.len());
            for &c in &n.children {
                kids.push((c, d + 1, cx));
                cx += self.nodes[c as usize].total;
            }
            // Reverse so the first child is popped first and x grows left to right in each level.
            stack.extend(kids.into_iter().rev());
        }
        (levels, max_self)
    }
}

/// Sorts each child list by the children's names (the order flame graphs lay them out in),
/// for [`Tree`] and [`DiffTree`] alike: `name_of[node]` is a node's index into `names`.
fn sort_children_by_name<'a>(
    names: &[String],
    name_of: &[u32],
    child_lists: impl Iterator<Item = &'a mut Vec<u32>>,
) {
    let name = |node: u32| &names[name_of[node as usize] as usize];
    for children in child_lists {
        children.sort_by(|a, b| name(*a).cmp(name(*b)));
    }
}

/// One node of a [`DiffTree`]: totals and self values of both sides.
#[derive(Debug, Clone, Default)]
pub struct DiffNode {
    /// Index into [`DiffTree::names`].
    pub name: u32,
    /// Baseline total and self.
    pub left: (i64, i64),
    /// Comparison total and self.
    pub right: (i64, i64),
    /// Children, sorted by name.
    pub children: Vec<u32>,
}

/// The union call tree of two selections, for diff flame graphs.
#[derive(Debug, Clone)]
pub struct DiffTree {
    /// Distinct frame names (0 is `total`).
    pub names: Vec<String>,
    /// Nodes; 0 is the root.
    pub nodes: Vec<DiffNode>,
}

impl DiffTree {
    /// Builds the union tree of the `left` and `right` stacks.
    pub fn new(left: &[(Vec<String>, i64)], right: &[(Vec<String>, i64)]) -> DiffTree {
        let mut t = DiffTree {
            names: vec!["total".into()],
            nodes: vec![DiffNode::default()],
        };
        let mut name_ids: HashMap<String, u32> = HashMap::new();
        let mut child_ids: HashMap<(u32, u32), u32> = HashMap::new();
        for (side, stacks) in [(0, left), (1, right)] {
            for (frames, v) in stacks {
                let add = |n: &mut DiffNode, self_too: bool| {
                    let slot = if side == 0 { &mut n.left } else { &mut n.right };
                    slot.0 = slot.0.saturating_add(*v);
                    if self_too {
                        slot.1 = slot.1.saturating_add(*v);
                    }
                };
                add(&mut t.nodes[0], frames.is_empty());
                let mut node = 0u32;
                for (i, f) in frames.iter().enumerate() {
                    let name = *name_ids.entry(f.clone()).or_insert_with(|| {
                        t.names.push(f.clone());
                        t.names.len() as u32 - 1
                    });
                    node = *child_ids.entry((node, name)).or_insert_with(|| {
                        t.nodes.push(DiffNode {
                            name,
                            ..Default::default()
                        });
                        let id = t.nodes.len() as u32 - 1;
                        t.nodes[node as usize].children.push(id);
                        id
                    });
                    add(&mut t.nodes[node as usize], i + 1 == frames.len());
                }
            }
        }
        t.sort_children();
        t
    }

    /// Sorts every node's children by name (the order flame graphs lay them out in).
    fn sort_children(&mut self) {
        let keys: Vec<u32> = self.nodes.iter().map(|n| n.name).collect();
        sort_children_by_name(
            &self.names,
            &keys,
            self.nodes.iter_mut().map(|n| &mut n.children),
        );
    }

    /// A copy keeping at most `max_nodes` nodes besides the root (0 = no limit): heaviest
    /// first by both sides' totals, walking down from the root (a node is reachable once
    /// its parent is kept); the dropped children of a kept node become one `other` child
    /// holding their sums on each side, so both sides' totals stay whole.
    pub fn truncate(&self, max_nodes: usize) -> DiffTree {
        if max_nodes == 0 || self.nodes.len() <= max_nodes + 1 {
            return self.clone();
        }
        let weight = |id: u32| {
            let n = &self.nodes[id as usize];
            n.left
                .0
                .saturating_abs()
                .saturating_add(n.right.0.saturating_abs())
        };
        let mut keep = vec![false; self.nodes.len()];
        // Heaviest first; ties to the node built first, so the cut is the same every time.
        let mut heap: BinaryHeap<(i64, Reverse<u32>)> = BinaryHeap::new();
        heap.extend(
            self.nodes[0]
                .children
                .iter()
                .map(|&c| (weight(c), Reverse(c))),
        );
        for _ in 0..max_nodes {
            let Some((_, Reverse(id))) = heap.pop() else {
                break;
            };
            keep[id as usize] = true;
            let kids = &self.nodes[id as usize].children;
            heap.extend(kids.iter().map(|&c| (weight(c), Reverse(c))));
        }
        let mut names = self.names.clone();
        let other = names.iter().position(|n| n == "other").unwrap_or_else(|| {
            names.push("other".into());
            names.len() - 1
        }) as u32;
        let root = &self.nodes[0];
        let mut out = DiffTree {
            names,
            nodes: vec![DiffNode {
                children: Vec::new(),
                ..root.clone()
            }],
        };
        let mut stack = vec![(0u32, 0usize)];
        while let Some((old, new)) = stack.pop() {
            let mut rest: Option<DiffNode> = None;
            for &c in &self.nodes[old as usize].children {
                let n = &self.nodes[c as usize];
                if keep[c as usize] {
                    out.nodes.push(DiffNode {
                        children: Vec::new(),
                        ..n.clone()
                    });
                    let id = out.nodes.len() - 1;
                    out.nodes[new].children.push(id as u32);
                    stack.push((c, id));
                } else {
                    let r = rest.get_or_insert_with(|| DiffNode {
                        name: other,
                        ..Default::default()
                    });
                    // Everything under `other` ends there: its self is its total.
                    r.left.0 = r.left.0.saturating_add(n.left.0);
                    r.right.0 = r.right.0.saturating_add(n.right.0);
                    r.left.1 = r.left.0;
                    r.right.1 = r.right.0;
                }
            }
            if let Some(r) = rest {
                out.nodes.push(r);
                let id = out.nodes.len() as u32 - 1;
                out.nodes[new].children.push(id);
            }
        }
        out.sort_children();
        out
    }

    /// Baseline total.
    pub fn left_total(&self) -> i64 {
        self.nodes[0].left.0
    }

    /// Comparison total.
    pub fn right_total(&self) -> i64 {
        self.nodes[0].right.0
    }

    /// Flamebearer `double` levels: per node `[left x offset, left total, left self, right x
    /// offset, right total, right self, name]`, offsets relative to the previous node's end
    /// on the same side; plus the largest self value of either side.
    pub fn levels(&self) -> (Vec<Vec<i64>>, i64) {
        let mut levels: Vec<Vec<i64>> = Vec::new();
        let mut ends: Vec<(i64, i64)> = Vec::new();
        let mut max_self = 0i64;
        let mut stack = vec![(0u32, 0usize, 0i64, 0i64)];
        while let Some((id, d, lx, rx)) = stack.pop() {
            let n = &self.nodes[id as usize];
            if levels.len() <= d {
                levels.push(Vec::new());
                ends.push((0, 0));
            }
            levels[d].extend_from_slice(&[
                lx - ends[d].0,
                n.left.0,
                n.left.1,
                rx - ends[d].1,
                n.right.0,
                n.right.1,
                i64::from(n.name),
            ]);
            ends[d] = (lx + n.left.0, rx + n.right.0);
            max_self = max_self.max(n.left.1).max(n.right.1);
            let (mut cl, mut cr) = (lx, rx);
            let mut kids = Vec::with_capacity(n.children.len());
            for &c in &n.children {
                kids.push((c, d + 1, cl, cr));
                cl += self.nodes[c as usize].left.0;
                cr += self.nodes[c as usize].right.0;
            }
            stack.extend(kids.into_iter().rev());
        }
        (levels, max_self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(frames: &str, v: i64) -> (Vec<String>, i64) {
        (frames.split(';').map(str::to_string).collect(), v)
    }

    #[test]
    fn levels_encode_relative_offsets() {
        let t = Tree::from_stacks(&[s("a;b", 3), s("a;c", 2), s("d", 5)]);
        let (levels, max_self) = t.levels();
        assert_eq!(levels[0], vec![0, 10, 0, 0]);
        // a at 0 (total 5), d right after it.
        let names: Vec<&str> = levels[1]
            .chunks(4)
            .map(|q| t.names[q[3] as usize].as_str())
            .collect();
        assert_eq!(names, ["a", "d"]);
        assert_eq!(&levels[1][..4], &[0, 5, 0, 1]);
        assert_eq!(levels[1][4], 0);
        assert_eq!(max_self, 5);
        // b at 0, c right after b (offset 0 from b's end).
        assert_eq!(
            levels[2].chunks(4).map(|q| q[1]).collect::<Vec<_>>(),
            vec![3, 2]
        );
    }

    #[test]
    fn truncation_keeps_deep_hot_path() {
        // One deep hot path and many light siblings at the top.
        let mut stacks = vec![s("main;run;work;hot_leaf", 1000)];
        for i in 0..50 {
            stacks.push(s(&format!("light{i:02}"), 1));
        }
        let t = Tree::from_stacks(&stacks).truncate(6);
        let names: Vec<&str> = t
            .nodes
            .iter()
            .map(|n| t.names[n.name as usize].as_str())
            .collect();
        assert!(names.contains(&"hot_leaf"), "{names:?}");
        let other = t
            .nodes
            .iter()
            .find(|n| t.names[n.name as usize] == "other")
            .unwrap();
        let light_kept = names.iter().filter(|n| n.starts_with("light")).count() as i64;
        assert_eq!(other.total, 50 - light_kept);
        assert_eq!(t.nodes[0].total, 1050);
        let child_sum: i64 = t.nodes[0]
            .children
            .iter()
            .map(|c| t.nodes[*c as usize].total)
            .sum();
        assert_eq!(child_sum, 1050);
    }
}
