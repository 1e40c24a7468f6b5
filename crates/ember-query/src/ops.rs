//! The operations on stored profiles: merge (flame graphs and files), diff, time series with
//! group-by, and the label and series listings.

use std::collections::BTreeSet;

use ember_store::{Labels, MatchOp, Matcher, Merged, Store, TimeSeries};
use serde_json::Value;

use crate::QueryError;
use crate::callgraph::{CallGraph, CallGraphOptions};
use crate::flamebearer::{self, Timeline};
use crate::render::{self, Format, Output};
use crate::request::QueryRequest;
use crate::tree::{DiffTree, Tree};

/// Most timeline buckets of one flame graph (a bound on the answer's size whatever the step).
const MAX_TIMELINE_BUCKETS: i64 = 100_000;

/// Answers [`QueryRequest`]s from one store. Cheap to make: it only borrows the store.
///
/// Every operation is synchronous and may take a while on a large selection; a server runs it
/// off its I/O threads.
#[derive(Clone, Copy)]
pub struct Querier<'s> {
    pub(crate) store: &'s Store,
}

impl std::fmt::Debug for Querier<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Querier").finish_non_exhaustive()
    }
}

impl<'s> Querier<'s> {
    /// A querier over `store`.
    pub fn new(store: &'s Store) -> Self {
        Querier { store }
    }

    /// Merges every profile of the selection in its time range into one set of stacks (by
    /// frame names; averaged series contribute their mean), with `req.filters` applied and
    /// only those through `req.focus` when it is set.
    pub fn merge(&self, tenant: &str, req: &QueryRequest) -> Result<Merged, QueryError> {
        let merged = self.store.merge_stacks(tenant, &req.store_query()?);
        Ok(shaped(merged, req))
    }

    /// The merged call tree of the selection, truncated to `req.max_nodes`.
    pub fn call_tree(&self, tenant: &str, req: &QueryRequest) -> Result<Tree, QueryError> {
        let merged = self.merge_for_tree(tenant, &req.store_query()?, req);
        Ok(Tree::from_merged_cut(&merged, req.max_nodes))
    }

    /// The merge a call tree cut to `req.max_nodes` is made of: the node-limited merge, or,
    /// with `req.focus` or `req.filters`, the full merge filtered and focused (the
    /// node-limited one keeps only what the whole graph can show; a focus needs every frame
    /// under its path, and a filter may move values onto frames the limit would have cut).
    fn merge_for_tree(&self, tenant: &str, q: &ember_store::Query, req: &QueryRequest) -> Merged {
        if req.focus.is_empty() && req.filters.is_empty() {
            self.store.merge_stacks_heavy(tenant, q, req.max_nodes)
        } else {
            shaped(self.store.merge_stacks(tenant, q), req)
        }
    }

    /// The flamebearer JSON of the selection (`single` format) with its timeline (totals per
    /// step); titled `title`. An empty selection is an empty flame graph, not an error.
    /// With `req.focus`, only the stacks through that call path (the timeline stays the
    /// selection's). Always `single`, even for a selection holding a pushed `pprof
    /// -diff_base` profile (then the net values: what Pyroscope's `/render` answers and
    /// Grafana draws); [`Querier::flame_graph`] answers such a selection as the diff.
    pub fn flamebearer(
        &self,
        tenant: &str,
        req: &QueryRequest,
        title: &str,
    ) -> Result<Value, QueryError> {
        let q = req.store_query()?;
        let merged = self.merge_for_tree(tenant, &q, req);
        let tree = Tree::from_merged_cut(&merged, req.max_nodes);
        let timeline = self.timeline(tenant, &q, req);
        Ok(flamebearer::single(&tree, &merged, &timeline, title))
    }

    /// Ember's own flame graph of the selection (`/api/v1/query`'s `flamebearer`): the
    /// [`Querier::flamebearer`], except for a selection holding a pushed `pprof -diff_base`
    /// profile, which is the `double` flamebearer of base → new (cut at `req.max_nodes` like
    /// a diff's) with the selection's timeline, so a reader draws the diff it is and reads
    /// shares against the base's total (`leftTicks`) as `go tool pprof` does.
    pub fn flame_graph(
        &self,
        tenant: &str,
        req: &QueryRequest,
        title: &str,
    ) -> Result<Value, QueryError> {
        let Some(diff) = self.stored_diff(tenant, req)? else {
            return self.flamebearer(tenant, req, title);
        };
        let tree = diff.tree().truncate(req.max_nodes);
        let mut fb = flamebearer::double(&tree, &diff.left, &diff.right, title);
        let timeline = self.timeline(tenant, &req.store_query()?, req);
        fb["timeline"] = flamebearer::timeline_json(&timeline);
        Ok(fb)
    }

