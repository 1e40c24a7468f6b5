//! The CPU profiler: one sampling engine for the process, shared by every profile being
//! recorded at the same time (an ad hoc `/profile/cpu` request and push mode's continuous
//! profiles), and the profiles built from it.
//!
//! The engine arms `ITIMER_PROF` at the highest frequency any recorder asked for
//! (the `signal` module explains the timer and the handler). A collector thread drains the
//! handler's ring every 20 ms and adds each sample to every active recorder, with the period
//! the sample was taken at as its CPU time: a recorder that asked for 19 Hz while another
//! asked for 99 Hz gets more samples, and still the right total. Samples are aggregated by
//! raw addresses and labels; symbolization waits until a profile is built.
//!
//! Only one ad hoc profile runs at a time ([`AdHoc`]): a second request is refused, or, when
//! forced, cancels the first.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use ember_pprof::{Profile, ProfileBuilder, SampleLabel};

use crate::signal::{self, RawSample};
use crate::{SdkError, labels, symbols};

/// How often the collector drains the ring.
const DRAIN_EVERY: Duration = Duration::from_millis(20);
/// How long the collector sleeps between checks while nothing is recorded.
const IDLE_SLEEP: Duration = Duration::from_millis(200);
/// How long a replaced table of stack ranges stays alive for handlers still reading it.
const RANGES_GRACE: Duration = Duration::from_secs(2);
/// How often the stack ranges are re-read even when no handler asked for it.
const RANGES_REFRESH: Duration = Duration::from_secs(5);

/// A stack (leaf first, adjusted addresses) and its sorted labels.
type SampleKey = (Box<[u64]>, Box<[(String, String)]>);
/// Stacks and labels to (samples, CPU nanoseconds).
type Counts = HashMap<SampleKey, (i64, i64)>;

/// What one recorder collected so far.
#[derive(Debug, Default)]
struct Recorded {
    counts: Counts,
    samples: u64,
}

struct Recorder {
    id: u64,
    frequency: u32,
    data: Arc<Mutex<Recorded>>,
}

#[derive(Default)]
struct Engine {
    recorders: Vec<Recorder>,
    next_id: u64,
    collector_started: bool,
    hz: u32,
}

