//! What a server holds: its services (`service_name` values) and profile types in a time
//! range, and a ready-to-run `ember query` for one of them. `ember query --list` prints it;
//! `ember up` prints it once profiles arrive. Both ask the server's listing routes
//! (`/api/v1/series`, `/api/v1/timeseries`) through ember-http.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Context;

/// The label that names a series' profile type in `/api/v1/series` answers.
const TYPE_LABEL: &str = "__profile_type__";
/// The CPU profile type the agent sends: the one the suggested query prefers.
pub const CPU_TYPE: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";

/// Where to ask and who is asking.
pub struct Server<'a> {
    /// Base URL, e.g. `http://127.0.0.1:4040`.
    pub url: &'a str,
    /// `X-Scope-OrgID`.
    pub tenant: Option<&'a str>,
    /// Bearer token.
    pub token: Option<&'a str>,
}

/// Services and profile types of a selection.
#[derive(Debug, Default)]
pub struct Holdings {
    /// Every profile type, sorted.
    pub types: BTreeSet<String>,
    /// Each `service_name` with its profile types (series without one are under `""`).
    pub services: BTreeMap<String, BTreeSet<String>>,
    /// CPU time per service in the range (the agent's CPU type only), heaviest first.
    pub busiest: Vec<(String, i64)>,
}

impl Holdings {
    /// The service a first query should look at: the busiest by CPU, else the first.
    pub fn suggested(&self) -> Option<(&str, &str)> {
        let service = self.busiest.first().map(|(s, _)| s.as_str()).or_else(|| {
            self.services
                .keys()
                .find(|s| !s.is_empty())
                .map(String::as_str)
        })?;
        let types = &self.services[service];
        let kind = if types.contains(CPU_TYPE) {
            CPU_TYPE
        } else {
            types.iter().next()?.as_str()
        };
        Some((service, kind))
    }
}

fn get(
    client: &ember_http::BlockingClient,
    server: &Server,
    route: &str,
    params: &[(&str, &str)],
) -> anyhow::Result<serde_json::Value> {
    let mut query = form_urlencoded::Serializer::new(String::new());
    query.extend_pairs(params);
    let url = format!(
        "{}{route}?{}",
        server.url.trim_end_matches('/'),
        query.finish()
    );
    let response = super::query::get_from_server(
        client,
        url,
        server.token,
        server.tenant,
        ("asking", server.url),
    )?;
    serde_json::from_slice(&response.body).context("reading the server's answer")
}

/// The services and profile types of `selector` between `from` and `until`.
pub fn fetch(
    client: &ember_http::BlockingClient,
    server: &Server,
    selector: &str,
    from: &str,
    until: &str,
) -> anyhow::Result<Holdings> {
    let range = [("query", selector), ("from", from), ("until", until)];
    let series = get(client, server, "/api/v1/series", &range)?;
    let mut holdings = Holdings::default();
    for labels in series.as_array().into_iter().flatten() {
        let kind = labels[TYPE_LABEL].as_str().unwrap_or("").to_string();
        let service = labels["service_name"].as_str().unwrap_or("").to_string();
        if !kind.is_empty() {
            holdings.types.insert(kind.clone());
        }
        let types = holdings.services.entry(service).or_default();
        if !kind.is_empty() {
            types.insert(kind);
        }
    }
    if holdings.types.contains(CPU_TYPE) {
        // One bucket over the whole range: each service's CPU time.
        let mut params = range.to_vec();
        params.extend([("type", CPU_TYPE), ("groupBy", "service_name")]);
        // Longer than any range: one bucket, each service's whole total.
        let step = "1000000000";
        params.push(("step", step));
        let answer = get(client, server, "/api/v1/timeseries", &params)?;
        for s in answer["series"].as_array().into_iter().flatten() {
            let Some(name) = s["labels"]["service_name"].as_str() else {
                continue;
            };
            let total: i64 = s["points"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p[1].as_i64())
                .sum();
            holdings.busiest.push((name.to_string(), total));
        }
        holdings
            .busiest
            .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    }
    Ok(holdings)
}

/// `'{service_name="NAME"}'`, quoted for a POSIX shell.
pub fn selector_of(service: &str) -> String {
    let inner = format!(
        "{{service_name=\"{}\"}}",
        service.replace('\\', "\\\\").replace('"', "\\\"")
    );
    format!("'{}'", inner.replace('\'', "'\\''"))
}

/// A command that runs as printed: the merged top table of one service.
pub fn query_command(server_url: &str, service: &str, kind: &str, from: &str) -> String {
    let mut command = format!(
        "ember query {} --type {kind} --from {from}",
        selector_of(service)
    );
    if server_url.trim_end_matches('/') != "http://127.0.0.1:4040" {
        command.push_str(&format!(" --server {server_url}"));
    }
    command
}

/// Writes the listing as `ember query --list` prints it.
pub fn write(
    out: &mut impl std::io::Write,
    holdings: &Holdings,
    server_url: &str,
    from: &str,
    until: &str,
) -> std::io::Result<()> {
    if holdings.services.is_empty() {
        writeln!(
            out,
            "no profiles from {from} to {until} (try a longer range: --from now-7d)"
        )?;
        return Ok(());
    }
    writeln!(out, "profile types ({from} .. {until}):")?;
    for t in &holdings.types {
        writeln!(out, "  {t}")?;
    }
    let cpu: BTreeMap<&str, i64> = holdings
        .busiest
        .iter()
        .map(|(s, v)| (s.as_str(), *v))
        .collect();
    writeln!(
        out,
        "services (the service_name label){}:",
        if cpu.is_empty() {
            ""
        } else {
            ", busiest first, with their CPU seconds"
        }
    )?;
    let mut order: Vec<&String> = holdings.services.keys().collect();
    order.sort_by_key(|s| (std::cmp::Reverse(cpu.get(s.as_str()).copied()), s.as_str()));
    let width = order.iter().map(|s| s.len()).max().unwrap_or(0).min(40);
    for service in order {
        let name = if service.is_empty() {
            "(no service_name)"
        } else {
            service
        };
        let seconds = cpu
            .get(service.as_str())
            .map(|ns| format!("{:>10.2}s  ", *ns as f64 / 1e9))
            .unwrap_or_default();
        let types: Vec<&str> = holdings.services[service]
            .iter()
            .map(String::as_str)
            .collect();
        writeln!(out, "  {name:<width$}  {seconds}{}", types.join(", "))?;
    }
    if let Some((service, kind)) = holdings.suggested() {
        writeln!(
            out,
            "query one:\n  {}",
            query_command(server_url, service, kind, from)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_quoted_for_the_shell() {
        assert_eq!(selector_of("api"), "'{service_name=\"api\"}'");
        assert_eq!(selector_of("it's"), "'{service_name=\"it'\\''s\"}'");
        assert_eq!(
            query_command("http://127.0.0.1:4040/", "python3.11", CPU_TYPE, "now-1h"),
            format!(
                "ember query '{{service_name=\"python3.11\"}}' --type {CPU_TYPE} --from now-1h"
            )
        );
        assert!(
            query_command("http://127.0.0.1:5000", "a", CPU_TYPE, "now-5m")
                .ends_with(" --server http://127.0.0.1:5000")
        );
    }
}
