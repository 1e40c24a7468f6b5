//! The one request type every read front end builds: [`QueryRequest`].

use ember_store::{Matcher, Selector};

use crate::QueryError;

/// The node limit of a flame graph when the request names none: 8,192.
///
/// It is Pyroscope's own default (`-querier.max-flamegraph-nodes-default`), so Grafana and
/// the Pyroscope UI get the detail they were built for from either front end (before, the
/// `querier.v1` front end used 16,384 and the render/API v1 front end 8,192). Truncation keeps
/// the heaviest nodes and their ancestors, so a hot frame stays visible however deep; a
/// request that wants everything asks for `0` (no limit).
pub const DEFAULT_MAX_NODES: usize = 8192;

/// The pprof sample label holding a sample's trace span id: `span_id`, the name
/// OpenTelemetry's Go profiling wrapper (otel-profiling-go) and Pyroscope's SDKs write.
pub const SPAN_ID_LABEL: &str = "span_id";

/// How the name written before a selector's braces (`NAME{...}`) is read.
///
/// The two kinds of clients disagree, so the front end says which it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// Ember's HTTP API and the Pyroscope routes: a name with `:` is a profile type id
    /// (`process_cpu:cpu:nanoseconds:cpu:nanoseconds{...}`, it wins over an explicit type);
    /// `app.cpu` is the legacy Pyroscope application name (`service_name="app"` and, unless a
    /// type was given, sample type `cpu`); a bare name is the service.
    PyroscopeApp,
    /// `querier.v1` (Prometheus style): the name is the `__name__` label (`process_cpu{...}`).
    MetricName,
}

/// One query over stored profiles: which series (selector and profile type), which time
/// range, and how to shape the answer (step, group-by, node limit).
///
/// Build it with [`QueryRequest::new`] (or [`QueryRequest::parse`] from a selector text) and
/// set the optional fields; the defaults are the documented ones of every front end.
#[derive(Debug, Clone)]
pub struct QueryRequest {
    /// Series label matchers (the selector's name is already resolved into matchers or the
    /// profile type).
    pub selector: Selector,
    /// Profile type id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`) or a bare sample type
    /// (`cpu`); `None` merges every matching series whatever its type.
    pub profile_type: Option<String>,
    /// Inclusive start, unix nanoseconds.
    pub start_nanos: i64,
    /// Inclusive end, unix nanoseconds.
    pub end_nanos: i64,
    /// Time series and timeline bucket width in nanoseconds; `None` picks one
    /// ([`QueryRequest::step_nanos`]: at least 10 s, at most about 1,000 buckets).
    pub step_nanos: Option<i64>,
    /// Labels a time series is grouped by (one series per distinct combination of their
    /// values; empty = one series).
    pub group_by: Vec<String>,
    /// Most call-tree nodes of a flame graph ([`DEFAULT_MAX_NODES`]; 0 = no limit).
    pub max_nodes: usize,
    /// Only samples of these trace span ids (the pprof sample label [`SPAN_ID_LABEL`], as
    /// OpenTelemetry's Go profiling wrapper and Pyroscope's SDKs write it); empty = no span
    /// filter.
    pub span_ids: Vec<String>,
    /// Only samples whose labels match all of these (a label is looked up in the series
    /// labels first, then in the sample's pprof labels); empty = no filter.
    pub sample_labels: Vec<Matcher>,
    /// The call path (frame names from the root's child down) to focus on: only the stacks
    /// through it count, so a flame graph's node limit is spent on its subtree (the web UI's
    /// zoom) and a file holds just that part; empty = the whole selection.
    pub focus: Vec<String>,
    /// Frame filters (hide, collapse recursion, drop below), applied to the merged selection
    /// before the focus and the node limit; the default filters nothing.
    pub filters: crate::FrameFilters,
    /// A binary flame graph (`flamebearer-bin`) leaves out every node whose total is below
    /// this share of the whole (0, the default, keeps every node): what the web UI asks for
    /// first, the nodes wide enough to be drawn at its width, before the whole tree. The
    /// nodes kept keep their places (the answer then has an `x` column,
    /// [`crate::flamebin`]). Ignored when a value is negative.
    pub min_share: f64,
}

impl QueryRequest {
    /// A request for `selector` (and `profile_type`) over `[start_nanos, end_nanos]`, every
    /// other field at its default.
    pub fn new(
        selector: Selector,
        profile_type: Option<String>,
        start_nanos: i64,
        end_nanos: i64,
    ) -> Self {
        QueryRequest {
            selector,
            profile_type,
            start_nanos,
            end_nanos,
            step_nanos: None,
            group_by: Vec::new(),
            max_nodes: DEFAULT_MAX_NODES,
            span_ids: Vec::new(),
            sample_labels: Vec::new(),
            focus: Vec::new(),
            filters: crate::FrameFilters::default(),
            min_share: 0.0,
        }
    }

    /// Parses `selector_text` (empty = every series) by `rule`, with the explicit
    /// `profile_type` (empty = none), over `[start_nanos, end_nanos]`.
    pub fn parse(
        selector_text: &str,
        profile_type: Option<&str>,
        rule: NameRule,
        start_nanos: i64,
        end_nanos: i64,
    ) -> Result<Self, QueryError> {
        let (selector, profile_type) =
            crate::parse::resolve_selector(selector_text, profile_type, rule)?;
        Ok(QueryRequest::new(
            selector,
            profile_type,
            start_nanos,
            end_nanos,
        ))
    }

    /// The bucket width: the requested one, else at least 10 s and at most about 1,000
    /// buckets over the range (a multiple of 10 s).
    pub fn step_nanos(&self) -> i64 {
        if let Some(step) = self.step_nanos {
            return step.max(1);
        }
        let range = (self.end_nanos - self.start_nanos).max(1);
        let ten = 10_000_000_000i64;
        ((range / 1000) / ten + 1) * ten
    }

    /// The store query of this request: the selector with the span and sample-label
    /// filters added as matchers (the store applies a matcher on a name a series lacks to
    /// its samples).
    pub(crate) fn store_query(&self) -> Result<ember_store::Query, QueryError> {
        let mut selector = self.selector.clone();
        if let Some(spans) = Matcher::any_of(SPAN_ID_LABEL, &self.span_ids) {
            selector.matchers.push(spans);
        }
        selector.matchers.extend(self.sample_labels.iter().cloned());
        Ok(ember_store::Query {
            selector,
            profile_type: self.profile_type.clone(),
            start_nanos: self.start_nanos,
            end_nanos: self.end_nanos,
        })
    }
}
