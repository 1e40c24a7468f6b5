//! The top table of a call tree by frame name, the shape a query's merged stacks come in.
//!
//! A server that already holds the merged call tree of a selection (to draw its flame graph)
//! gets the same table as [`top`](super::top) of that tree written as a pprof profile (a
//! function and a location per frame name, a sample per frame), without building the profile
//! and its per-sample call graph: flat and cumulative values come from one walk of the tree.

use std::collections::HashMap;

use super::table::{Header, Nodes, Summary, write_table};
use super::{NodeKey, TopOptions, TopTable};

/// A call tree by frame name: every path from the root is a distinct stack, and a frame's own
/// value is the value of the stack that ends there.
///
/// Frames are numbered from 0, the root (a stack of no frame: its value counts in the total,
/// as pprof counts a sample without locations, but in no row). A frame is a row of the table
/// by its name: frames of the same name, wherever they are, are one function.
#[derive(Debug, Clone, Copy)]
pub struct FrameTree<'a> {
    /// `(parent, name)` of each frame; `frames[0]` is the root. Frames whose parent is out of
    /// range, or that do not lead back to the root, are not part of the tree.
    pub frames: &'a [(u32, u32)],
    /// Value of the stack that ends at each frame (parallel to `frames`).
    pub self_values: &'a [i64],
    /// Frame names by id (an id out of range is an empty name, printed `<unknown>`).
    pub names: &'a [String],
    /// The values' sample type (`cpu`), printed as `Type:`.
    pub sample_type: &'a str,
    /// The values' unit (`nanoseconds`), which picks the printed unit.
    pub sample_unit: &'a str,
}

/// Computes the top table of `tree`: the rows, order, units and lines of [`top`](super::top)
/// on the same stacks as a pprof profile with one sample type and no mappings, comments, time
/// or duration. `options.sample_index` is ignored (a tree has one value per frame), and no
/// row is marked `(inline)` (a frame is a call of its own).
pub fn top_of_tree(tree: &FrameTree<'_>, options: &TopOptions) -> TopTable {
    top_of_functions(
        &FunctionTotals::of_tree(tree),
        tree.sample_type,
        tree.sample_unit,
        options,
    )
}

/// The top table of per-function sums (see [`FunctionTotals`]), as [`top_of_tree`] writes
/// it of the tree they were summed from.
pub fn top_of_functions(
    sums: &FunctionTotals,
    sample_type: &str,
    sample_unit: &str,
    options: &TopOptions,
) -> TopTable {
    let keys: Vec<NodeKey> = sums
        .names
        .iter()
        .map(|t| NodeKey {
            name: t.clone(),
            start_line: 0,
            objfile: String::new(),
        })
        .collect();
    let printable: Vec<String> = keys.iter().map(NodeKey::printable).collect();
    let sprints: Vec<String> = keys.iter().map(NodeKey::sprint).collect();
    let nodes = Nodes {
        flat: sums.flat.clone(),
        cum: sums.cum.clone(),
        names: &printable,
        sprints: &sprints,
    };
    let ranking = nodes.rank(options);
    let inline_labels = vec![""; ranking.order.len()];
    write_table(
        &nodes,
        &ranking,
        inline_labels,
        Summary {
            total: sums.total,
            sample_index: 0,
            sample_type: sample_type.to_owned(),
            sample_unit: sample_unit.to_owned(),
            header: options.profile_labels.then(Header::default),
        },
        options,
    )
}

/// Flat and cumulative values per function (distinct frame name) of a call tree, and the
/// sum of |value| over its stacks: what a top table is made of.
///
/// Sums of trees with non-negative values add up ([`FunctionTotals::add`]): each stack lies
/// in one tree, so the sums of a merge of trees are the sums of the sums. A query over many
/// block sections sums each section's tree alone and never merges the trees. (With negative
/// values the total of |value| does not add up; merge the trees first.)
#[derive(Debug, Clone, Default)]
pub struct FunctionTotals {
    /// Function names (frame names), each once; "" is the unknown function.
    pub names: Vec<String>,
    /// Value of the stacks ending in each function.
    pub flat: Vec<i64>,
    /// Value of the stacks through each function, each stack counted once however often the
    /// function recurses in it.
    pub cum: Vec<i64>,
    /// Sum of |value| over every stack, the root's included.
    pub total: i64,
}

