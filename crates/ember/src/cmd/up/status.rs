//! What `ember up` says while it runs: once profiles have arrived, the services it has seen
//! and a query to run (always, once); on a terminal, a one-line status rewritten in place
//! (services, profiles stored, last ingest). Piped or redirected, nothing periodic is written.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::cmd::listing::{self, Holdings};

/// How often the server is asked.
const TICK: Duration = Duration::from_secs(2);
/// How many service names the first listing shows before "and N more".
const NAMES_SHOWN: usize = 8;

/// Profiles the server has stored since it started (its `/metrics` counter).
fn profiles_stored(client: &ember_http::BlockingClient, url: &str) -> Option<u64> {
    let response = client
        .send(ember_http::Request::get(format!("{url}/metrics")))
        .ok()?;
    let text = String::from_utf8_lossy(&response.body);
    text.lines()
        .find_map(|l| l.strip_prefix("ember_ingested_profiles_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
}

/// The status line: `12 services, 340 profiles stored, last ingest 3 s ago`.
fn status_line(services: usize, stored: u64, last: Option<Instant>) -> String {
    let last = match last {
        Some(t) => format!("last ingest {} s ago", t.elapsed().as_secs()),
        None => "no ingest yet".to_string(),
    };
    format!("ember up: {services} services, {stored} profiles stored, {last} (Ctrl-C stops)")
}

/// The first listing: the services by name and a query that runs as printed.
fn first_listing(holdings: &Holdings, url: &str) -> String {
    let mut names: Vec<&str> = holdings.busiest.iter().map(|(s, _)| s.as_str()).collect();
    for s in holdings.services.keys() {
        if !s.is_empty() && !names.contains(&s.as_str()) {
            names.push(s);
        }
    }
    let more = names.len().saturating_sub(NAMES_SHOWN);
    let mut text = format!(
        "ember up: profiles are arriving from {} services, busiest first: {}{}\n",
        names.len(),
        names[..names.len().min(NAMES_SHOWN)].join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    );
    if let Some((service, kind)) = holdings.suggested() {
        text.push_str(&format!(
            "  look at one:  {}\n",
            listing::query_command(url, service, kind, "now-15m")
        ));
    }
    let list = if url.trim_end_matches('/') == "http://127.0.0.1:4040" {
        "ember query --list".to_string()
    } else {
        format!("ember query --list --server {url}")
    };
    text.push_str(&format!(
        "  list them all (services, profile types): {list}\n"
    ));
    text
}

/// Watches the server at `url` until `stop` fires. `terminal`: stderr is a terminal.
pub async fn watch(url: String, terminal: bool, mut stop: tokio::sync::oneshot::Receiver<()>) {
    let Ok(client) = ember_http::BlockingClient::new(&ember_http::ClientConfig {
        timeout: Duration::from_secs(10),
        ..ember_http::ClientConfig::default()
    }) else {
        return;
    };
    let client = std::sync::Arc::new(client);
    let mut listed = false;
    let mut stored_before = 0;
    let mut last_ingest: Option<Instant> = None;
    let mut drawn = false;
    loop {
        let (c, u) = (client.clone(), url.clone());
        let asked = tokio::task::spawn_blocking(move || {
            let server = listing::Server {
                url: &u,
                tenant: None,
                token: None,
            };
            let holdings = listing::fetch(&c, &server, "{}", "now-1h", "now").ok();
            (holdings, profiles_stored(&c, &u))
        })
        .await;
        if let Ok((holdings, stored)) = asked {
            let stored = stored.unwrap_or(stored_before);
            if stored > stored_before {
                stored_before = stored;
                last_ingest = Some(Instant::now());
            }
            let services = holdings
                .as_ref()
                .map(|h| h.services.keys().filter(|s| !s.is_empty()).count())
                .unwrap_or(0);
            let mut err = std::io::stderr().lock();
            if drawn {
                // Clear the status line before anything else is written over it.
                let _ = write!(err, "\r\x1b[2K");
                drawn = false;
            }
            if !listed && let Some(h) = holdings.as_ref().filter(|_| services > 0) {
                listed = true;
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(first_listing(h, &url).as_bytes());
                let _ = out.flush();
            }
            if terminal {
                // The cursor goes back to the line's start, so a log line written meanwhile
                // covers the status instead of running on after it.
                let _ = write!(err, "{}\r", status_line(services, stored, last_ingest));
                let _ = err.flush();
                drawn = true;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = &mut stop => break,
        }
    }
    if drawn {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_names_services_profiles_and_last_ingest() {
        assert_eq!(
            status_line(3, 40, None),
            "ember up: 3 services, 40 profiles stored, no ingest yet (Ctrl-C stops)"
        );
        let line = status_line(1, 2, Some(Instant::now()));
        assert!(line.contains("last ingest 0 s ago"), "{line}");
    }
}
