//! The result shapes of a merged selection or a diff as files: pprof, folded stacks, SVG flame
//! graphs and top tables (the flamebearer JSON is in `flamebearer`).

use std::collections::BTreeMap;

use ember_store::Merged;

use crate::QueryError;
use crate::flamebearer::type_parts;

/// An output format of a query or a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Pyroscope flamebearer JSON (the default; `json` is an alias).
    Flamebearer,
    /// The same flame graph as [`Format::Flamebearer`] (node limit included) in the compact
    /// binary layout of the web UI (`flamebearer-bin`): typed columns a browser reads without
    /// parsing, no timeline. The layout is in [`crate::flamebin`].
    FlamebearerBin,
    /// gzip'd pprof protobuf (a diff: right minus left per stack).
    Pprof,
    /// Folded stacks `frame;frame value` (a diff: `stack left right`).
    Folded,
    /// SVG flame graph (a diff: differential, widths from the right side).
    Svg,
    /// pprof-style top table of the heaviest functions.
    Top,
    /// speedscope JSON (<https://www.speedscope.app/file-format-schema.json>): one `sampled`
    /// profile of the merged stacks, weights in the profile type's unit. Of a diff: two
    /// profiles over one frame table, the baseline and the comparison (speedscope has no
    /// differential view, so it shows them side by side in its profile selector).
    Speedscope,
    /// The top table as JSON, every function (no 0.5 % cut-off, at most
    /// [`TOP_JSON_ROWS`](crate::TOP_JSON_ROWS) rows): what the web UI sorts and filters. Of a
    /// diff: every function of either side with both sides' values and the change.
    TopJson,
    /// The pprof-style call graph as JSON (functions with self and total, caller → callee
    /// edges), pruned with the default [`CallGraphOptions`](crate::CallGraphOptions). Not of
    /// a diff.
    CallGraph,
}

impl Format {
    /// Parses a format name; `None` (absent) is [`Format::Flamebearer`].
    pub fn parse(name: Option<&str>) -> Result<Format, QueryError> {
        Ok(match name.unwrap_or("flamebearer") {
            "flamebearer" | "json" => Format::Flamebearer,
            "flamebearer-bin" => Format::FlamebearerBin,
            "pprof" => Format::Pprof,
            "folded" => Format::Folded,
            "svg" => Format::Svg,
            "top" => Format::Top,
            "top-json" => Format::TopJson,
            "callgraph" => Format::CallGraph,
            "speedscope" => Format::Speedscope,
            other => {
                return Err(QueryError::Invalid(format!(
                    "format={other:?}: use pprof, folded, svg, speedscope, top, top-json, \
                     callgraph, flamebearer or flamebearer-bin"
                )));
            }
        })
    }
}

/// An encoded answer: JSON, or bytes with their content type.
#[derive(Debug, Clone)]
pub enum Output {
    /// A JSON document (flamebearer).
    Json(serde_json::Value),
    /// A file: its `Content-Type` and bytes.
    Bytes {
        /// MIME type (`image/svg+xml`, `text/plain; charset=utf-8`, ...).
        content_type: &'static str,
        /// The encoded answer.
        body: Vec<u8>,
    },
}

impl Output {
    pub(crate) fn text(body: String) -> Output {
        Output::Bytes {
            content_type: "text/plain; charset=utf-8",
            body: body.into_bytes(),
        }
    }

    /// A speedscope file of `profile` (every sample type), named `name`.
    fn speedscope(profile: &ember_pprof::Profile, name: &str) -> Result<Output, QueryError> {
        let file = ember_formats::speedscope::profile_to_speedscope(profile, None, name)
            .map_err(|e| QueryError::Render(e.to_string()))?;
        Ok(Output::Bytes {
            content_type: "application/json",
            body: file.to_json().into_bytes(),
        })
    }

    /// A binary flame graph (`flamebearer-bin`).
    pub(crate) fn flame_binary(body: Vec<u8>) -> Output {
        Output::Bytes {
            content_type: crate::flamebin::CONTENT_TYPE,
            body,
        }
    }

    fn pprof(profile: &ember_pprof::Profile) -> Output {
        Output::Bytes {
            content_type: "application/octet-stream",
            body: ember_pprof::encode_gzip(profile),
        }
    }
}

