//! The push client: one `push.v1.PusherService/Push` call over the Connect protocol
//! ([`Client`]), and a background sender with a bounded in-memory queue ([`Pusher`]) that
//! never blocks the producer, drops the oldest profiles when full (counted), and retries with
//! exponential backoff, jitter and the server's `Retry-After`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ember_http::{ClientConfig, HttpError, Request};
use prost::Message;

use crate::proto;

/// Most bytes of a push answer read (an acknowledgement or an error message).
const MAX_ANSWER_BYTES: u64 = 1 << 20;
/// Longest `Retry-After` honoured: a server asking for more is waited on for an hour.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Path of the Connect unary Push method, relative to the server URL.
pub const PUSH_PATH: &str = "/push.v1.PusherService/Push";

/// Settings of a push client. Every field has a default ([`PushConfig::default`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PushConfig {
    /// Server base URL, e.g. `http://127.0.0.1:4040` (a path prefix is kept).
    pub url: String,
    /// Tenant sent as `X-Scope-OrgID` (none by default).
    pub tenant_id: Option<String>,
    /// Bearer token sent as `Authorization: Bearer ...` (none by default).
    pub bearer_token: Option<String>,
    /// Most bytes of profiles held while the server is slow or away (64 MiB).
    pub queue_bytes: usize,
    /// Time limit of one push request (10 s).
    pub timeout: Duration,
    /// First retry delay (500 ms); doubles per failure, with jitter.
    pub min_backoff: Duration,
    /// Longest retry delay (30 s).
    pub max_backoff: Duration,
    /// Most profile bytes sent in one request (4 MiB; the server accepts 16 MiB by default).
    pub max_batch_bytes: usize,
    /// For `https://` URLs: PEM file of extra certificates to trust (a private CA or the
    /// server's self-signed certificate), besides the system roots (none by default).
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Proxy URL for the pushes (none by default: `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY`
    /// apply, as with curl).
    pub proxy: Option<String>,
}

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig {
            url: "http://127.0.0.1:4040".into(),
            tenant_id: None,
            bearer_token: None,
            queue_bytes: 64 << 20,
            timeout: Duration::from_secs(10),
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_batch_bytes: 4 << 20,
            tls_ca_file: None,
            proxy: None,
        }
    }
}

/// One profile to push: its series labels and the pprof bytes (gzip'd or raw).
#[derive(Debug, Clone, PartialEq)]
pub struct PushProfile {
    /// Series labels (`service_name`, `__name__`, user labels...).
    pub labels: Vec<(String, String)>,
    /// The pprof profile as sent.
    pub raw_profile: Vec<u8>,
}

impl PushProfile {
    /// Bytes this profile accounts for in the queue.
    pub fn size(&self) -> usize {
        self.raw_profile.len()
            + self
                .labels
                .iter()
                .map(|(n, v)| n.len() + v.len() + 16)
                .sum::<usize>()
            + 64
    }
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The request did not complete (connect, timeout, broken connection).
    #[error("{0}")]
    Http(#[from] HttpError),
    /// The server asked to come back later (429, 503, 5xx, 408).
    #[error("server answered {status}: {message}")]
    Retry {
        /// HTTP status.
        status: u16,
        /// `Retry-After` in seconds, when given.
        retry_after: Option<Duration>,
        /// Server's error message.
        message: String,
    },
    /// The server refused the data for good (4xx): retrying would not help.
    #[error("server rejected the push with {status}: {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// Server's error message.
        message: String,
    },
}

impl PushError {
    /// Whether sending the same data again later may succeed.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, PushError::Rejected { .. })
    }
}

/// Sends push requests to one server.
#[derive(Debug, Clone)]
pub struct Client {
    url: String,
    http: ember_http::Client,
    /// Backoff settings for [`Client::push_with_retries`].
    min_backoff: Duration,
    max_backoff: Duration,
}

