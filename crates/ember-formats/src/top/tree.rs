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
    let sums = FunctionSums::new(tree);
    let nodes = Nodes {
        flat: sums.flat,
        cum: sums.cum,
        names: &sums.printable,
        sprints: &sums.sprints,
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
            sample_type: tree.sample_type.to_owned(),
            sample_unit: tree.sample_unit.to_owned(),
            header: options.profile_labels.then(Header::default),
        },
        options,
    )
}

/// Flat and cumulative values per function (distinct frame name) of a tree.
struct FunctionSums {
    flat: Vec<i64>,
    cum: Vec<i64>,
    printable: Vec<String>,
    sprints: Vec<String>,
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

        let children = Children::new(&tree.frames[..n]);
        let functions = texts.len();
        let mut flat = vec![0i64; functions];
        let mut cum = vec![0i64; functions];
        // How many frames of each function are on the path from the root to the frame being
        // visited: a function's cumulative value takes a subtree only where it is outermost,
        // so a stack is counted once however often the function recurses in it.
        let mut on_path = vec![0u32; functions];
        // Value of each frame's subtree, complete when the walk leaves the frame.
        let mut subtree: Vec<i64> = tree.self_values[..n].to_vec();
        let mut total = if n > 0 {
            tree.self_values[0].wrapping_abs()
        } else {
            0
        };
        let mut stack: Vec<(u32, u32)> = Vec::new();
        if n > 0 {
            stack.push((0, children.start[0]));
        }
        while let Some(top) = stack.last_mut() {
            let frame = top.0;
            if top.1 < children.start[frame as usize + 1] {
                let child = children.list[top.1 as usize];
                top.1 += 1;
                on_path[function[child as usize] as usize] += 1;
                stack.push((child, children.start[child as usize]));
                continue;
            }
            stack.pop();
            if frame == 0 {
                continue;
            }
            let f = function[frame as usize] as usize;
            let own = tree.self_values[frame as usize];
            let value = subtree[frame as usize];
            flat[f] = flat[f].wrapping_add(own);
            total = total.wrapping_add(own.wrapping_abs());
            if on_path[f] == 1 {
                cum[f] = cum[f].wrapping_add(value);
            }
            on_path[f] -= 1;
            let parent = tree.frames[frame as usize].0 as usize;
            subtree[parent] = subtree[parent].wrapping_add(value);
        }

        let keys: Vec<NodeKey> = texts
            .iter()
            .map(|t| NodeKey {
                name: (*t).to_owned(),
                start_line: 0,
                objfile: String::new(),
            })
            .collect();
        FunctionSums {
            flat,
            cum,
            printable: keys.iter().map(NodeKey::printable).collect(),
            sprints: keys.iter().map(NodeKey::sprint).collect(),
            total,
        }
    }
}

/// Children of every frame, packed: those of frame `f` are `list[start[f]..start[f + 1]]`.
struct Children {
    start: Vec<u32>,
    list: Vec<u32>,
}

impl Children {
    fn new(frames: &[(u32, u32)]) -> Children {
        let n = frames.len();
        let parent_of = |f: usize| -> Option<usize> {
            let p = frames[f].0 as usize;
            (f != 0 && p < n && p != f).then_some(p)
        };
        let mut start = vec![0u32; n + 1];
        for f in 0..n {
            if let Some(p) = parent_of(f) {
                start[p + 1] += 1;
            }
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = vec![0u32; start[n] as usize];
        for f in 0..n {
            if let Some(p) = parent_of(f) {
                list[fill[p] as usize] = f as u32;
                fill[p] += 1;
            }
        }
        Children { start, list }
    }
}