/// A one-sample-type pprof profile of the merged stacks, typed (sample type and period) by
/// the first profile type of `merged`: a function and a location per frame name, a sample per
/// frame with a value (the root's own value, from samples that had no frame, a sample without
/// locations, so the total is kept). Built from the merged frames, so a day of hundreds of
/// thousands of stacks never becomes strings per frame.
pub fn pprof_profile(merged: &Merged) -> ember_pprof::Profile {
    let mut b = typed_builder(merged);
    // Location id of each merged name, made on first use.
    let mut location_of: Vec<u64> = vec![0; merged.names.len()];
    let mut samples = Vec::new();
    for (f, &v) in merged.self_values.iter().enumerate() {
        // The root's own value (samples that had no frame) is a sample without locations.
        if v == 0 {
            continue;
        }
        let mut ids = Vec::new();
        let mut frame = f;
        while frame != 0 {
            let (parent, name) = merged.frames[frame];
            let slot = &mut location_of[name as usize];
            if *slot == 0 {
                let n = merged.names.get(name as usize).map_or("", String::as_str);
                let func = b.function(n, n, "");
                *slot = b.location(0, 0, &[(func, 0)]);
            }
            ids.push(*slot);
            frame = parent as usize;
        }
        samples.push(ember_pprof::Sample {
            location_id: ids,
            value: vec![v],
            label: Vec::new(),
        });
    }
    let mut p = b.build();
    p.sample = samples;
    p
}

/// A builder for a one-sample-type profile typed like `typed` (its first profile type).
fn typed_builder(typed: &Merged) -> ember_pprof::ProfileBuilder {
    let [_, t, u, pt, pu] = type_parts(typed);
    let mut b = ember_pprof::ProfileBuilder::new(&[(t.as_str(), u.as_str())]);
    if !pt.is_empty() {
        b.set_period((&pt, &pu), 0);
    }
    b
}

/// Folded text of the merged stacks: one `frame;frame value` line per stack.
pub fn folded_text(merged: &Merged) -> String {
    let mut out = String::new();
    for (frames, v) in &merged.stacks() {
        out.push_str(&frames.join(";"));
        out.push(' ');
        out.push_str(&v.to_string());
        out.push('\n');
    }
    out
}

/// Stacks of a merged selection: `(frames root→leaf, value)`, as [`Merged::stacks`].
type Stacks = [(Vec<String>, i64)];

/// `(stack, left value, right value)` over the union of both sides' stacks
/// ([`Merged::stacks`]), sorted.
pub fn diff_stacks<'a>(left: &'a Stacks, right: &'a Stacks) -> Vec<(&'a [String], i64, i64)> {
    let mut map: BTreeMap<&[String], (i64, i64)> = BTreeMap::new();
    for (frames, v) in left {
        let e = map.entry(frames.as_slice()).or_default();
        e.0 = e.0.saturating_add(*v);
    }
    for (frames, v) in right {
        let e = map.entry(frames.as_slice()).or_default();
        e.1 = e.1.saturating_add(*v);
    }
    map.into_iter().map(|(k, (a, b))| (k, a, b)).collect()
}

/// The pprof form of a diff as `pprof -diff_base=left right` writes it: the right side's
/// stacks as they are, the left side's negated and labelled `pprof::base=true`
/// ([`ember_pprof::DIFF_BASE_LABEL`]). A stack's values add up to right minus left, and
/// `go tool pprof` (like every Ember report) reads percentages against the base's total.
/// `l` and `r` are the sides' [`Merged::stacks`].
pub(crate) fn diff_profile(
    left: &Merged,
    right: &Merged,
    l: &Stacks,
    r: &Stacks,
) -> ember_pprof::Profile {
    let typed = if right.profiles > 0 { right } else { left };
    let mut b = typed_builder(typed);
    let base = [ember_pprof::SampleLabel::Str(
        ember_pprof::DIFF_BASE_LABEL,
        "true",
    )];
    for (frames, l, r) in diff_stacks(l, r) {
        let f: Vec<&str> = frames.iter().map(String::as_str).collect();
        if l != 0 {
            b.add_labelled_folded_stack(&f, &[l.saturating_neg()], &base);
        }
        if r != 0 {
            b.add_folded_stack(&f, &[r]);
        }
    }
    b.build()
}

/// An SVG flame graph of `lines` (differential when they carry a second count), titled
/// `title`, or `default_title` when that is empty.
/// An SVG flame graph of `lines`, whose values are of `typed`'s profile type: the tooltips
/// name them as every Ember flame graph does ([`ember_formats::units::value_name`]).
fn svg(
    lines: Vec<ember_formats::FoldedLine>,
    typed: &Merged,
    title: &str,
    default_title: &str,
) -> Result<Output, QueryError> {
    let [_, sample_type, unit, _, _] = type_parts(typed);
    let folded = ember_formats::Folded {
        lines,
        ignored_lines: 0,
        has_fractional: false,
    };
    let options = ember_flamegraph::Options {
        title: if title.is_empty() {
            default_title.into()
        } else {
            title.into()
        },
        count_name: ember_formats::units::value_name(&sample_type, &unit),
        ..Default::default()
    };
    let mut body = Vec::new();
    ember_flamegraph::render(&folded, &options, &mut body)
        .map_err(|e| QueryError::Render(e.to_string()))?;
    Ok(Output::Bytes {
        content_type: "image/svg+xml",
        body,
    })
}

