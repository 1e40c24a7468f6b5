//! The call graph of a selection, as `go tool pprof` draws it: one node per function with its
//! self value and its total (each stack counted once per function, however often the function
//! recurses in it), and one edge per caller → callee pair, weighted by the stacks that make
//! that call (again once per stack). A flame graph shows a function reached from many places
//! as many frames; the graph shows it once, with every caller pointing at it.
//!
//! Pruned like pprof: functions whose total is below `node_fraction` of the selection's total
//! are dropped, then the heaviest `max_nodes` by total are kept, and the graph is rebuilt over
//! the kept functions only, so a call through dropped functions becomes a *residual* edge
//! between the nearest kept ones (pprof's dotted edges). Edges below `edge_fraction` of the
//! total are dropped last. What was dropped is counted in the answer.
//!
//! Two differences from pprof's `dot` output, both deliberate: the kept nodes are the
//! heaviest by total (pprof's visual mode orders by an entropy score of the edges), and
//! redundant residual edges are not removed (the UI draws them dashed).

use std::collections::HashMap;

use ember_store::Merged;
use serde_json::{Value, json};

/// pprof's default `-nodefraction`: functions under 0.5 % of the total are dropped.
pub const DEFAULT_NODE_FRACTION: f64 = 0.005;
/// pprof's default `-edgefraction`: edges under 0.1 % of the total are dropped.
pub const DEFAULT_EDGE_FRACTION: f64 = 0.001;
/// pprof's default `-nodecount` for graphs: at most 80 functions are shown.
pub const DEFAULT_GRAPH_NODES: usize = 80;

/// How a call graph is pruned (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallGraphOptions {
    /// Functions whose |total| is below this share of the |selection total| are dropped.
    pub node_fraction: f64,
    /// Edges whose |weight| is below this share of the |selection total| are dropped.
    pub edge_fraction: f64,
    /// Most functions shown, heaviest by total first (0 = no limit).
    pub max_nodes: usize,
}

impl Default for CallGraphOptions {
    /// pprof's defaults: [`DEFAULT_NODE_FRACTION`], [`DEFAULT_EDGE_FRACTION`],
    /// [`DEFAULT_GRAPH_NODES`].
    fn default() -> Self {
        CallGraphOptions {
            node_fraction: DEFAULT_NODE_FRACTION,
            edge_fraction: DEFAULT_EDGE_FRACTION,
            max_nodes: DEFAULT_GRAPH_NODES,
        }
    }
}

/// One function of a [`CallGraph`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphNode {
    /// The function (frame) name.
    pub name: String,
    /// Value of the stacks ending in it.
    pub self_value: i64,
    /// Value of the stacks it is on (each stack once).
    pub total: i64,
}

/// One caller → callee edge of a [`CallGraph`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphEdge {
    /// The caller: index into [`CallGraph::nodes`].
    pub from: u32,
    /// The callee: index into [`CallGraph::nodes`].
    pub to: u32,
    /// Value of the stacks making this call (each stack once).
    pub weight: i64,
    /// Whether some of those stacks pass through dropped functions between the two.
    pub residual: bool,
}

/// The pruned call graph of a selection.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallGraph {
    /// The selection's total.
    pub total: i64,
    /// Kept functions, heaviest total first (ties by name).
    pub nodes: Vec<GraphNode>,
    /// Kept edges, heaviest first.
    pub edges: Vec<GraphEdge>,
    /// Functions in the selection before pruning.
    pub all_nodes: usize,
    /// Functions dropped (below the node fraction or past the node limit).
    pub dropped_nodes: usize,
    /// Edges dropped below the edge fraction.
    pub dropped_edges: usize,
    /// Summed weight of the dropped edges.
    pub dropped_edge_weight: i64,
    /// The node cut-off: |total| below it was dropped.
    pub node_cutoff: i64,
    /// The edge cut-off: |weight| below it was dropped.
    pub edge_cutoff: i64,
}