impl FunctionTotals {
    /// The sums of `tree`.
    pub fn of_tree(tree: &FrameTree<'_>) -> FunctionTotals {
        let sums = FunctionSums::new(tree);
        FunctionTotals {
            names: sums.texts,
            flat: sums.flat,
            cum: sums.cum,
            total: sums.total,
        }
    }

    /// Adds the sums of another tree, function by function (by name).
    pub fn add(&mut self, other: &FunctionTotals) {
        let mut ids: HashMap<&str, usize> = HashMap::with_capacity(self.names.len());
        for (i, n) in self.names.iter().enumerate() {
            ids.insert(n.as_str(), i);
        }
        let mut new_names = Vec::new();
        for (i, n) in other.names.iter().enumerate() {
            let at = match ids.get(n.as_str()) {
                Some(&at) => at,
                None => {
                    new_names.push(i);
                    self.names.len() + new_names.len() - 1
                }
            };
            if at >= self.flat.len() {
                self.flat.push(0);
                self.cum.push(0);
            }
            self.flat[at] = self.flat[at].wrapping_add(other.flat[i]);
            self.cum[at] = self.cum[at].wrapping_add(other.cum[i]);
        }
        drop(ids);
        for i in new_names {
            self.names.push(other.names[i].clone());
        }
        self.total = self.total.wrapping_add(other.total);
    }
}

/// Flat and cumulative values per function (distinct frame name) of a tree.
struct FunctionSums {
    flat: Vec<i64>,
    cum: Vec<i64>,
    texts: Vec<String>,
    /// Sum of |value| over every stack, the root's included.
    total: i64,
}

impl FunctionSums {
    fn new(tree: &FrameTree<'_>) -> FunctionSums {
        let n = tree.frames.len().min(tree.self_values.len());
        // Function of each frame: names are interned by text, so two ids of one name (which
        // a pprof profile would also merge into one node) are one row.
        let mut function_of_text: HashMap<&str, u32> = HashMap::new();
        let mut texts: Vec<&str> = Vec::new();
        let mut function_of_name: Vec<u32> = Vec::with_capacity(tree.names.len());
        for name in tree.names {
            let id = *function_of_text.entry(name.as_str()).or_insert_with(|| {
                texts.push(name.as_str());
                texts.len() as u32 - 1
            });
            function_of_name.push(id);
        }
        let unknown = *function_of_text.entry("").or_insert_with(|| {
            texts.push("");
            texts.len() as u32 - 1
        });
        let function: Vec<u32> = tree.frames[..n]
            .iter()
            .map(|&(_, name)| {
                function_of_name
                    .get(name as usize)
                    .copied()
                    .unwrap_or(unknown)
            })
            .collect();

        let functions = texts.len();
        let texts_owned = || texts.iter().map(|t| (*t).to_owned()).collect();
        if let Some((flat, cum, total)) = parent_first_sums(
            &tree.frames[..n],
            &tree.self_values[..n],
            &function,
            functions,
        ) {
            return FunctionSums {
                flat,
                cum,
                texts: texts_owned(),
                total,
            };
        }
        let mut walk = Walk::new(&tree.frames[..n], &tree.self_values[..n], &function);
        let mut flat = vec![0i64; functions];
        let mut cum = vec![0i64; functions];
        // How many frames of each function are on the path from the root to the frame being
        // visited: a function's cumulative value takes a subtree only where it is outermost,
        // so a stack is counted once however often the function recurses in it.
        let mut on_path = vec![0u32; functions];
        let mut total = if n > 0 {
            tree.self_values[0].wrapping_abs()
        } else {
            0
        };
        let mut stack: Vec<(u32, u32)> = Vec::new();
        if n > 0 {
            stack.push((0, walk.nodes[0].first_child));
        }
        while let Some(top) = stack.last_mut() {
            let frame = top.0 as usize;
            if top.1 < walk.nodes[frame].end_child {
                let child = walk.children[top.1 as usize];
                top.1 += 1;
                let node = &walk.nodes[child as usize];
                on_path[node.function as usize] += 1;
                stack.push((child, node.first_child));
                continue;
            }
            stack.pop();
            if frame == 0 {
                continue;
            }
            let node = walk.nodes[frame];
            let f = node.function as usize;
            flat[f] = flat[f].wrapping_add(node.own);
            total = total.wrapping_add(node.own.wrapping_abs());
            if on_path[f] == 1 {
                cum[f] = cum[f].wrapping_add(node.subtree);
            }
            on_path[f] -= 1;
            let parent = &mut walk.nodes[node.parent as usize];
            parent.subtree = parent.subtree.wrapping_add(node.subtree);
        }

        FunctionSums {
            flat,
            cum,
            texts: texts_owned(),
            total,
        }
    }
}