fn engine() -> &'static Mutex<Engine> {
    static ENGINE: OnceLock<Mutex<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| Mutex::new(Engine::default()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A CPU profile being recorded; [`CpuRecording::finish`] stops it and builds the profile.
/// Dropping it stops it too.
#[derive(Debug)]
pub struct CpuRecording {
    id: u64,
    data: Arc<Mutex<Recorded>>,
    started: Instant,
    started_at: SystemTime,
    frequency: u32,
}

impl CpuRecording {
    /// Starts recording at `frequency` Hz (1..=1000). Other recordings may run at the same
    /// time (the timer runs at the highest frequency asked for).
    pub fn start(frequency: u32) -> Result<CpuRecording, SdkError> {
        if !(1..=crate::MAX_FREQUENCY).contains(&frequency) {
            return Err(SdkError::BadParameter(format!(
                "frequency must be 1..={} Hz, got {frequency}",
                crate::MAX_FREQUENCY
            )));
        }
        signal::install().map_err(SdkError::Signal)?;
        let data = Arc::new(Mutex::new(Recorded::default()));
        let mut e = lock(engine());
        e.next_id += 1;
        let id = e.next_id;
        e.recorders.push(Recorder {
            id,
            frequency,
            data: data.clone(),
        });
        if !e.collector_started {
            refresh_ranges();
            std::thread::Builder::new()
                .name("ember-sdk-cpu".into())
                .spawn(collector)
                .map_err(SdkError::Signal)?;
            e.collector_started = true;
        }
        retune(&mut e)?;
        Ok(CpuRecording {
            id,
            data,
            started: Instant::now(),
            started_at: SystemTime::now(),
            frequency,
        })
    }

    /// Samples recorded so far (for tests and logs).
    pub fn samples(&self) -> u64 {
        lock(&self.data).samples
    }

    /// Stops recording and builds the pprof profile (`samples/count`, `cpu/nanoseconds`),
    /// symbolized, with a `thread_name` label and the labels of [`crate::labels`] scopes.
    pub fn finish(self) -> Profile {
        self.stop();
        // The handler may have published samples since the collector's last pass.
        drain_once();
        let recorded = std::mem::take(&mut *lock(&self.data));
        build_profile(
            recorded.counts,
            self.started_at,
            self.started.elapsed(),
            self.frequency,
        )
    }

    /// Builds a profile of what was recorded since the last cut and keeps recording (push
    /// mode's continuous profiles).
    pub fn cut(&mut self) -> Profile {
        drain_once();
        let recorded = std::mem::take(&mut *lock(&self.data));
        let profile = build_profile(
            recorded.counts,
            self.started_at,
            self.started.elapsed(),
            self.frequency,
        );
        self.started = Instant::now();
        self.started_at = SystemTime::now();
        profile
    }

    fn stop(&self) {
        let mut e = lock(engine());
        e.recorders.retain(|r| r.id != self.id);
        if let Err(err) = retune(&mut e) {
            tracing::warn!("ember-sdk: cannot re-arm the profiling timer: {err}");
        }
    }
}

impl Drop for CpuRecording {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Arms the timer at the highest frequency any recorder wants (or disarms it).
fn retune(e: &mut Engine) -> Result<(), SdkError> {
    let hz = e.recorders.iter().map(|r| r.frequency).max().unwrap_or(0);
    if hz != e.hz {
        signal::set_frequency(hz).map_err(SdkError::Signal)?;
        e.hz = hz;
    }
    Ok(())
}

/// Replaced tables of stack ranges, kept [`RANGES_GRACE`] for handlers still reading them.
static RETIRED: Mutex<Vec<(Instant, Box<signal::StackRanges>)>> = Mutex::new(Vec::new());

fn refresh_ranges() {
    let ranges = signal::StackRanges {
        ranges: symbols::stack_ranges(),
    };
    let old = signal::publish_ranges(ranges);
    let mut retired = lock(&RETIRED);
    if let Some(old) = old {
        retired.push((Instant::now(), old));
    }
    retired.retain(|(at, _)| at.elapsed() < RANGES_GRACE);
}

/// The collector thread: drains the ring, keeps the stack ranges fresh.
fn collector() {
    let mut last_refresh = Instant::now();
    loop {
        std::thread::sleep(DRAIN_EVERY);
        if lock(engine()).recorders.is_empty() {
            // Nothing is recorded: no samples to drain, no ranges to keep fresh.
            std::thread::sleep(IDLE_SLEEP);
            continue;
        }
        if signal::ranges_stale() || last_refresh.elapsed() > RANGES_REFRESH {
            refresh_ranges();
            last_refresh = Instant::now();
        }
        drain_once();
    }
}

/// Moves the ring's samples into every active recorder.
fn drain_once() {
    let targets: Vec<Arc<Mutex<Recorded>>> = lock(engine())
        .recorders
        .iter()
        .map(|r| r.data.clone())
        .collect();
    let mut decoded = Vec::new();
    let mut batch: Vec<(SampleKey, i64)> = Vec::new();
    signal::drain(|s: &RawSample| {
        labels::decode(&s.labels[..s.label_len as usize], &mut decoded);
        let name_len = s.name.iter().position(|&b| b == 0).unwrap_or(16);
        let name = String::from_utf8_lossy(&s.name[..name_len]);
        if !name.is_empty() {
            decoded.push(("thread_name".into(), name.into_owned()));
        }
        decoded.sort();
        let depth = (s.depth as usize).min(signal::MAX_FRAMES);
        let frames: Box<[u64]> = s.frames[..depth]
            .iter()
            .enumerate()
            // Callers' frames are return addresses: the call is the instruction before.
            .map(|(i, &a)| if i == 0 { a } else { a.saturating_sub(1) })
            .collect();
        batch.push(((frames, decoded.clone().into()), s.period_ns as i64));
    });
    if batch.is_empty() {
        return;
    }
    for t in &targets {
        let mut r = lock(t);
        for (key, ns) in &batch {
            let e = r.counts.entry(key.clone()).or_default();
            e.0 += 1;
            e.1 += ns;
            r.samples += 1;
        }
    }
}

/// Builds the pprof profile of aggregated samples.
fn build_profile(counts: Counts, start: SystemTime, duration: Duration, hz: u32) -> Profile {
    let mut b = ProfileBuilder::new(&[("samples", "count"), ("cpu", "nanoseconds")]);
    b.set_period(("cpu", "nanoseconds"), 1_000_000_000 / i64::from(hz.max(1)));
    let start_ns = start
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    b.set_time(start_ns, duration.as_nanos() as i64);
    b.set_default_sample_type("cpu");
    let mut addrs: Vec<u64> = counts.keys().flat_map(|(f, _)| f.iter().copied()).collect();
    addrs.sort_unstable();
    addrs.dedup();
    let resolved = symbols::resolve(&mut b, &addrs);
    let mut ids = Vec::new();
    for ((frames, labels), (n, ns)) in &counts {
        ids.clear();
        ids.extend(
            frames
                .iter()
                .filter_map(|a| resolved.get(a))
                .map(|r| r.location),
        );
        let labels: Vec<SampleLabel<'_>> =
            labels.iter().map(|(k, v)| SampleLabel::Str(k, v)).collect();
        b.add_sample(&ids, &[*n, *ns], &labels);
    }
    let mut profile = b.build();
    symbols::mark_symbolized(&mut profile);
    profile
}

/// Counters of the handler, for tests and `/metrics`-style reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuStats {
    /// `SIGPROF` signals handled while recording.
    pub signals: u64,
    /// Samples dropped because the ring was full.
    pub dropped_ring_full: u64,
    /// Samples with only the leaf frame because the stack was not in the known ranges yet.
    pub leaf_only: u64,
    /// Label scopes left out of samples (too many bytes or too deeply nested).
    pub labels_left_out: u64,
}

/// The handler's counters since the process started.
pub fn cpu_stats() -> CpuStats {
    CpuStats {
        signals: signal::SIGNALS.load(Ordering::Relaxed),
        dropped_ring_full: signal::DROPPED_FULL.load(Ordering::Relaxed),
        leaf_only: signal::NO_STACK_RANGE.load(Ordering::Relaxed),
        labels_left_out: signal::TRUNCATED_LABELS.load(Ordering::Relaxed),
    }
}

/// The one ad hoc CPU profile allowed at a time.
#[derive(Debug, Default)]
pub struct AdHoc {
    running: Mutex<Option<(u64, Arc<tokio::sync::Notify>)>>,
    next: std::sync::atomic::AtomicU64,
}

/// Why an ad hoc profile did not complete.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AdHocError {
    /// Another ad hoc profile is running and `force` was not set.
    #[error(
        "a CPU profile is already being recorded; wait for it, or add force=true to cancel it and start anew"
    )]
    Busy,
    /// A forced request cancelled this one.
    #[error("this CPU profile was cancelled by a newer request with force=true")]
    Cancelled,
    /// The profiler could not start.
    #[error("{0}")]
    Start(String),
}

