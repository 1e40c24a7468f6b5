//! Pull scraping (the Grafana Alloy `pyroscope.scrape` model): every target of every job is
//! fetched per profile type on its own timer; cumulative types are turned into deltas
//! (the first scrape only primes them); results and errors land in [`Metrics`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use ember_http::Url;

use crate::Outbox;
use crate::config::ScrapeConfig;
use crate::metrics::Metrics;
use crate::relabel::{self, Labels};

/// Largest profile body accepted from a target.
const MAX_SCRAPE_BYTES: u64 = 64 << 20;

/// One target of a job, after relabelling.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// Job name.
    pub job: String,
    /// `host:port` (the `instance` label).
    pub instance: String,
    /// Base URL.
    pub url: Url,
    /// Labels sent with its profiles (meta labels removed).
    pub labels: Labels,
    /// Time between scrapes.
    pub interval: Duration,
    /// Time limit of one scrape.
    pub timeout: Duration,
    /// (profile name, type key, path, delta).
    pub types: Vec<(String, String, String, bool)>,
}

/// The targets of a job (static targets, relabelled; dropped ones left out).
pub fn targets(job: &ScrapeConfig) -> Vec<Target> {
    let Ok(rules) = relabel::compile(&job.relabel_configs) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for sc in &job.static_configs {
        for address in &sc.targets {
            let mut labels: Labels = sc.labels.clone();
            labels.insert("__address__".into(), address.clone());
            labels.insert("job".into(), job.job_name.clone());
            let Some(mut labels) = relabel::apply(&rules, labels) else {
                continue;
            };
            let address = labels.get("__address__").cloned().unwrap_or_default();
            let url = if address.contains("://") {
                address.clone()
            } else {
                format!("http://{address}")
            };
            let Ok(url) = ember_http::parse_url(&url) else {
                continue;
            };
            let instance = ember_http::host_port(&url);
            relabel::drop_meta(&mut labels);
            labels
                .entry("instance".into())
                .or_insert_with(|| instance.clone());
            labels
                .entry("service_name".into())
                .or_insert_with(|| job.job_name.clone());
            out.push(Target {
                job: job.job_name.clone(),
                instance,
                url,
                labels,
                interval: job.scrape_interval.0,
                timeout: job.timeout(),
                types: job.profiling_config.enabled(),
            });
        }
    }
    out
}

/// Starts one task per (target, profile type); abort the handles to stop.
pub fn spawn(
    target: &Target,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
) -> Vec<tokio::task::JoinHandle<()>> {
    target
        .types
        .iter()
        .cloned()
        .map(|(name, key, path, delta)| {
            let target = target.clone();
            let outbox = outbox.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                scrape_loop(target, name, key, path, delta, outbox, metrics).await;
            })
        })
        .collect()
}

enum Outcome {
    Sent,
    Primed,
}

