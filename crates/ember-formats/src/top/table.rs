//! The table writer shared by every input of the top table: which rows are shown (the node
//! fraction cut, the order and its tie-breaks, the node count), the unit, the header lines
//! and the rows, from per-node flat and cumulative values. [`top`](super::top) feeds it a
//! profile's call graph, [`top_of_tree`](super::top_of_tree) a call tree's sums.

use super::{
    SortBy, TopOptions, TopRow, TopTable, format_time_utc, go_base, has_url_scheme, string,
};
use crate::units::{percentage, scale, scaled_label};
use ember_pprof::Profile;

/// Per-node values and names of a table's candidate rows, whichever input they come from (a
/// profile's call graph, or a call tree by frame name: [`top_of_tree`](super::top_of_tree)).
pub(super) struct Nodes<'a> {
    /// Value of the stacks whose leaf is the node.
    pub(super) flat: Vec<i64>,
    /// Value of the stacks the node is on, counted once per stack.
    pub(super) cum: Vec<i64>,
    /// Printable names (the first tie-breaker).
    pub(super) names: &'a [String],
    /// The node keys as Go prints them (the last tie-breaker).
    pub(super) sprints: &'a [String],
}

/// The rows chosen, as pprof chooses them.
pub(super) struct Ranking {
    /// Nodes shown, in display order.
    pub(super) order: Vec<usize>,
    /// Nodes left out for a cumulative value under the node fraction.
    pub(super) dropped: usize,
    /// Nodes left after that cut, before the node count limit.
    pub(super) original_count: usize,
    /// Sum of every node's flat value (the base of the node and edge fractions).
    pub(super) total_flat: i64,
    /// The nodes a graph of the rows keeps, when some are left out.
    pub(super) kept: Option<Vec<bool>>,
}

impl Nodes<'_> {
    /// Drops nodes under the node fraction, orders the rest and keeps the first
    /// `node_count`, like pprof.
    pub(super) fn rank(&self, options: &TopOptions) -> Ranking {
        let mut order: Vec<usize> = (0..self.flat.len())
            .filter(|&n| self.cum[n] != 0 || self.flat[n] != 0)
            .collect();
        let total_flat = order
            .iter()
            .fold(0i64, |acc, &n| acc.wrapping_add(self.flat[n]));
        let node_cutoff = ((total_flat as f64 * options.node_fraction) as i64).wrapping_abs();
        let mut dropped = 0;
        let mut kept = None;
        if node_cutoff > 0 {
            // Nodes outside `order` have a zero cumulative value, so they fail the cut too.
            let mask: Vec<bool> = self
                .cum
                .iter()
                .map(|c| c.wrapping_abs() >= node_cutoff)
                .collect();
            let before = order.len();
            order.retain(|&n| mask[n]);
            if order.len() != before {
                dropped = before - order.len();
                kept = Some(mask);
            }
        }
        let original_count = order.len();
        self.sort(&mut order, options.sort);
        if options.node_count > 0 && order.len() > options.node_count {
            order.truncate(options.node_count);
            let mut mask = vec![false; self.flat.len()];
            for &n in &order {
                mask[n] = true;
            }
            kept = Some(mask);
        }
        Ranking {
            order,
            dropped,
            original_count,
            total_flat,
            kept,
        }
    }

    fn sort(&self, order: &mut [usize], by: SortBy) {
        order.sort_by(|&l, &r| {
            let (first_l, first_r, second_l, second_r) = match by {
                SortBy::Flat => (self.flat[l], self.flat[r], self.cum[l], self.cum[r]),
                SortBy::Cum => (self.cum[l], self.cum[r], self.flat[l], self.flat[r]),
            };
            first_r
                .wrapping_abs()
                .cmp(&first_l.wrapping_abs())
                .then_with(|| self.names[l].cmp(&self.names[r]))
                .then_with(|| second_r.wrapping_abs().cmp(&second_l.wrapping_abs()))
                .then_with(|| self.sprints[l].cmp(&self.sprints[r]))
        });
    }
}

/// What a table says about its input besides the rows.
pub(super) struct Summary<'a> {
    /// Sum of |value| over all stacks.
    pub(super) total: i64,
    /// Index of the sample type shown.
    pub(super) sample_index: usize,
    /// The sample type's name.
    pub(super) sample_type: String,
    /// The sample type's unit.
    pub(super) sample_unit: String,
    /// The descriptive lines above the summary, `None` when they are not wanted.
    pub(super) header: Option<Header<'a>>,
}

