//! The pprof "top" table: the heaviest functions by flat or cumulative value.
//!
//! This module owns Ember's equivalent of `go tool pprof -top`. It follows the same pipeline so
//! that the figures agree exactly: function-level granularity (every inlined frame is a function
//! of its own), a call graph built from the samples without double counting recursion, nodes
//! whose cumulative value is at most 0.5% of the total dropped (`Dropped N nodes`), ties sorted
//! by name, and units chosen from the smallest and largest value shown.
//!
//! Two inputs, one writer (`table`): [`top`] reads a pprof profile; [`top_of_tree`] reads a call
//! tree by frame name (a query's merged stacks, which flame graphs are drawn from) and writes
//! what [`top`] writes of the same stacks as a profile, without making one.

use crate::FormatError;
use crate::units::civil_from_days;
use ember_pprof::Profile;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use table::{Header, Nodes, Summary, write_table};

mod table;
mod tree;

pub use tree::{FrameTree, FunctionTotals, top_of_functions, top_of_tree};

/// Which column orders the rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortBy {
    /// By flat value (the function's own samples), like `go tool pprof -top`.
    #[default]
    Flat,
    /// By cumulative value (the function and everything it calls), like `-top -cum`.
    Cum,
}

/// Options of the top table.
#[derive(Debug, Clone, PartialEq)]
pub struct TopOptions {
    /// Row order.
    pub sort: SortBy,
    /// Sample type to show: an index (`"1"`), a type name (`"alloc_space"`, `"inuse_"` prefix
    /// optional), or `None` for the profile's default (its `default_sample_type`, else the last).
    pub sample_index: Option<String>,
    /// Show at most this many rows (0 = no limit).
    pub node_count: usize,
    /// Drop functions whose |cum| is below this fraction of the total (pprof's default 0.005).
    pub node_fraction: f64,
    /// Ignore call edges below this fraction of the total when deciding `(inline)` marks.
    pub edge_fraction: f64,
    /// Print the `File:`, `Type:`, `Time:` and `Duration:` lines before the summary.
    pub profile_labels: bool,
}

impl Default for TopOptions {
    fn default() -> Self {
        TopOptions {
            sort: SortBy::Flat,
            sample_index: None,
            node_count: 0,
            node_fraction: 0.005,
            edge_fraction: 0.001,
            profile_labels: true,
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopRow {
    /// Function name (or `[binary]`, `<unknown>` when there is no symbol).
    pub name: String,
    /// `"(inline)"` when every call into the function is inlined, `"(partial-inline)"` when some
    /// are, empty otherwise.
    pub inline_label: &'static str,
    /// Value of samples whose leaf is this function.
    pub flat: i64,
    /// Value of samples with this function anywhere on the stack (counted once per sample).
    pub cum: i64,
    /// `flat` formatted with the table's unit.
    pub flat_text: String,
    /// `flat` as a percentage of the total.
    pub flat_percent: String,
    /// Running sum of `flat` down to this row, as a percentage of the total.
    pub sum_percent: String,
    /// `cum` formatted with the table's unit.
    pub cum_text: String,
    /// `cum` as a percentage of the total.
    pub cum_percent: String,
}

/// A computed top table.
#[derive(Debug, Clone, PartialEq)]
pub struct TopTable {
    /// Header lines (`Type: cpu`, `Showing nodes accounting for ...`, `Dropped N nodes ...`).
    pub labels: Vec<String>,
    /// The rows, in display order.
    pub rows: Vec<TopRow>,
    /// Sum of |value| over all samples of the chosen type, or over the diff-base samples
    /// (`pprof::base=true`) when there are any, like `go tool pprof`.
    pub total: i64,
    /// Index of the sample type shown.
    pub sample_index: usize,
    /// The sample type's name (`cpu`, `alloc_space`).
    pub sample_type: String,
    /// The sample type's unit as stored in the profile (`nanoseconds`, `bytes`, `count`).
    pub sample_unit: String,
    /// Unit the values are printed in (`ms`, `MB`, or the sample unit for plain counts).
    pub output_unit: String,
}

impl TopTable {
    /// Renders the table as text, the same layout as `go tool pprof -top`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for label in &self.labels {
            out.push_str(label);
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "{:>10} {:>5}% {:>5}% {:>10} {:>5}%",
            "flat", "flat", "sum", "cum", "cum"
        );
        for row in &self.rows {
            let inline = if row.inline_label.is_empty() {
                String::new()
            } else {
                format!(" {}", row.inline_label)
            };
            let _ = writeln!(
                out,
                "{:>10} {} {} {:>10} {}  {}{}",
                row.flat_text,
                row.flat_percent,
                row.sum_percent,
                row.cum_text,
                row.cum_percent,
                row.name,
                inline
            );
        }
        out
    }
}

/// Resolves a sample type selector with `go tool pprof -sample_index` semantics.
pub fn select_sample_index(
    profile: &Profile,
    selector: Option<&str>,
) -> Result<usize, FormatError> {
    let count = profile.sample_type.len();
    if count == 0 {
        return Err(FormatError::NoSampleTypes);
    }
    let type_name = |i: usize| string(profile, profile.sample_type[i].r#type);
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        let default = string(profile, profile.default_sample_type);
        if !default.is_empty()
            && let Some(i) = (0..count).find(|&i| type_name(i) == default)
        {
            return Ok(i);
        }
        return Ok(count - 1);
    };
    if let Ok(i) = selector.parse::<i64>() {
        return usize::try_from(i)
            .ok()
            .filter(|&i| i < count)
            .ok_or_else(|| {
                FormatError::SampleIndex(format!(
                    "sample index {selector} is outside the range [0..{}]",
                    count - 1
                ))
            });
    }
    let no_inuse = selector.strip_prefix("inuse_").unwrap_or(selector);
    if let Some(i) = (0..count).find(|&i| type_name(i) == selector || type_name(i) == no_inuse) {
        return Ok(i);
    }
    // Also accept `type/unit`, which is how Ember names sample types elsewhere.
    if let Some(i) =
        (0..count).find(|&i| ember_pprof::type_name(profile, &profile.sample_type[i]) == selector)
    {
        return Ok(i);
    }
    let names: Vec<&str> = (0..count).map(type_name).collect();
    Err(FormatError::SampleIndex(format!(
        "sample index {selector:?} must be one of: {}",
        names.join(" ")
    )))
}

fn string(profile: &Profile, index: i64) -> &str {
    usize::try_from(index)
        .ok()
        .and_then(|i| profile.string_table.get(i))
        .map_or("", String::as_str)
}

/// What identifies a row: the function name, or for unsymbolised frames the binary they are in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct NodeKey {
    name: String,
    start_line: i64,
    objfile: String,
}