impl CallGraph {
    /// Sum of the self values of the kept functions (pprof's "nodes accounting for").
    pub fn shown_self(&self) -> i64 {
        self.nodes
            .iter()
            .fold(0i64, |a, n| a.saturating_add(n.self_value))
    }

    /// The JSON answer of `/api/v1/query?format=callgraph`.
    pub fn to_json(&self) -> Value {
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .map(|n| json!({ "name": n.name, "self": n.self_value, "total": n.total }))
            .collect();
        let edges: Vec<Value> = self
            .edges
            .iter()
            .map(|e| {
                json!({ "from": e.from, "to": e.to, "weight": e.weight, "residual": e.residual })
            })
            .collect();
        json!({
            "total": self.total,
            "nodes": nodes,
            "edges": edges,
            "allNodes": self.all_nodes,
            "shownSelf": self.shown_self(),
            "dropped": {
                "nodes": self.dropped_nodes,
                "edges": self.dropped_edges,
                "edgeWeight": self.dropped_edge_weight,
                "nodeCutoff": self.node_cutoff,
                "edgeCutoff": self.edge_cutoff,
            },
        })
    }
}

/// The merge as a tree walkable depth first: children lists and each frame's subtree total.
struct Walk<'a> {
    merged: &'a Merged,
    children: Vec<Vec<u32>>,
    totals: Vec<i64>,
}

impl<'a> Walk<'a> {
    fn new(merged: &'a Merged) -> Self {
        let n = merged.frames.len();
        let mut totals: Vec<i64> = (0..n)
            .map(|f| merged.self_values.get(f).copied().unwrap_or(0))
            .collect();
        // Parents come before their children: a reverse pass folds totals up.
        for f in (1..n).rev() {
            let p = merged.frames[f].0 as usize;
            totals[p] = totals[p].saturating_add(totals[f]);
        }
        let mut children = vec![Vec::new(); n];
        for f in 1..n {
            children[merged.frames[f].0 as usize].push(f as u32);
        }
        Walk {
            merged,
            children,
            totals,
        }
    }

    /// Calls `visit(frame, true)` before a frame's subtree and `visit(frame, false)` after
    /// it, for every frame but the root, depth first without recursion (stacks may be
    /// thousands deep).
    fn depth_first(&self, mut visit: impl FnMut(u32, bool)) {
        let mut stack: Vec<(u32, bool)> = self.children[0].iter().map(|&c| (c, false)).collect();
        while let Some((f, done)) = stack.pop() {
            if done {
                visit(f, false);
                continue;
            }
            visit(f, true);
            stack.push((f, true));
            stack.extend(self.children[f as usize].iter().map(|&c| (c, false)));
        }
    }

    fn name(&self, f: u32) -> u32 {
        self.merged.frames[f as usize].1
    }
}

/// Self and total of every function (by name id) of `merged`.
fn function_sums(walk: &Walk<'_>) -> (Vec<i64>, Vec<i64>) {
    let names = walk.merged.names.len();
    let (mut self_v, mut total) = (vec![0i64; names], vec![0i64; names]);
    let mut on_path = vec![0u32; names];
    walk.depth_first(|f, entering| {
        let n = walk.name(f) as usize;
        if !entering {
            on_path[n] -= 1;
            return;
        }
        {
            let v = walk
                .merged
                .self_values
                .get(f as usize)
                .copied()
                .unwrap_or(0);
            self_v[n] = self_v[n].saturating_add(v);
            // A function already on the path (recursion) has this subtree counted.
            if on_path[n] == 0 {
                total[n] = total[n].saturating_add(walk.totals[f as usize]);
            }
            on_path[n] += 1;
        }
    });
    (self_v, total)
}