impl AdHoc {
    /// Records a profile for `seconds` at `frequency` Hz, unless another one runs (then
    /// [`AdHocError::Busy`], or with `force` the other one is cancelled).
    pub async fn profile(
        &self,
        seconds: Duration,
        frequency: u32,
        force: bool,
    ) -> Result<Profile, AdHocError> {
        let me = self.next.fetch_add(1, Ordering::Relaxed);
        let cancel = Arc::new(tokio::sync::Notify::new());
        {
            let mut running = lock(&self.running);
            if let Some((_, other)) = running.as_ref() {
                if !force {
                    return Err(AdHocError::Busy);
                }
                other.notify_one();
            }
            *running = Some((me, cancel.clone()));
        }
        // Clears the slot however this ends, including a client that hung up (future dropped).
        let _release = Release { adhoc: self, me };
        async {
            let rec =
                CpuRecording::start(frequency).map_err(|e| AdHocError::Start(e.to_string()))?;
            tokio::select! {
                _ = tokio::time::sleep(seconds) => {}
                _ = cancel.notified() => return Err(AdHocError::Cancelled),
            }
            tokio::task::spawn_blocking(move || rec.finish())
                .await
                .map_err(|e| AdHocError::Start(e.to_string()))
        }
        .await
    }
}

struct Release<'a> {
    adhoc: &'a AdHoc,
    me: u64,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        let mut running = lock(&self.adhoc.running);
        if running.as_ref().is_some_and(|(id, _)| *id == self.me) {
            *running = None;
        }
    }
}