impl NodeKey {
    fn printable(&self) -> String {
        if !self.name.is_empty() {
            self.name.clone()
        } else if !self.objfile.is_empty() {
            format!("[{}]", go_base(&self.objfile))
        } else {
            "<unknown>".to_owned()
        }
    }

    /// Last-resort tie breaker, the struct as Go's `fmt.Sprint` prints pprof's `NodeInfo`.
    fn sprint(&self) -> String {
        format!(
            "{{{}  0  {} 0 {}}}",
            self.name, self.start_line, self.objfile
        )
    }
}

/// `filepath.Base` for a non-empty path.
fn go_base(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// The profile reduced to what the graph needs: node keys, each location's nodes
/// (outermost caller last) and each sample's locations and value.
struct Prepared {
    keys: Vec<NodeKey>,
    names: Vec<String>,
    sprints: Vec<String>,
    samples: Vec<(Vec<usize>, i64)>,
    locations: Vec<Vec<usize>>,
}

#[derive(Default, Clone)]
struct NodeData {
    flat: i64,
    cum: i64,
    /// Incoming call edges: caller node → (weight, all contributions inlined).
    callers: HashMap<usize, (i64, bool)>,
}

struct Graph {
    data: Vec<NodeData>,
}

impl Prepared {
    fn new(profile: &Profile, index: usize) -> Prepared {
        // Mappings whose file is a URL are not files (pprof's unsourceMappings).
        let mapping_file: HashMap<u64, &str> = profile
            .mapping
            .iter()
            .map(|m| {
                let file = string(profile, m.filename);
                let file = if string(profile, m.build_id).is_empty() && has_url_scheme(file) {
                    ""
                } else {
                    file
                };
                (m.id, file)
            })
            .collect();
        let functions: HashMap<u64, &ember_pprof::Function> =
            profile.function.iter().map(|f| (f.id, f)).collect();
        let mut key_ids: HashMap<NodeKey, usize> = HashMap::new();
        let mut keys = Vec::new();
        let mut location_index: HashMap<u64, usize> = HashMap::new();
        let mut locations = Vec::with_capacity(profile.location.len());
        for loc in &profile.location {
            let objfile = mapping_file.get(&loc.mapping_id).copied().unwrap_or("");
            let mut intern = |key: NodeKey| -> usize {
                *key_ids.entry(key.clone()).or_insert_with(|| {
                    keys.push(key);
                    keys.len() - 1
                })
            };
            let nodes: Vec<usize> = if loc.line.is_empty() {
                vec![intern(NodeKey {
                    name: String::new(),
                    start_line: 0,
                    objfile: objfile.to_owned(),
                })]
            } else {
                loc.line
                    .iter()
                    .map(|line| match functions.get(&line.function_id) {
                        None => intern(NodeKey {
                            name: String::new(),
                            start_line: 0,
                            objfile: objfile.to_owned(),
                        }),
                        Some(f) => {
                            let name = string(profile, f.name);
                            if name.is_empty() {
                                intern(NodeKey {
                                    name: String::new(),
                                    start_line: f.start_line,
                                    objfile: objfile.to_owned(),
                                })
                            } else {
                                intern(NodeKey {
                                    name: name.to_owned(),
                                    start_line: 0,
                                    objfile: String::new(),
                                })
                            }
                        }
                    })
                    .collect()
            };
            location_index.insert(loc.id, locations.len());
            locations.push(nodes);
        }
        let samples = profile
            .sample
            .iter()
            .map(|s| {
                let locs = s
                    .location_id
                    .iter()
                    .filter_map(|id| location_index.get(id).copied())
                    .collect();
                (locs, s.value.get(index).copied().unwrap_or(0))
            })
            .collect();
        let names = keys.iter().map(NodeKey::printable).collect();
        let sprints = keys.iter().map(NodeKey::sprint).collect();
        Prepared {
            keys,
            names,
            sprints,
            samples,
            locations,
        }
    }

    /// Builds the call graph, keeping only `kept` nodes when given (frames of other nodes are
    /// skipped; their flat value is lost, as in pprof).
    fn graph(&self, kept: Option<&[bool]>) -> Graph {
        let mut data = vec![NodeData::default(); self.keys.len()];
        let mut seen_nodes = HashSet::new();
        let mut seen_edges = HashSet::new();
        for (locs, w) in &self.samples {
            let w = *w;
            if w == 0 {
                continue;
            }
            seen_nodes.clear();
            seen_edges.clear();
            let mut parent: Option<usize> = None;
            let mut residual = false;
            for &loc in locs.iter().rev() {
                let nodes = &self.locations[loc];
                for (ni, &n) in nodes.iter().enumerate().rev() {
                    if kept.is_some_and(|k| !k[n]) {
                        residual = true;
                        continue;
                    }
                    if seen_nodes.insert(n) {
                        data[n].cum = data[n].cum.wrapping_add(w);
                    }
                    if let Some(p) = parent
                        && p != n
                        && seen_edges.insert((n, p))
                    {
                        let inline = ni != nodes.len() - 1;
                        let edge = data[n].callers.entry(p).or_insert((0, true));
                        edge.0 = edge.0.wrapping_add(w);
                        edge.1 &= inline;
                    }
                    parent = Some(n);
                    residual = false;
                }
            }
            if let Some(p) = parent
                && !residual
            {
                data[p].flat = data[p].flat.wrapping_add(w);
            }
        }
        Graph { data }
    }
}

/// Go's `url.Parse(s).IsAbs()` for the strings that occur as mapping files: a scheme
/// (`letter [letter digit + - .]*`) followed by `:`.
fn has_url_scheme(s: &str) -> bool {
    let Some(colon) = s.find(':') else {
        return false;
    };
    let scheme = &s[..colon];
    let mut chars = scheme.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Computes the top table of `profile`.
pub fn top(profile: &Profile, options: &TopOptions) -> Result<TopTable, FormatError> {
    let index = select_sample_index(profile, options.sample_index.as_deref())?;
    let sample_type = string(profile, profile.sample_type[index].r#type).to_owned();
    let sample_unit = string(profile, profile.sample_type[index].unit).to_owned();
    let prepared = Prepared::new(profile, index);
    // Go's total: of the diff-base samples alone in a `-diff_base` profile.
    let total = ember_pprof::report_total(profile, index);

    let graph = prepared.graph(None);
    let nodes = Nodes {
        flat: graph.data.iter().map(|d| d.flat).collect(),
        cum: graph.data.iter().map(|d| d.cum).collect(),
        names: &prepared.names,
        sprints: &prepared.sprints,
    };
    let ranking = nodes.rank(options);
    // Flat and cumulative values of the nodes kept do not change when the others are left
    // out, but the call edges do (a frame's caller becomes the nearest kept one), and the
    // `(inline)` marks are read from the edges of the graph of the nodes kept.
    let graph = match &ranking.kept {
        Some(kept) => prepared.graph(Some(kept)),
        None => graph,
    };
    let edge_cutoff = ((ranking.total_flat as f64 * options.edge_fraction) as i64).wrapping_abs();
    let inline_labels = ranking
        .order
        .iter()
        .map(|&n| {
            let strong = || {
                graph.data[n]
                    .callers
                    .values()
                    .filter(|(weight, _)| weight.wrapping_abs() >= edge_cutoff)
            };
            match (strong().any(|&(_, i)| i), strong().any(|&(_, i)| !i)) {
                (true, true) => "(partial-inline)",
                (true, false) => "(inline)",
                _ => "",
            }
        })
        .collect();
    Ok(write_table(
        &nodes,
        &ranking,
        inline_labels,
        Summary {
            total,
            sample_index: index,
            sample_type,
            sample_unit,
            header: options.profile_labels.then(|| Header::of(profile)),
        },
        options,
    ))
}

/// `Jan 2, 2006 at 3:04pm (UTC)`: Go's layout, always in UTC so output does not depend on the
/// machine's time zone.
pub fn format_time_utc(nanos: i64) -> String {
    let secs = nanos.div_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let of_day = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (of_day / 3600, of_day % 3600 / 60);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month_name = MONTHS[(month - 1).clamp(0, 11) as usize];
    let (h12, ampm) = match hour {
        0 => (12, "am"),
        1..=11 => (hour, "am"),
        12 => (12, "pm"),
        _ => (hour - 12, "pm"),
    };
    format!("{month_name} {day}, {year} at {h12}:{minute:02}{ampm} (UTC)")
}