/// `(weight, residual)` of every edge between kept functions (`kept[name]` = node index),
/// each stack counted once per edge, calls through dropped functions joining the nearest
/// kept caller and callee.
fn edge_sums(walk: &Walk<'_>, kept: &[Option<u32>]) -> HashMap<(u32, u32), (i64, bool)> {
    let mut edges: HashMap<(u32, u32), (i64, bool)> = HashMap::new();
    let mut on_path: HashMap<(u32, u32), u32> = HashMap::new();
    // Per frame on the path: the nearest kept function at or above it and whether dropped
    // frames lie between it and the next kept one; and the edge the frame opened.
    let mut above: Vec<(Option<u32>, bool)> = vec![(None, false)];
    let mut opened: Vec<Option<(u32, u32)>> = Vec::new();
    walk.depth_first(|f, entering| {
        if !entering {
            above.pop();
            if let Some(Some(key)) = opened.pop()
                && let Some(c) = on_path.get_mut(&key)
            {
                *c -= 1;
            }
            return;
        }
        {
            let (caller, gap) = *above.last().unwrap_or(&(None, false));
            let mut edge = None;
            match kept[walk.name(f) as usize] {
                Some(node) => {
                    if let Some(c) = caller.filter(|c| *c != node) {
                        let key = (c, node);
                        let count = on_path.entry(key).or_insert(0);
                        let e = edges.entry(key).or_insert((0, false));
                        if *count == 0 {
                            e.0 = e.0.saturating_add(walk.totals[f as usize]);
                        }
                        e.1 |= gap;
                        *count += 1;
                        edge = Some(key);
                    }
                    above.push((Some(node), false));
                }
                None => above.push((caller, caller.is_some())),
            }
            opened.push(edge);
        }
    });
    edges
}

