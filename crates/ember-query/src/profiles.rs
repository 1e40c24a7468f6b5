//! Single profiles: the listing of a selection's individual profiles, and the request that
//! reads exactly one of them back (one series at one instant), so every shape of a selection
//! (flame graph, call graph, top table, files) is available for one profile too.

use ember_store::{Labels, MatchOp, Matcher, ProfileList, Selector};

use crate::{Querier, QueryError, QueryRequest};

/// The most recent profiles a listing returns when the request names no limit.
pub const DEFAULT_PROFILE_LIST: usize = 500;

impl Querier<'_> {
    /// The `limit` most recent individual profiles of the selection in its time range
    /// (newest first; capped at [`ember_store::MAX_PROFILE_LIST`]) and how many it holds.
    pub fn profiles(
        &self,
        tenant: &str,
        req: &QueryRequest,
        limit: usize,
    ) -> Result<ProfileList, QueryError> {
        Ok(self.store.list_profiles(tenant, &req.store_query()?, limit))
    }

    /// The request for exactly the profile of the series labelled `labels` at `time_nanos`
    /// (several stored at that very instant are read together, as the listing counts them).
    ///
    /// The selector holds an `=` matcher per label; a series with the same labels and more
    /// (`{service_name="api"}` beside `{service_name="api", pod="a"}`) would match it too, so
    /// each label such a series has at that instant and this one lacks is required empty.
    /// [`QueryError::NotFound`] when the series holds no profile then.
    pub fn profile_request(
        &self,
        tenant: &str,
        labels: &Labels,
        time_nanos: i64,
    ) -> Result<QueryRequest, QueryError> {
        let selector = Selector {
            name: None,
            matchers: labels.iter().map(|(n, v)| Matcher::eq(n, v)).collect(),
        };
        let mut req = QueryRequest::new(selector, None, time_nanos, time_nanos);
        let series = self.store.series(tenant, Some(&req.store_query()?));
        if !series.iter().any(|s| same_labels(s, labels)) {
            return Err(QueryError::NotFound(format!(
                "no profile of {} at {time_nanos}",
                selector_text(labels)
            )));
        }
        let extra: std::collections::BTreeSet<&str> = series
            .iter()
            .flat_map(|s| s.iter().map(|(n, _)| n.as_str()))
            .filter(|n| !labels.iter().any(|(m, _)| m == n))
            .collect();
        req.selector
            .matchers
            .extend(extra.into_iter().map(|n| Matcher {
                name: n.to_string(),
                op: MatchOp::Eq(String::new()),
            }));
        Ok(req)
    }
}

/// Whether two label sets are equal whatever their order.
fn same_labels(a: &Labels, b: &Labels) -> bool {
    let mut a = a.clone();
    let mut b = b.clone();
    a.sort();
    b.sort();
    a == b
}

/// `{a="1", b="2"}` with Prometheus escaping: how a profile's series is written in a URL.
pub fn selector_text(labels: &Labels) -> String {
    let pairs: Vec<String> = labels
        .iter()
        .map(|(n, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{n}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// The labels of a series written as a selector of `=` matchers (as [`selector_text`]
/// writes it): what a single-profile request names its series by.
pub fn parse_series(text: &str) -> Result<Labels, QueryError> {
    let selector =
        ember_store::parse_selector(text).map_err(|e| QueryError::Selector(e.to_string()))?;
    if selector.name.is_some() {
        return Err(QueryError::Selector(format!(
            "series={text:?}: only {{label=\"value\", ...}}, without a name"
        )));
    }
    let mut labels = Labels::new();
    for m in selector.matchers {
        match m.op {
            MatchOp::Eq(v) => labels.push((m.name, v)),
            _ => {
                return Err(QueryError::Selector(format!(
                    "series={text:?}: every label must be given with ="
                )));
            }
        }
    }
    if labels.is_empty() {
        return Err(QueryError::Selector("series: no labels".into()));
    }
    labels.sort();
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_text_round_trips() {
        let labels: Labels = vec![
            ("__name__".into(), "process_cpu".into()),
            ("service_name".into(), "a \"quoted\" \\ name".into()),
        ];
        assert_eq!(parse_series(&selector_text(&labels)).unwrap(), labels);
        assert!(parse_series("{a=~\"x\"}").is_err());
        assert!(parse_series("{}").is_err());
    }
}