impl Client {
    /// A client for `config.url`. The URL, the CA file and the proxy are checked here, so a
    /// bad setting fails at start, not per push.
    pub fn new(config: &PushConfig) -> Result<Client, HttpError> {
        let url = ember_http::join_url(&ember_http::parse_url(&config.url)?, PUSH_PATH);
        let mut headers = vec![("connect-protocol-version".to_string(), "1".to_string())];
        if let Some(tenant) = config.tenant_id.as_ref().filter(|t| !t.is_empty()) {
            headers.push(("x-scope-orgid".to_string(), tenant.clone()));
        }
        let http = ember_http::Client::new(&ClientConfig {
            timeout: config.timeout,
            ca_file: config.tls_ca_file.clone(),
            proxy: config.proxy.clone(),
            bearer_token: config.bearer_token.clone().filter(|t| !t.trim().is_empty()),
            headers,
            max_body: MAX_ANSWER_BYTES,
            ..ClientConfig::default()
        })?;
        Ok(Client {
            url: url.to_string(),
            http,
            min_backoff: config.min_backoff,
            max_backoff: config.max_backoff,
        })
    }

    /// The full URL pushes go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Pushes profiles in one request (one series per profile).
    pub async fn push(&self, profiles: &[PushProfile]) -> Result<(), PushError> {
        let request = proto::PushRequest {
            series: profiles
                .iter()
                .enumerate()
                .map(|(i, p)| proto::RawProfileSeries {
                    labels: p
                        .labels
                        .iter()
                        .map(|(name, value)| proto::LabelPair {
                            name: name.clone(),
                            value: value.clone(),
                        })
                        .collect(),
                    samples: vec![proto::RawSample {
                        raw_profile: p.raw_profile.clone(),
                        id: format!("{:x}-{i}", unique_id()),
                    }],
                })
                .collect(),
        };
        let request = Request::post(self.url.as_str(), request.encode_to_vec())
            .content_type("application/proto");
        // Any status comes back: the Connect error body says why, and which statuses are
        // worth retrying is the push protocol's business.
        let response = self.http.send(request).await?;
        if response.is_success() {
            return Ok(());
        }
        let message = error_message(&response.body);
        let status = response.status;
        if status == 429 || status == 408 || status >= 500 {
            let retry_after = response.retry_after().map(|d| d.min(MAX_RETRY_AFTER));
            Err(PushError::Retry {
                status,
                retry_after,
                message,
            })
        } else {
            Err(PushError::Rejected { status, message })
        }
    }
}