    /// The totals of the selection per `req.step_nanos()` bucket from its start (every
    /// bucket, empty ones 0): a flame graph's timeline.
    fn timeline(&self, tenant: &str, q: &ember_store::Query, req: &QueryRequest) -> Timeline {
        let step = req.step_nanos();
        let buckets = ((q.end_nanos - q.start_nanos) / step + 1).clamp(1, MAX_TIMELINE_BUCKETS);
        let mut samples = vec![0i64; buckets as usize];
        for ts in self.store.series_totals(tenant, q, step, &[]) {
            for (t, v) in ts.points {
                let i = ((t - q.start_nanos) / step) as usize;
                if let Some(b) = samples.get_mut(i) {
                    *b = b.saturating_add(v);
                }
            }
        }
        Timeline {
            start_nanos: q.start_nanos,
            step_nanos: step,
            samples,
        }
    }

    /// The selection in `format`, titled `title`. A flamebearer of an empty selection is an
    /// empty flame graph; every other format of it is [`QueryError::NotFound`] (an empty file
    /// would look like a broken one). A selection holding a pushed `pprof -diff_base` profile
    /// is the diff in every format but the call graph: the flamebearers (JSON and binary)
    /// `double`, the binary one whole whatever `req.min_share`.
    pub fn render(
        &self,
        tenant: &str,
        req: &QueryRequest,
        format: Format,
        title: &str,
    ) -> Result<Output, QueryError> {
        if format == Format::Flamebearer {
            return self.flame_graph(tenant, req, title).map(Output::Json);
        }
        if format == Format::FlamebearerBin {
            // A pushed diff is the whole `double` graph, `min_share` or not: a first paint of
            // it is the whole answer (a diff's frames are as wide as both sides together).
            if let Some(diff) = self.stored_diff(tenant, req)? {
                return diff.render_limited(format, title, req.max_nodes);
            }
            // The flamebearer's tree without its timeline (the web UI draws its own chart).
            let merged = self.merge_for_tree(tenant, &req.store_query()?, req);
            let tree = Tree::from_merged_cut(&merged, req.max_nodes);
            return Ok(Output::flame_binary(crate::flamebin::single(
                &tree,
                &merged,
                title,
                req.min_share,
            )));
        }
        if format == Format::CallGraph {
            let graph = self.call_graph(tenant, req, &Default::default())?;
            return Ok(Output::Json(graph.to_json()));
        }
        if let Some(diff) = self.stored_diff(tenant, req)? {
            return diff.render(format, title);
        }
        // Top tables sum tier by tier (no merge), unless a focus or a filter needs the merged
        // tree.
        if matches!(format, Format::Top | Format::TopJson)
            && req.focus.is_empty()
            && req.filters.is_empty()
        {
            let options = match format {
                Format::Top => ember_formats::TopOptions::default(),
                _ => crate::top::json_options(),
            };
            let q = req.store_query()?;
            let top = crate::top::selection_top(self.store, tenant, &q, &options);
            let top = top.ok_or_else(|| {
                QueryError::NotFound("no profiles match the query in the time range".into())
            })?;
            return Ok(match format {
                Format::Top => Output::text(top.render()),
                _ => Output::Json(crate::top::top_json(&top)),
            });
        }
        let merged = self.merge(tenant, req)?;
        if merged.profiles == 0 || merged.is_empty() {
            return Err(QueryError::NotFound(
                "no profiles match the query in the time range".into(),
            ));
        }
        render::merged_file(&merged, format, title)
    }

    /// A selection holding `pprof -diff_base` samples (stored as pushed: the base's samples
    /// negated and labelled `pprof::base=true`) as the diff it is, base → the other samples,
    /// so that every file format reports it as `go tool pprof` does the pushed file: top
    /// tables against the base's total, pprof with the base's samples labelled again, SVG
    /// and folded stacks differential (as `ember flamegraph` and `ember convert` draw such a
    /// file). `None` for any other selection; deciding costs a look at the series index,
    /// not a merge.
    fn stored_diff(&self, tenant: &str, req: &QueryRequest) -> Result<Option<Diff>, QueryError> {
        let side = |op: MatchOp| {
            let mut r = req.clone();
            r.sample_labels.push(Matcher {
                name: ember_pprof::DIFF_BASE_LABEL.to_string(),
                op,
            });
            r
        };
        let base_req = side(MatchOp::Eq("true".into()));
        if self
            .store
            .series(tenant, Some(&base_req.store_query()?))
            .is_empty()
        {
            return Ok(None);
        }
        let mut base = self.merge(tenant, &base_req)?;
        if base.is_empty() {
            return Ok(None);
        }
        for v in &mut base.self_values {
            *v = v.saturating_neg();
        }
        base.total = base.total.saturating_neg();
        let right = self.merge(tenant, &side(MatchOp::NotEq("true".into())))?;
        Ok(Some(Diff { left: base, right }))
    }

    /// The pprof-style call graph of the selection (only the stacks through `req.focus` when
    /// it is set), pruned by `options`. An empty selection is an empty graph, not an error.
    pub fn call_graph(
        &self,
        tenant: &str,
        req: &QueryRequest,
        options: &CallGraphOptions,
    ) -> Result<CallGraph, QueryError> {
        Ok(crate::callgraph::call_graph(
            &self.merge(tenant, req)?,
            options,
        ))
    }