async fn scrape_loop(
    target: Target,
    name: String,
    key: String,
    path: String,
    delta: bool,
    outbox: Arc<Outbox>,
    metrics: Arc<Metrics>,
) {
    let seconds = target.interval.as_secs().saturating_sub(1).max(1);
    let url = ember_http::join_url(
        &target.url,
        &path.replace("{seconds}", &seconds.to_string()),
    );
    let mut ticker = tokio::time::interval(target.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut previous: Option<ember_pprof::Profile> = None;
    let mut labels = target.labels.clone();
    labels.insert("__name__".into(), name.clone());
    loop {
        ticker.tick().await;
        let started = Instant::now();
        let result = scrape_once(&url, target.timeout, delta, &mut previous).await;
        let elapsed = started.elapsed().as_secs_f64();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let outcome = match result {
            Ok((bytes, primed)) => {
                if primed {
                    Ok(Outcome::Primed)
                } else {
                    outbox.send(labels.clone(), bytes);
                    Ok(Outcome::Sent)
                }
            }
            Err(e) => Err(e),
        };
        metrics.scrape(&target.job, &target.instance, &key, |st| {
            st.last_duration_seconds = elapsed;
            st.last_scrape_unix = now;
            match &outcome {
                Ok(o) => {
                    st.up = true;
                    st.successes += 1;
                    st.last_error = None;
                    if let Outcome::Sent = o {
                        st.profiles_sent += 1;
                    }
                }
                Err(e) => {
                    if st.up || st.failures == 0 {
                        tracing::warn!(
                            job = %target.job,
                            instance = %target.instance,
                            profile_type = %key,
                            url = %url,
                            error = ?e,
                            "scrape failed"
                        );
                    }
                    st.up = false;
                    st.failures += 1;
                    st.last_error = Some(e.clone());
                }
            }
        });
    }
}

/// Fetches and checks one profile; returns (bytes to send, whether it only primed a delta).
async fn scrape_once(
    url: &Url,
    timeout: Duration,
    delta: bool,
    previous: &mut Option<ember_pprof::Profile>,
) -> Result<(Vec<u8>, bool), String> {
    // One client (one connection pool) for every target; per-scrape limits are per request.
    static CLIENT: std::sync::OnceLock<Result<ember_http::Client, String>> =
        std::sync::OnceLock::new();
    let client = CLIENT
        .get_or_init(|| {
            ember_http::Client::new(&ember_http::ClientConfig::default()).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let request = ember_http::Request::get(url.as_str())
        .timeout(timeout)
        .max_body(MAX_SCRAPE_BYTES);
    let response = client.fetch(request).await.map_err(|e| e.to_string())?;
    let profile = ember_pprof::decode(&response.body).map_err(|e| format!("bad pprof: {e}"))?;
    if !delta {
        return Ok((response.body.to_vec(), false));
    }
    let result = match previous.as_ref() {
        None => Ok((Vec::new(), true)),
        Some(prev) => match ember_pprof::delta(prev, &profile) {
            Ok(d) => Ok((ember_pprof::encode_gzip(&d), false)),
            // Sample types changed (target restarted as something else): start over.
            Err(_) => Ok((Vec::new(), true)),
        },
    };
    *previous = Some(profile);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicI64, Ordering};

    /// A cumulative `alloc_space` profile whose one stack holds `value` bytes.
    fn cumulative(value: i64) -> Vec<u8> {
        let mut b = ember_pprof::ProfileBuilder::new(&[("alloc_space", "bytes")]);
        let f = b.function("main.grow", "main.grow", "main.go");
        let loc = b.location(0, 0x1000, &[(f, 7)]);
        b.add_sample(&[loc], &[value], &[]);
        ember_pprof::encode_gzip(&b.build())
    }

    /// A real HTTP server on loopback that answers every path with a cumulative profile
    /// (the n-th request reports 10·n² bytes) and records the request targets it saw.
    async fn endpoint() -> (String, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicI64::new(0));
        let log = seen.clone();
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let log = log.clone();
            let count = count.clone();
            async move {
                log.lock().unwrap().push(uri.to_string());
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                cumulative(10 * n * n)
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (addr, seen)
    }

    fn value_of(gz: &[u8]) -> Vec<i64> {
        let p = ember_pprof::decode(gz).unwrap();
        p.sample.iter().flat_map(|s| s.value.clone()).collect()
    }

    #[tokio::test]
    async fn every_profile_type_hits_its_path_and_deltas_skip_the_first_scrape() {
        let (addr, seen) = endpoint().await;
        let job: ScrapeConfig = serde_norway::from_str(&format!(
            "job_name: all\n\
             scrape_interval: 7s\n\
             static_configs: [{{targets: ['{addr}']}}]\n\
             profiling_config:\n\
             \x20 godeltaprof_memory: {{enabled: true, path: /debug/pprof/delta_heap}}\n\
             \x20 godeltaprof_mutex: {{enabled: true, path: /debug/pprof/delta_mutex}}\n\
             \x20 godeltaprof_block: {{enabled: true, path: /debug/pprof/delta_block}}\n\
             \x20 ember_cpu: {{enabled: true, path: '/profile/cpu?seconds={{seconds}}'}}\n\
             \x20 ember_heap: {{enabled: true, path: /profile/heap}}\n\
             \x20 custom: [{{name: wall, path: '/debug/fgprof?seconds=3'}}]\n"
        ))
        .unwrap();
        let targets = targets(&job);
        assert_eq!(targets.len(), 1);
        let names: Vec<(&str, &str)> = targets[0]
            .types
            .iter()
            .map(|t| (t.0.as_str(), t.1.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("process_cpu", "process_cpu"),
                ("memory", "memory"),
                ("block", "block"),
                ("mutex", "mutex"),
                ("goroutine", "goroutine"),
                ("memory", "godeltaprof_memory"),
                ("mutex", "godeltaprof_mutex"),
                ("block", "godeltaprof_block"),
                ("process_cpu", "ember_cpu"),
                ("memory", "ember_heap"),
                ("wall", "custom:wall"),
            ]
        );
        let metrics = Arc::new(Metrics::default());
        let tasks = spawn(&targets[0], Arc::new(crate::Outbox::new()), metrics.clone());
        // The first tick fires at once: one scrape per type, then nothing for 7 s.
        let started = Instant::now();
        while metrics
            .scrape_states()
            .iter()
            .map(|s| s.successes)
            .sum::<u64>()
            < 11
        {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{:?}\n{:?}",
                metrics.scrape_states(),
                seen.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for t in tasks {
            t.abort();
        }
        let mut paths = seen.lock().unwrap().clone();
        paths.sort();
        // CPU profiles last scrape_interval - 1 seconds.
        let mut expected = vec![
            "/debug/pprof/profile?seconds=6",
            "/debug/pprof/allocs",
            "/debug/pprof/block",
            "/debug/pprof/mutex",
            "/debug/pprof/goroutine",
            "/debug/pprof/delta_heap",
            "/debug/pprof/delta_mutex",
            "/debug/pprof/delta_block",
            "/profile/cpu?seconds=6",
            "/profile/heap",
            "/debug/fgprof?seconds=3",
        ];
        expected.sort();
        assert_eq!(paths, expected);
        // Cumulative Go types only primed their delta; the others were sent.
        for st in metrics.scrape_states() {
            let cumulative = ["memory", "block", "mutex"].contains(&st.profile_type.as_str());
            assert!(st.up && st.last_error.is_none(), "{st:?}");
            assert_eq!(st.successes, 1, "{st:?}");
            assert_eq!(st.profiles_sent, u64::from(!cumulative), "{st:?}");
        }
    }

    #[tokio::test]
    async fn deltas_are_differences_of_consecutive_scrapes() {
        let (addr, _) = endpoint().await;
        let url = Url::parse(&format!("http://{addr}/debug/pprof/allocs")).unwrap();
        let timeout = Duration::from_secs(5);
        let mut previous = None;
        // Cumulative 10, 40, 90: the first only primes, then 30 and 50 are sent.
        let (bytes, primed) = scrape_once(&url, timeout, true, &mut previous)
            .await
            .unwrap();
        assert!(primed && bytes.is_empty());
        let (bytes, primed) = scrape_once(&url, timeout, true, &mut previous)
            .await
            .unwrap();
        assert!(!primed);
        assert_eq!(value_of(&bytes), [30]);
        let (bytes, _) = scrape_once(&url, timeout, true, &mut previous)
            .await
            .unwrap();
        assert_eq!(value_of(&bytes), [50]);
        // Without delta the body is passed through as served (cumulative 160).
        let (bytes, primed) = scrape_once(&url, timeout, false, &mut None).await.unwrap();
        assert!(!primed);
        assert_eq!(value_of(&bytes), [160]);
        // Not a profile: an error naming the problem, not a panic.
        let bad = Url::parse(&format!("http://127.0.0.1:{}/x", free_port())).unwrap();
        let err = scrape_once(&bad, timeout, true, &mut previous)
            .await
            .unwrap_err();
        assert!(!err.is_empty());
    }

    #[tokio::test]
    async fn scrape_timeout_bounds_a_target_that_never_answers() {
        let job: ScrapeConfig = serde_norway::from_str(
            "job_name: slow\nscrape_interval: 15s\nscrape_timeout: 300ms\nstatic_configs: [{targets: ['x:1']}]\n",
        )
        .unwrap();
        assert_eq!(job.timeout(), Duration::from_millis(300));
        assert_eq!(targets(&job)[0].timeout, Duration::from_millis(300));
        // Accepts the connection, reads the request, never responds.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                open.push(socket);
            }
        });
        let url = Url::parse(&format!("http://{addr}/debug/pprof/allocs")).unwrap();
        let started = Instant::now();
        let err = scrape_once(&url, job.timeout(), true, &mut None)
            .await
            .unwrap_err();
        let took = started.elapsed();
        held.abort();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(5),
            "{took:?}: {err}"
        );
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn targets_get_job_instance_and_service_labels() {
        let job: ScrapeConfig = serde_norway::from_str(
            "job_name: go\nstatic_configs:\n  - targets: ['127.0.0.1:6060', 'http://h:1']\n    labels: {env: dev}\n  - targets: ['x:2']\n    labels: {service_name: api}\nrelabel_configs:\n  - source_labels: [__address__]\n    regex: 'http://h:1'\n    action: drop\n",
        )
        .unwrap();
        let t = targets(&job);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].instance, "127.0.0.1:6060");
        assert_eq!(t[0].labels["job"], "go");
        assert_eq!(t[0].labels["service_name"], "go");
        assert_eq!(t[0].labels["env"], "dev");
        assert!(!t[0].labels.contains_key("__address__"));
        assert_eq!(t[1].labels["service_name"], "api");
        assert_eq!(t[0].timeout, Duration::from_secs(18));
        let keys: Vec<&str> = t[0].types.iter().map(|x| x.1.as_str()).collect();
        assert_eq!(
            keys,
            ["process_cpu", "memory", "block", "mutex", "goroutine"]
        );
    }
}