/// `text`, or `default` when it is empty.
fn or<'a>(text: &'a str, default: &'a str) -> &'a str {
    if text.is_empty() { default } else { text }
}

/// A merged selection as a file (flamebearer needs the store for its timeline: see
/// `Querier::render`).
pub(crate) fn merged_file(
    merged: &Merged,
    format: Format,
    title: &str,
) -> Result<Output, QueryError> {
    match format {
        Format::Folded => Ok(Output::text(folded_text(merged))),
        Format::Pprof => Ok(Output::pprof(&pprof_profile(merged))),
        Format::Speedscope => Output::speedscope(&pprof_profile(merged), or(title, "Ember")),
        Format::Top => Ok(Output::text(crate::top::merged_top(merged).render())),
        Format::TopJson => Ok(Output::Json(crate::top::top_json(
            &crate::top::merged_top_with(merged, &crate::top::json_options()),
        ))),
        Format::Flamebearer | Format::FlamebearerBin => Err(QueryError::Invalid(
            "a flamebearer is made from the node-limited merge: ask Querier::render".into(),
        )),
        Format::CallGraph => Ok(Output::Json(
            crate::callgraph::call_graph(merged, &Default::default()).to_json(),
        )),
        Format::Svg => {
            let lines = merged
                .stacks()
                .iter()
                .map(|(frames, v)| ember_formats::FoldedLine {
                    stack: frames.join(";").into(),
                    count: *v as f64,
                    second_count: None,
                })
                .collect();
            svg(lines, merged, title, "Flame Graph")
        }
    }
}

/// A diff in `format`; `title` names the flame graph, which keeps at most `max_nodes` nodes
/// (0 = every node).
pub(crate) fn diff_output(
    left: &Merged,
    right: &Merged,
    format: Format,
    title: &str,
    max_nodes: usize,
) -> Result<Output, QueryError> {
    // The top table reads the call trees; the other formats need the stacks as strings.
    let stacks = || (left.stacks(), right.stacks());
    match format {
        Format::Top => Ok(Output::text(crate::top::diff_top(left, right).render())),
        Format::TopJson => Ok(Output::Json(crate::top::diff_top_json(left, right))),
        Format::CallGraph => Err(QueryError::Unsupported(
            "a diff has no call graph: ask for each side's".into(),
        )),
        Format::Flamebearer | Format::FlamebearerBin => {
            let (l, r) = stacks();
            let tree = crate::tree::DiffTree::new(&l, &r).truncate(max_nodes);
            Ok(if format == Format::Flamebearer {
                Output::Json(crate::flamebearer::double(&tree, left, right, title))
            } else {
                Output::flame_binary(crate::flamebin::double(&tree, left, right, title))
            })
        }
        Format::Folded => {
            let (l, r) = stacks();
            let mut out = String::new();
            for (frames, a, b) in diff_stacks(&l, &r) {
                out.push_str(&frames.join(";"));
                out.push_str(&format!(" {a} {b}\n"));
            }
            Ok(Output::text(out))
        }
        Format::Pprof => {
            let (l, r) = stacks();
            Ok(Output::pprof(&diff_profile(left, right, &l, &r)))
        }
        Format::Speedscope => {
            let (l, r) = stacks();
            let typed = if right.profiles > 0 { right } else { left };
            let [_, _, u, _, _] = type_parts(typed);
            // Two sample types, one per side: the converter writes a profile of each over
            // one shared frame table.
            let mut b = ember_pprof::ProfileBuilder::new(&[
                ("baseline", u.as_str()),
                ("comparison", u.as_str()),
            ]);
            for (frames, a, b2) in diff_stacks(&l, &r) {
                let f: Vec<&str> = frames.iter().map(String::as_str).collect();
                b.add_folded_stack(&f, &[a, b2]);
            }
            Output::speedscope(&b.build(), or(title, "Ember diff"))
        }
        Format::Svg => {
            let (l, r) = stacks();
            let lines = diff_stacks(&l, &r)
                .into_iter()
                .map(|(frames, a, b)| ember_formats::FoldedLine {
                    stack: frames.join(";").into(),
                    count: a as f64,
                    second_count: Some(b as f64),
                })
                .collect();
            let typed = if right.profiles > 0 { right } else { left };
            svg(lines, typed, title, "Differential Flame Graph")
        }
    }
}