impl Client {
    /// Pushes `profiles`, retrying a retryable failure up to `retries` times with the
    /// [`Pusher`]'s backoff (exponential from `min_backoff` to `max_backoff`, with jitter, and
    /// at least the server's `Retry-After`). `on_retry` hears of each failure that will be
    /// retried, with the wait and the attempt number (for progress output).
    pub async fn push_with_retries(
        &self,
        profiles: &[PushProfile],
        retries: u32,
        mut on_retry: impl FnMut(&PushError, Duration, u32),
    ) -> Result<(), PushError> {
        let mut rng = unique_id() | 1;
        let mut attempt = 0;
        loop {
            match self.push(profiles).await {
                Ok(()) => return Ok(()),
                Err(e) if e.is_retryable() && attempt < retries => {
                    attempt += 1;
                    let retry_after = match &e {
                        PushError::Retry { retry_after, .. } => *retry_after,
                        _ => None,
                    };
                    let delay = backoff(
                        self.min_backoff,
                        self.max_backoff,
                        attempt,
                        retry_after,
                        &mut rng,
                    );
                    on_retry(&e, delay, attempt);
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// The `message` of a Connect JSON error body, else the body text (shortened).
fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    if let Some(start) = text.find("\"message\"") {
        let rest = &text[start + 9..];
        if let Some(q) = rest.find('"') {
            let mut out = String::new();
            let mut escaped = false;
            for c in rest[q + 1..].chars() {
                match (escaped, c) {
                    (false, '\\') => escaped = true,
                    (false, '"') => return out,
                    (_, c) => {
                        escaped = false;
                        out.push(c);
                    }
                }
            }
        }
    }
    let trimmed = text.trim();
    if trimmed.chars().count() > 300 {
        format!("{}...", trimmed.chars().take(300).collect::<String>())
    } else if trimmed.is_empty() {
        "(empty body)".into()
    } else {
        trimmed.to_string()
    }
}

fn unique_id() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    now ^ COUNTER
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Counters of a [`Pusher`], as of the call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushStats {
    /// Profiles handed to [`Pusher::enqueue`].
    pub enqueued_profiles: u64,
    /// Profiles the server acknowledged.
    pub sent_profiles: u64,
    /// pprof bytes the server acknowledged.
    pub sent_bytes: u64,
    /// Profiles dropped because the queue was full (oldest first).
    pub dropped_profiles: u64,
    /// Bytes dropped because the queue was full.
    pub dropped_bytes: u64,
    /// Profiles the server refused for good (4xx).
    pub rejected_profiles: u64,
    /// Failed push requests (any reason).
    pub upload_errors: u64,
    /// Push requests the server answered 429 (too many requests); retried no sooner than
    /// its `Retry-After`.
    pub throttled_requests: u64,
    /// Push requests answered with a `Retry-After` the next attempt waited for.
    pub retry_after_waits: u64,
    /// Profiles waiting (queued or in flight).
    pub queue_profiles: u64,
    /// Bytes waiting (queued or in flight).
    pub queue_bytes: u64,
    /// The latest error, cleared by the next success.
    pub last_error: Option<String>,
}

struct Queue {
    items: VecDeque<PushProfile>,
    bytes: usize,
    in_flight: usize,
    in_flight_bytes: usize,
}

struct Shared {
    queue: Mutex<Queue>,
    capacity: usize,
    wake: tokio::sync::Notify,
    flush: tokio::sync::Notify,
    flushing: AtomicBool,
    enqueued: AtomicU64,
    sent_profiles: AtomicU64,
    sent_bytes: AtomicU64,
    dropped_profiles: AtomicU64,
    dropped_bytes: AtomicU64,
    rejected: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
    retry_after_waits: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the oldest queued profiles until `extra` more bytes fit.
    fn make_room(&self, q: &mut Queue, extra: usize) {
        while q.bytes + q.in_flight_bytes + extra > self.capacity {
            let Some(old) = q.items.pop_front() else {
                break;
            };
            let size = old.size();
            q.bytes -= size;
            self.dropped_profiles.fetch_add(1, Ordering::Relaxed);
            self.dropped_bytes
                .fetch_add(old.raw_profile.len() as u64, Ordering::Relaxed);
        }
    }
}

/// A background sender: profiles go into a bounded queue and a tokio task pushes them.
///
/// Dropping the `Pusher` stops the task (queued profiles are lost; call [`Pusher::flush`] first).
pub struct Pusher {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
    client: Client,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("url", &self.client.url())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Pusher {
    /// Starts the sender task on the current tokio runtime. Fails only on a bad URL.
    pub fn start(config: PushConfig) -> Result<Pusher, HttpError> {
        let client = Client::new(&config)?;
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                bytes: 0,
                in_flight: 0,
                in_flight_bytes: 0,
            }),
            capacity: config.queue_bytes.max(1),
            wake: tokio::sync::Notify::new(),
            flush: tokio::sync::Notify::new(),
            flushing: AtomicBool::new(false),
            enqueued: AtomicU64::new(0),
            sent_profiles: AtomicU64::new(0),
            sent_bytes: AtomicU64::new(0),
            dropped_profiles: AtomicU64::new(0),
            dropped_bytes: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            retry_after_waits: AtomicU64::new(0),
            last_error: Mutex::new(None),
        });
        let task = tokio::spawn(send_loop(shared.clone(), client.clone(), config));
        Ok(Pusher {
            shared,
            task,
            client,
        })
    }

    /// The client's push URL.
    pub fn url(&self) -> &str {
        self.client.url()
    }

    /// Queues a profile; never blocks. When the queue is full the oldest profiles are dropped
    /// (counted in [`PushStats::dropped_profiles`]); a profile larger than the whole queue is
    /// dropped itself.
    pub fn enqueue(&self, profile: PushProfile) {
        let size = profile.size();
        self.shared.enqueued.fetch_add(1, Ordering::Relaxed);
        {
            let mut q = self.shared.lock();
            if size > self.shared.capacity {
                self.shared.dropped_profiles.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .dropped_bytes
                    .fetch_add(profile.raw_profile.len() as u64, Ordering::Relaxed);
                return;
            }
            self.shared.make_room(&mut q, size);
            q.bytes += size;
            q.items.push_back(profile);
        }
        self.shared.wake.notify_one();
    }

    /// Current counters.
    pub fn stats(&self) -> PushStats {
        let s = &self.shared;
        let (queue_profiles, queue_bytes) = {
            let q = s.lock();
            (
                (q.items.len() + q.in_flight) as u64,
                (q.bytes + q.in_flight_bytes) as u64,
            )
        };
        PushStats {
            enqueued_profiles: s.enqueued.load(Ordering::Relaxed),
            sent_profiles: s.sent_profiles.load(Ordering::Relaxed),
            sent_bytes: s.sent_bytes.load(Ordering::Relaxed),
            dropped_profiles: s.dropped_profiles.load(Ordering::Relaxed),
            dropped_bytes: s.dropped_bytes.load(Ordering::Relaxed),
            rejected_profiles: s.rejected.load(Ordering::Relaxed),
            upload_errors: s.errors.load(Ordering::Relaxed),
            throttled_requests: s.throttled.load(Ordering::Relaxed),
            retry_after_waits: s.retry_after_waits.load(Ordering::Relaxed),
            queue_profiles,
            queue_bytes,
            last_error: s
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    /// Sends everything queued now (skipping backoff waits) and waits until the queue is empty
    /// or `within` has passed. Returns whether the queue was drained.
    pub async fn flush(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        self.shared.flushing.store(true, Ordering::SeqCst);
        self.shared.flush.notify_one();
        self.shared.wake.notify_one();
        let drained = loop {
            {
                let q = self.shared.lock();
                if q.items.is_empty() && q.in_flight == 0 {
                    break true;
                }
            }
            if tokio::time::Instant::now() >= deadline {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        self.shared.flushing.store(false, Ordering::SeqCst);
        drained
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn send_loop(shared: Arc<Shared>, client: Client, config: PushConfig) {
    let mut failures: u32 = 0;
    let mut rng = unique_id() | 1;
    loop {
        let batch: Vec<PushProfile> = {
            let mut q = shared.lock();
            let mut batch = Vec::new();
            let mut bytes = 0;
            while let Some(front) = q.items.front() {
                let size = front.size();
                if !batch.is_empty() && bytes + size > config.max_batch_bytes {
                    break;
                }
                bytes += size;
                if let Some(item) = q.items.pop_front() {
                    batch.push(item);
                }
            }
            q.bytes -= bytes;
            q.in_flight = batch.len();
            q.in_flight_bytes = bytes;
            batch
        };
        if batch.is_empty() {
            shared.wake.notified().await;
            continue;
        }
        let result = client.push(&batch).await;
        let mut retry_after = None;
        {
            let mut q = shared.lock();
            let in_flight_bytes = q.in_flight_bytes;
            q.in_flight = 0;
            q.in_flight_bytes = 0;
            match &result {
                Ok(()) => {
                    shared
                        .sent_profiles
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    let bytes: usize = batch.iter().map(|p| p.raw_profile.len()).sum();
                    shared.sent_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
                }
                Err(e) if e.is_retryable() => {
                    // Back at the front, oldest first: they stay subject to drop-oldest.
                    for item in batch.into_iter().rev() {
                        q.items.push_front(item);
                    }
                    q.bytes += in_flight_bytes;
                    let over = q.bytes.saturating_sub(shared.capacity);
                    if over > 0 {
                        shared.make_room(&mut q, 0);
                    }
                    if let PushError::Retry {
                        status,
                        retry_after: after,
                        ..
                    } = e
                    {
                        if *status == 429 {
                            shared.throttled.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(d) = after {
                            shared.retry_after_waits.fetch_add(1, Ordering::Relaxed);
                            retry_after = Some(*d);
                        }
                    }
                }
                Err(_) => {
                    shared
                        .rejected
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                }
            }
        }
        let wait = {
            let mut last = shared.last_error.lock().unwrap_or_else(|p| p.into_inner());
            match result {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(url = client.url(), failures, "push recovered");
                    }
                    failures = 0;
                    *last = None;
                    None
                }
                Err(e) => {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                    let text = e.to_string();
                    // Once per distinct error, not once per retry of a server that stays away.
                    if failures == 0 || last.as_deref() != Some(text.as_str()) {
                        tracing::warn!(
                            url = client.url(),
                            retryable = e.is_retryable(),
                            error = %text,
                            "push failed"
                        );
                    }
                    *last = Some(text);
                    e.is_retryable().then(|| {
                        failures = failures.saturating_add(1);
                        backoff(
                            config.min_backoff,
                            config.max_backoff,
                            failures,
                            retry_after,
                            &mut rng,
                        )
                    })
                }
            }
        };
        if let Some(delay) = wait {
            if !shared.flushing.load(Ordering::SeqCst) {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shared.flush.notified() => {}
                }
            } else {
                // Flushing at shutdown: retry promptly but do not spin.
                tokio::time::sleep(delay.min(Duration::from_millis(200))).await;
            }
        }
    }
}

/// Exponential backoff with "equal jitter" (half fixed, half random), at least `Retry-After`.
fn backoff(
    min_backoff: Duration,
    max_backoff: Duration,
    failures: u32,
    retry_after: Option<Duration>,
    rng: &mut u64,
) -> Duration {
    let exp = min_backoff
        .saturating_mul(1u32 << failures.saturating_sub(1).min(20))
        .min(max_backoff);
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let fraction = (*rng >> 11) as f64 / (1u64 << 53) as f64;
    let jittered = exp.mul_f64(0.5 + 0.5 * fraction);
    match retry_after {
        Some(r) => jittered.max(r),
        None => jittered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_honours_retry_after() {
        let config = PushConfig::default();
        let mut rng = 12345;
        let d1 = backoff(config.min_backoff, config.max_backoff, 1, None, &mut rng);
        assert!(
            d1 >= Duration::from_millis(250) && d1 <= Duration::from_millis(500),
            "{d1:?}"
        );
        let d4 = backoff(config.min_backoff, config.max_backoff, 4, None, &mut rng);
        assert!(
            d4 >= Duration::from_secs(2) && d4 <= Duration::from_secs(4),
            "{d4:?}"
        );
        let d30 = backoff(config.min_backoff, config.max_backoff, 30, None, &mut rng);
        assert!(
            d30 <= config.max_backoff && d30 >= config.max_backoff / 2,
            "{d30:?}"
        );
        let r = backoff(
            config.min_backoff,
            config.max_backoff,
            1,
            Some(Duration::from_secs(7)),
            &mut rng,
        );
        assert_eq!(r, Duration::from_secs(7));
    }

    #[test]
    fn connect_error_messages_are_extracted() {
        assert_eq!(
            error_message(br#"{"code":"invalid_argument","message":"bad \"pprof\""}"#),
            "bad \"pprof\""
        );
        assert_eq!(error_message(b"  plain  "), "plain");
        assert_eq!(error_message(b""), "(empty body)");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn full_queue_drops_the_oldest_and_never_blocks() {
        // Port 1 on loopback refuses connections: everything stays queued.
        let config = PushConfig {
            url: "http://127.0.0.1:1".into(),
            queue_bytes: 10_000,
            min_backoff: Duration::from_secs(60),
            ..PushConfig::default()
        };
        let pusher = Pusher::start(config).unwrap();
        let profile = |i: u8| PushProfile {
            labels: vec![("i".into(), i.to_string())],
            raw_profile: vec![i; 1000],
        };
        let each = profile(0).size();
        for i in 0..30 {
            pusher.enqueue(profile(i));
        }
        let stats = pusher.stats();
        assert_eq!(stats.enqueued_profiles, 30);
        assert!(stats.queue_bytes <= 10_000, "{stats:?}");
        assert_eq!(stats.queue_profiles as usize, 10_000 / each);
        assert_eq!(stats.dropped_profiles, 30 - stats.queue_profiles);
        // Too big for the queue at all: dropped itself.
        pusher.enqueue(PushProfile {
            labels: vec![],
            raw_profile: vec![0; 20_000],
        });
        assert_eq!(pusher.stats().dropped_profiles, 31 - stats.queue_profiles);
        assert!(!pusher.flush(Duration::from_millis(100)).await);
        let stats = pusher.stats();
        assert!(stats.upload_errors >= 1, "{stats:?}");
        assert!(stats.last_error.unwrap().contains("127.0.0.1:1"));
        // The newest survived, the oldest went.
        let q = pusher.shared.lock();
        let newest = q.items.back().map(|p| p.raw_profile[0]);
        drop(q);
        assert!(newest == Some(29) || pusher.shared.lock().in_flight > 0);
    }
}