    /// The `right` selection against the `left` one (the baseline), each side only the
    /// stacks through its `focus` when that is set (the Compare view's zoom: focused before
    /// any node limit, so the limit is spent on the zoomed subtree).
    pub fn diff(
        &self,
        tenant: &str,
        left: &QueryRequest,
        right: &QueryRequest,
    ) -> Result<Diff, QueryError> {
        Ok(Diff {
            left: self.merge(tenant, left)?,
            right: self.merge(tenant, right)?,
        })
    }

    /// Totals of the selection per `req.step_nanos()` bucket (aligned to its start), one
    /// series per distinct combination of the `req.group_by` labels; only non-empty buckets.
    pub fn time_series(
        &self,
        tenant: &str,
        req: &QueryRequest,
    ) -> Result<Vec<TimeSeries>, QueryError> {
        let q = req.store_query()?;
        Ok(self
            .store
            .series_totals(tenant, &q, req.step_nanos(), &req.group_by))
    }

    /// Label sets of the series matching any of `selections` that hold a profile in its time
    /// range, sorted and distinct; every series ever stored when `selections` is empty.
    pub fn series(
        &self,
        tenant: &str,
        selections: &[QueryRequest],
    ) -> Result<Vec<Labels>, QueryError> {
        if selections.is_empty() {
            return Ok(self.store.series(tenant, None));
        }
        if let [one] = selections {
            return Ok(self.store.series(tenant, Some(&one.store_query()?)));
        }
        let mut out: BTreeSet<Labels> = BTreeSet::new();
        for s in selections {
            out.extend(self.store.series(tenant, Some(&s.store_query()?)));
        }
        Ok(out.into_iter().collect())
    }

    /// Distinct label names of [`Querier::series`], sorted.
    pub fn label_names(
        &self,
        tenant: &str,
        selections: &[QueryRequest],
    ) -> Result<Vec<String>, QueryError> {
        self.distinct(tenant, selections, |(n, _)| Some(n))
    }

    /// Distinct values of label `name` in [`Querier::series`], sorted.
    pub fn label_values(
        &self,
        tenant: &str,
        name: &str,
        selections: &[QueryRequest],
    ) -> Result<Vec<String>, QueryError> {
        self.distinct(tenant, selections, |(n, v)| (n == name).then_some(v))
    }

    /// The distinct strings `pick` takes from the label pairs of [`Querier::series`], sorted.
    fn distinct(
        &self,
        tenant: &str,
        selections: &[QueryRequest],
        pick: impl FnMut((String, String)) -> Option<String>,
    ) -> Result<Vec<String>, QueryError> {
        let set: BTreeSet<String> = self
            .series(tenant, selections)?
            .into_iter()
            .flatten()
            .filter_map(pick)
            .collect();
        Ok(set.into_iter().collect())
    }

    /// Distinct profile type ids of the tenant, sorted.
    pub fn profile_types(&self, tenant: &str) -> Vec<String> {
        self.store.profile_types(tenant)
    }
}

/// `merged` as `req` asks to see it: its frame filters applied, then its focus.
fn shaped(merged: Merged, req: &QueryRequest) -> Merged {
    let merged = if req.filters.is_empty() {
        merged
    } else {
        req.filters.apply(&merged)
    };
    if req.focus.is_empty() {
        merged
    } else {
        crate::focus::focus(&merged, &req.focus)
    }
}

/// Two merged selections: `left` is the baseline, `right` the comparison.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The baseline ("before").
    pub left: Merged,
    /// The comparison ("after").
    pub right: Merged,
}

impl Diff {
    /// Whether neither side matched a stack.
    pub fn is_empty(&self) -> bool {
        self.left.is_empty() && self.right.is_empty()
    }

    /// The union call tree of both sides.
    pub fn tree(&self) -> DiffTree {
        DiffTree::new(&self.left.stacks(), &self.right.stacks())
    }

    /// The `double` flamebearer JSON, titled `title` (empty sides give an empty graph).
    pub fn flamebearer(&self, title: &str) -> Value {
        flamebearer::double(&self.tree(), &self.left, &self.right, title)
    }

    /// The pprof form: right minus left per stack, like `pprof -diff_base=left right`.
    pub fn profile(&self) -> ember_pprof::Profile {
        let (l, r) = (self.left.stacks(), self.right.stacks());
        render::diff_profile(&self.left, &self.right, &l, &r)
    }

    /// The diff in `format`, titled `title`; [`QueryError::NotFound`] when neither side
    /// matched anything.
    pub fn render(&self, format: Format, title: &str) -> Result<Output, QueryError> {
        self.render_limited(format, title, 0)
    }

    /// [`Diff::render`] with the flamebearer cut at `max_nodes` nodes (0 = no limit; the
    /// cut children of a node become one `other` node: see [`DiffTree::truncate`]).
    pub fn render_limited(
        &self,
        format: Format,
        title: &str,
        max_nodes: usize,
    ) -> Result<Output, QueryError> {
        if self.is_empty() {
            return Err(QueryError::NotFound(
                "no profiles match either side of the diff in its time range".into(),
            ));
        }
        render::diff_output(&self.left, &self.right, format, title, max_nodes)
    }
}