/// Writes the table of the ranked rows: units, labels, running sums. The one writer of both
/// [`top`](super::top) and [`top_of_tree`](super::top_of_tree), so both say the same of the
/// same values.
pub(super) fn write_table(
    nodes: &Nodes<'_>,
    ranking: &Ranking,
    inline_labels: Vec<&'static str>,
    summary: Summary<'_>,
    options: &TopOptions,
) -> TopTable {
    let Summary {
        total,
        sample_index,
        sample_type,
        sample_unit,
        header,
    } = summary;
    let output_unit = select_output_unit(nodes, &ranking.order, total, &sample_unit);
    let format = |v: i64| scaled_label(v, &sample_unit, &output_unit);

    let mut labels = match &header {
        Some(h) => h.lines(&sample_type, &sample_unit, total, &format),
        None => Vec::new(),
    };
    let flat_sum = ranking
        .order
        .iter()
        .fold(0i64, |acc, &n| acc.wrapping_add(nodes.flat[n]));
    labels.push(format!(
        "Showing nodes accounting for {}, {} of {} total",
        format(flat_sum),
        percentage(flat_sum, total).trim(),
        format(total)
    ));
    if total != 0 {
        let dropped = ranking.dropped;
        if dropped > 0 {
            let cutoff = ((total as f64 * options.node_fraction) as i64).wrapping_abs();
            let noun = if dropped > 1 { "nodes" } else { "node" };
            labels.push(format!(
                "Dropped {dropped} {noun} (cum <= {})",
                format(cutoff)
            ));
        }
        if !ranking.order.is_empty() && ranking.order.len() < ranking.original_count {
            labels.push(format!(
                "Showing top {} nodes out of {}",
                ranking.order.len(),
                ranking.original_count
            ));
        }
    }

    let mut rows = Vec::with_capacity(ranking.order.len());
    let mut running = 0i64;
    for (&n, inline_label) in ranking.order.iter().zip(inline_labels) {
        let (flat, cum) = (nodes.flat[n], nodes.cum[n]);
        running = running.wrapping_add(flat);
        rows.push(TopRow {
            name: nodes.names[n].clone(),
            inline_label,
            flat,
            cum,
            flat_text: format(flat),
            flat_percent: percentage(flat, total),
            sum_percent: percentage(running, total),
            cum_text: format(cum),
            cum_percent: percentage(cum, total),
        });
    }
    TopTable {
        labels,
        rows,
        total,
        sample_index,
        sample_type,
        sample_unit,
        output_unit,
    }
}

/// Picks the print unit from the smallest non-zero value shown and the total, so that small
/// rows keep two significant decimals without the total becoming unreadable.
fn select_output_unit(nodes: &Nodes<'_>, order: &[usize], total: i64, sample_unit: &str) -> String {
    if order.is_empty() {
        return "minimum".to_owned();
    }
    let mut min_value = 0i64;
    for &n in order {
        let mut v = nodes.flat[n].wrapping_abs();
        if v == 0 {
            v = nodes.cum[n].wrapping_abs();
        }
        if v > 0 && (min_value == 0 || v < min_value) {
            min_value = v;
        }
    }
    let max_value = total;
    if min_value == 0 {
        min_value = max_value;
    }
    let (_, min_unit) = scale(min_value, sample_unit, "minimum");
    let (_, max_unit) = scale(max_value, sample_unit, "minimum");
    let mut unit = min_unit.clone();
    if min_unit != max_unit && min_value.wrapping_mul(100) < max_value {
        unit = scale(min_value.wrapping_mul(100), sample_unit, "minimum").1;
    }
    if unit.is_empty() {
        sample_unit.to_owned()
    } else {
        unit
    }
}

/// What pprof prints about a profile above the summary, besides its sample type: its first
/// mapping's file and build id, comments, time and duration. Empty for inputs that are not one
/// profile (a merged call tree).
#[derive(Default)]
pub(super) struct Header<'a> {
    file: &'a str,
    build_id: &'a str,
    comments: Vec<&'a str>,
    time_nanos: i64,
    duration_nanos: i64,
}

impl<'a> Header<'a> {
    pub(super) fn of(profile: &'a Profile) -> Header<'a> {
        let mut header = Header {
            comments: profile
                .comment
                .iter()
                .map(|&c| string(profile, c))
                .collect(),
            time_nanos: profile.time_nanos,
            duration_nanos: profile.duration_nanos,
            ..Header::default()
        };
        if let Some(m) = profile.mapping.first() {
            let file = string(profile, m.filename);
            header.build_id = string(profile, m.build_id);
            header.file = if header.build_id.is_empty() && has_url_scheme(file) {
                ""
            } else {
                file
            };
        }
        header
    }

    /// The lines, `Type:` included (pprof prints it between the comments and the time).
    fn lines(
        &self,
        sample_type: &str,
        sample_unit: &str,
        total: i64,
        format: &dyn Fn(i64) -> String,
    ) -> Vec<String> {
        let mut labels = Vec::new();
        if !self.file.is_empty() {
            labels.push(format!("File: {}", go_base(self.file)));
        }
        if !self.build_id.is_empty() {
            labels.push(format!("Build ID: {}", self.build_id));
        }
        for c in &self.comments {
            if !c.starts_with('#') {
                labels.push((*c).to_owned());
            }
        }
        if !sample_type.is_empty() {
            labels.push(format!("Type: {sample_type}"));
        }
        if self.time_nanos != 0 {
            labels.push(format!("Time: {}", format_time_utc(self.time_nanos)));
        }
        if self.duration_nanos != 0 {
            let duration = scaled_label(self.duration_nanos, "nanoseconds", "auto");
            let (total_nanos, total_unit) = scale(total, sample_unit, "nanoseconds");
            let ratio = if total_unit == "ns" && total_nanos != 0.0 {
                format!("({})", percentage(total_nanos as i64, self.duration_nanos))
            } else {
                String::new()
            };
            labels.push(format!(
                "Duration: {duration}, Total samples = {} {ratio}",
                format(total)
            ));
        }
        labels
    }
}