/// The call graph of `merged`, pruned by `options` (see the module docs).
pub fn call_graph(merged: &Merged, options: &CallGraphOptions) -> CallGraph {
    let walk = Walk::new(merged);
    let (self_v, total) = function_sums(&walk);
    let selection = merged.total;
    let cutoff = |fraction: f64| (selection.unsigned_abs() as f64 * fraction.max(0.0)) as i64;
    let (node_cutoff, edge_cutoff) = (cutoff(options.node_fraction), cutoff(options.edge_fraction));
    // Functions present in the selection: on a stack with a value (name 0 is the root's).
    let present: Vec<usize> = (1..merged.names.len())
        .filter(|&n| total[n] != 0 || self_v[n] != 0)
        .collect();
    let mut candidates: Vec<usize> = present
        .iter()
        .copied()
        .filter(|&n| total[n].unsigned_abs() >= node_cutoff.unsigned_abs())
        .collect();
    candidates.sort_by(|&a, &b| {
        total[b]
            .abs()
            .cmp(&total[a].abs())
            .then_with(|| merged.names[a].cmp(&merged.names[b]))
    });
    if options.max_nodes > 0 {
        candidates.truncate(options.max_nodes);
    }
    let mut kept: Vec<Option<u32>> = vec![None; merged.names.len()];
    let nodes: Vec<GraphNode> = candidates
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            kept[n] = Some(i as u32);
            GraphNode {
                name: merged.names[n].clone(),
                self_value: self_v[n],
                total: total[n],
            }
        })
        .collect();
    let mut graph = CallGraph {
        total: selection,
        all_nodes: present.len(),
        dropped_nodes: present.len() - nodes.len(),
        nodes,
        node_cutoff,
        edge_cutoff,
        ..CallGraph::default()
    };
    for ((from, to), (weight, residual)) in edge_sums(&walk, &kept) {
        if weight.unsigned_abs() < edge_cutoff.unsigned_abs() || weight == 0 {
            graph.dropped_edges += 1;
            graph.dropped_edge_weight = graph.dropped_edge_weight.saturating_add(weight);
            continue;
        }
        graph.edges.push(GraphEdge {
            from,
            to,
            weight,
            residual,
        });
    }
    graph.edges.sort_by(|a, b| {
        b.weight
            .abs()
            .cmp(&a.weight.abs())
            .then((a.from, a.to).cmp(&(b.from, b.to)))
    });
    graph
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A merge of `(stack "a;b;c", value)` pairs.
    fn merged(stacks: &[(&str, i64)]) -> Merged {
        let mut m = Merged::default();
        let mut names: HashMap<String, u32> = HashMap::new();
        let mut frames: HashMap<(u32, u32), u32> = HashMap::new();
        for (stack, v) in stacks {
            let mut at = 0u32;
            for f in stack.split(';') {
                let name = *names.entry(f.to_string()).or_insert_with(|| {
                    m.names.push(f.to_string());
                    m.names.len() as u32 - 1
                });
                at = *frames.entry((at, name)).or_insert_with(|| {
                    m.frames.push((at, name));
                    m.self_values.push(0);
                    m.frames.len() as u32 - 1
                });
            }
            m.self_values[at as usize] += v;
            m.total += v;
        }
        m
    }

    fn node<'a>(g: &'a CallGraph, name: &str) -> &'a GraphNode {
        g.nodes.iter().find(|n| n.name == name).unwrap()
    }

    fn edge(g: &CallGraph, from: &str, to: &str) -> Option<(i64, bool)> {
        let id = |n: &str| g.nodes.iter().position(|x| x.name == n).unwrap() as u32;
        let (f, t) = (id(from), id(to));
        g.edges
            .iter()
            .find(|e| e.from == f && e.to == t)
            .map(|e| (e.weight, e.residual))
    }

    #[test]
    fn recursion_counts_each_stack_once() {
        let m = merged(&[("main;a;b;a;b", 10), ("main;a", 5), ("main;c;b", 3)]);
        let all = CallGraphOptions {
            node_fraction: 0.0,
            edge_fraction: 0.0,
            max_nodes: 0,
        };
        let g = call_graph(&m, &all);
        assert_eq!(g.total, 18);
        assert_eq!((node(&g, "a").total, node(&g, "a").self_value), (15, 5));
        assert_eq!((node(&g, "b").total, node(&g, "b").self_value), (13, 13));
        assert_eq!(node(&g, "main").total, 18);
        assert_eq!(edge(&g, "a", "b"), Some((10, false)));
        assert_eq!(edge(&g, "b", "a"), Some((10, false)));
        assert_eq!(edge(&g, "c", "b"), Some((3, false)));
        assert_eq!(edge(&g, "main", "a"), Some((15, false)));
        assert_eq!(g.dropped_nodes, 0);
    }

    #[test]
    fn dropped_functions_leave_residual_edges() {
        let three = CallGraphOptions {
            node_fraction: 0.0,
            edge_fraction: 0.0,
            max_nodes: 3,
        };
        let m = merged(&[
            ("main;tiny;work", 100),
            ("main;tiny", 1),
            ("main;other", 899),
        ]);
        let g = call_graph(&m, &three);
        let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["main", "other", "tiny"]);
        // `work` is dropped: the 100 ending in it are not shown as anyone's self.
        assert_eq!((g.dropped_nodes, g.all_nodes), (1, 4));
        assert_eq!(g.shown_self(), 900);
        assert_eq!(edge(&g, "main", "tiny"), Some((101, false)));
        assert_eq!(edge(&g, "main", "other"), Some((899, false)));
        // `mid` (100) is lighter than `work` (101): main → work goes through it.
        let m = merged(&[
            ("main;mid;work", 100),
            ("main;other", 900),
            ("main;work", 1),
        ]);
        let g = call_graph(&m, &three);
        assert_eq!(edge(&g, "main", "work"), Some((101, true)));
        // 10 % of 1,001 is 100: `mid` (100) stays.
        let g = call_graph(
            &m,
            &CallGraphOptions {
                node_fraction: 0.1,
                max_nodes: 0,
                ..three
            },
        );
        assert_eq!(g.node_cutoff, 100);
        assert_eq!(g.nodes.len(), 4);
    }

    #[test]
    fn light_edges_are_dropped_and_counted() {
        let m = merged(&[("main;a", 999), ("main;b", 1)]);
        let g = call_graph(
            &m,
            &CallGraphOptions {
                node_fraction: 0.0,
                edge_fraction: 0.01,
                max_nodes: 0,
            },
        );
        assert_eq!(edge(&g, "main", "b"), None);
        assert_eq!((g.dropped_edges, g.dropped_edge_weight), (1, 1));
        assert_eq!(g.edge_cutoff, 10);
    }
}