/// `(flat, cum, total)` of a tree whose frames all come after their parents (a merge's
/// trees do), without a depth-first walk: one reverse pass sums subtrees, one forward pass
/// adds each frame to its function. A frame counts in its function's cumulative value only
/// where no ancestor is of the same function; a 128-bit set of the functions above each
/// frame (one bit per function id mod 128, inherited from the parent) rules that out for
/// most frames at once, and only where the bit is set are the ancestors walked. Some five
/// times faster than the walk on a day of a busy service (millions of frames, visited by
/// the walk in an order unrelated to where they lie in memory). `None` when a frame comes
/// before its parent.
fn parent_first_sums(
    frames: &[(u32, u32)],
    values: &[i64],
    function: &[u32],
    functions: usize,
) -> Option<(Vec<i64>, Vec<i64>, i64)> {
    let n = frames.len();
    if frames
        .iter()
        .enumerate()
        .skip(1)
        .any(|(f, p)| p.0 as usize >= f)
    {
        return None;
    }
    let mut subtree = values.to_vec();
    for f in (1..n).rev() {
        let p = frames[f].0 as usize;
        subtree[p] = subtree[p].wrapping_add(subtree[f]);
    }
    let mut flat = vec![0i64; functions];
    let mut cum = vec![0i64; functions];
    let mut total = values.first().map_or(0, |v| v.wrapping_abs());
    let mut above = vec![0u128; n];
    for f in 1..n {
        let p = frames[f].0 as usize;
        let func = function[f];
        let bit = 1u128 << (func % 128);
        let mut recursive = false;
        if above[p] & bit != 0 {
            let mut a = p;
            while a != 0 {
                if function[a] == func {
                    recursive = true;
                    break;
                }
                a = frames[a].0 as usize;
            }
        }
        let i = func as usize;
        flat[i] = flat[i].wrapping_add(values[f]);
        total = total.wrapping_add(values[f].wrapping_abs());
        if !recursive {
            cum[i] = cum[i].wrapping_add(subtree[f]);
        }
        // The root is no function: its bit never enters the set.
        above[f] = above[p] | bit;
    }
    Some((flat, cum, total))
}

/// What the walk reads and writes of a frame, side by side (one cache line holds two frames:
/// a day's tree has millions of frames, visited in an order unrelated to their ids).
#[derive(Clone, Copy, Default)]
struct WalkNode {
    parent: u32,
    function: u32,
    /// The frame's children are `children[first_child..end_child]`.
    first_child: u32,
    end_child: u32,
    /// Value of the stack that ends at the frame.
    own: i64,
    /// Value of the frame's subtree, complete once the walk has left the frame.
    subtree: i64,
}

/// A tree laid out for a depth-first walk from the root.
struct Walk {
    nodes: Vec<WalkNode>,
    children: Vec<u32>,
}

impl Walk {
    fn new(frames: &[(u32, u32)], values: &[i64], function: &[u32]) -> Walk {
        let n = frames.len();
        let parent_of = |f: usize| -> Option<usize> {
            let p = frames[f].0 as usize;
            (f != 0 && p < n && p != f).then_some(p)
        };
        let mut nodes: Vec<WalkNode> = (0..n)
            .map(|f| WalkNode {
                parent: frames[f].0,
                function: function[f],
                own: values[f],
                subtree: values[f],
                ..WalkNode::default()
            })
            .collect();
        // Count each frame's children into `end_child`, turn the counts into ranges, then
        // place the children (`first_child` ends where `end_child` was).
        for f in 0..n {
            if let Some(p) = parent_of(f) {
                nodes[p].end_child += 1;
            }
        }
        let mut at = 0u32;
        for node in &mut nodes {
            let count = node.end_child;
            node.first_child = at;
            node.end_child = at;
            at += count;
        }
        let mut children = vec![0u32; at as usize];
        for f in 0..n {
            if let Some(p) = parent_of(f) {
                children[nodes[p].end_child as usize] = f as u32;
                nodes[p].end_child += 1;
            }
        }
        Walk { nodes, children }
    }
}
