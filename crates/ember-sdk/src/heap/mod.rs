//! Heap profiles with any allocator: the sampling [`SamplingAllocator`] wrapper, the table of
//! sampled allocations, and the pprof profile built from it (`alloc_objects`, `alloc_space`,
//! `inuse_objects`, `inuse_space`, the sample types of Go's heap profiles, `inuse_space`
//! shown by default).
//!
//! Sampling: each thread counts down the bytes it allocates to the next sample point, drawn
//! from an exponential distribution with mean `rate` (2 MiB by default): a Poisson process
//! over allocated bytes. An allocation of `s` bytes is thus sampled with probability
//! `p = 1 - exp(-s/rate)` and counted as `1/p` objects and `s/p` bytes, which makes every
//! total an unbiased estimate (tcmalloc's and Go's scheme). A sampled allocation's stack is
//! the frame-pointer walk of the allocating thread (inside its own stack bounds), and its
//! labels are the thread's [`crate::Labels`] scopes at that moment.
//!
//! The bookkeeping of a sampled allocation allocates itself; a thread-local guard keeps it
//! from being sampled or from re-entering the table's lock.
//!
//! With the `jemalloc` cargo feature, `jemalloc` is the alternative source: jemalloc's own
//! sampling (`prof:true,lg_prof_sample:21`), read through `prof.dump` and turned into the
//! same four sample types; it takes over whenever jemalloc's profiling is on.

mod alloc;
#[cfg(feature = "jemalloc")]
pub mod jemalloc;

pub use alloc::SamplingAllocator;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use ember_pprof::{Profile, ProfileBuilder, SampleLabel};

use crate::{labels, signal, symbols};

/// Mean bytes between two samples by default (2 MiB, like Go's and jemalloc's `lg_prof_sample:21`).
pub const DEFAULT_SAMPLE_BYTES: usize = 2 << 20;
/// Deepest allocation stack recorded.
const MAX_HEAP_FRAMES: usize = 64;

/// Set by the first allocation through a [`SamplingAllocator`].
static ENABLED: AtomicBool = AtomicBool::new(false);
static RATE: AtomicUsize = AtomicUsize::new(DEFAULT_SAMPLE_BYTES);

/// A bitmap over hashes of live sampled addresses: a clear bit means "not sampled" without
/// a lock. 64 K bits, 8 KiB: small enough to stay in the L1 cache of a thread that frees a
/// lot. Bits change only under the state lock, with the per-hash counts in [`HeapState`].
const FILTER_BITS: u32 = 16;
static FILTER: [AtomicU64; 1 << (FILTER_BITS - 6)] =
    [const { AtomicU64::new(0) }; 1 << (FILTER_BITS - 6)];

#[inline(always)]
fn filter_hash(ptr: usize) -> usize {
    ((ptr as u64 >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - FILTER_BITS)) as usize
}

#[inline(always)]
fn filter_hit(ptr: usize) -> bool {
    let h = filter_hash(ptr);
    FILTER[h >> 6].load(Ordering::Relaxed) & (1 << (h & 63)) != 0
}

struct HeapThread {
    /// Bytes left before the next sample point.
    left: Cell<i64>,
    started: Cell<bool>,
    rng: Cell<u64>,
    /// Inside the sampler's own bookkeeping.
    busy: Cell<bool>,
    /// This thread's stack bounds (`hi == 1`: unknown).
    lo: Cell<usize>,
    hi: Cell<usize>,
}

thread_local! {
    static THREAD: HeapThread = const {
        HeapThread {
            left: Cell::new(0),
            started: Cell::new(false),
            rng: Cell::new(0),
            busy: Cell::new(false),
            lo: Cell::new(0),
            hi: Cell::new(0),
        }
    };
}

/// An allocation stack (return addresses minus one) and its encoded labels.
type SiteKey = (Box<[u64]>, Box<[u8]>);

/// One distinct allocation stack (and label set).
struct Site {
    frames: Box<[u64]>,
    labels: Box<[u8]>,
    alloc_objects: f64,
    alloc_bytes: f64,
    inuse_objects: f64,
    inuse_bytes: f64,
}

struct Live {
    site: usize,
    weight: f64,
    size: usize,
}

#[derive(Default)]
struct HeapState {
    sites: Vec<Site>,
    index: HashMap<SiteKey, usize>,
    live: HashMap<usize, Live>,
    /// Live sampled addresses per filter hash (the bit is set while the count is not 0).
    counts: Vec<u16>,
}

impl HeapState {
    fn filter_add(&mut self, ptr: usize) {
        let h = filter_hash(ptr);
        if self.counts.is_empty() {
            self.counts = vec![0; 1 << FILTER_BITS];
        }
        self.counts[h] = self.counts[h].saturating_add(1);
        FILTER[h >> 6].fetch_or(1 << (h & 63), Ordering::Relaxed);
    }

    fn filter_remove(&mut self, ptr: usize) {
        let h = filter_hash(ptr);
        if let Some(c) = self.counts.get_mut(h) {
            // A saturated count stays set: a few extra lock round trips, never a miss.
            if *c != u16::MAX {
                *c -= 1;
            }
            if *c == 0 {
                FILTER[h >> 6].fetch_and(!(1 << (h & 63)), Ordering::Relaxed);
            }
        }
    }
}

static STATE: Mutex<Option<HeapState>> = Mutex::new(None);

fn lock_state() -> std::sync::MutexGuard<'static, Option<HeapState>> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

fn next_random(t: &HeapThread) -> u64 {
    let mut x = t.rng.get();
    if x == 0 {
        let seed = t as *const HeapThread as u64
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x2545_f491_4f6c_dd1d);
        x = seed | 1;
    }
    // xorshift64*
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t.rng.set(x);
    x.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Bytes to the next sample point: exponential with mean `rate`.
fn draw(t: &HeapThread, rate: usize) -> i64 {
    // Uniform in (0, 1]: never ln(0).
    let u = ((next_random(t) >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    ((-u.ln()) * rate as f64).ceil().max(1.0) as i64
}

/// After every allocation: the cheap countdown, and a sample when it crosses a point.
#[inline(always)]
pub(crate) fn on_alloc(ptr: usize, size: usize, rate: usize) {
    let _ = THREAD.try_with(|t| {
        let left = t.left.get() - size as i64;
        if left > 0 && t.started.get() {
            t.left.set(left);
            return;
        }
        if t.busy.get() {
            t.left.set(left);
            return;
        }
        sample_slow(t, ptr, size, rate);
    });
}

#[cold]
#[inline(never)]
fn sample_slow(t: &HeapThread, ptr: usize, size: usize, rate: usize) {
    t.busy.set(true);
    if !t.started.get() {
        // First allocation of the thread: place its first sample point, then decide.
        t.started.set(true);
        let left = draw(t, rate) - size as i64;
        if left > 0 {
            t.left.set(left);
            t.busy.set(false);
            return;
        }
    }
    if !ENABLED.load(Ordering::Relaxed) {
        ENABLED.store(true, Ordering::Relaxed);
    }
    RATE.store(rate, Ordering::Relaxed);
    if t.hi.get() == 0 {
        let (lo, hi) = signal::own_stack_bounds().unwrap_or((0, 1));
        t.lo.set(lo);
        t.hi.set(hi);
    }
    let mut frames = [0u64; MAX_HEAP_FRAMES];
    let fp = signal::frame_pointer();
    let sp = &frames as *const _ as usize;
    let depth = signal::walk(fp, sp.max(t.lo.get()), t.hi.get(), &mut frames);
    let mut label_bytes = Vec::new();
    signal::current_labels(&mut label_bytes);
    let p = 1.0 - (-(size as f64) / rate as f64).exp();
    let weight = if p > 0.0 { 1.0 / p } else { 1.0 };
    // Return addresses: the call is the instruction before.
    let key: Box<[u64]> = frames[..depth].iter().map(|a| a - 1).collect();
    {
        let mut guard = lock_state();
        let state = guard.get_or_insert_with(HeapState::default);
        let key = (key, label_bytes.into_boxed_slice());
        let site = match state.index.get(&key) {
            Some(&i) => i,
            None => {
                let i = state.sites.len();
                state.sites.push(Site {
                    frames: key.0.clone(),
                    labels: key.1.clone(),
                    alloc_objects: 0.0,
                    alloc_bytes: 0.0,
                    inuse_objects: 0.0,
                    inuse_bytes: 0.0,
                });
                state.index.insert(key, i);
                i
            }
        };
        let s = &mut state.sites[site];
        s.alloc_objects += weight;
        s.alloc_bytes += weight * size as f64;
        s.inuse_objects += weight;
        s.inuse_bytes += weight * size as f64;
        if state
            .live
            .insert(ptr, Live { site, weight, size })
            .is_none()
        {
            state.filter_add(ptr);
        }
    }
    t.left.set(draw(t, rate));
    t.busy.set(false);
}

/// Before every free: one load from the bitmap unless the address may be a live sampled one.
#[inline(always)]
pub(crate) fn on_free(ptr: usize) {
    if filter_hit(ptr) {
        free_slow(ptr);
    }
}

/// A free whose address may be a live sampled allocation (kept out of line: the fast path
/// above stays a load and a bit test in the caller).
#[cold]
#[inline(never)]
fn free_slow(ptr: usize) {
    let _ = THREAD.try_with(|t| {
        // Our own table's buffers are never sampled, and the lock may be held right here.
        if t.busy.get() {
            return;
        }
        t.busy.set(true);
        {
            let mut guard = lock_state();
            if let Some(state) = guard.as_mut()
                && let Some(l) = state.live.remove(&ptr)
            {
                state.filter_remove(ptr);
                let s = &mut state.sites[l.site];
                s.inuse_objects -= l.weight;
                s.inuse_bytes -= l.weight * l.size as f64;
            }
        }
        t.busy.set(false);
    });
}

/// Names of the sampler's own frames and the allocator plumbing above a sampled allocation,
/// cut from the leaf end of heap stacks.
fn is_plumbing(name: &str) -> bool {
    let name = name.trim_start_matches('<');
    name.starts_with("ember_sdk::heap")
        || name.starts_with("ember_sdk::signal")
        || name.starts_with("__rust_")
        || name.starts_with("__rg_")
        || name.starts_with("__rdl_")
        || name.starts_with("alloc::alloc::")
        || name.starts_with("std::alloc::")
}

/// Frames of jemalloc itself and of tikv-jemallocator's wrapper: everything leafward of the
/// last of them in a jemalloc stack is jemalloc's own code (its C statics, such as
/// `prof_alloc_prep` inlined into `_rjem_je_malloc_default`, have other names).
#[cfg(feature = "jemalloc")]
fn is_jemalloc(r: &symbols::Resolved) -> bool {
    [&r.leaf_name, &r.function_name].into_iter().any(|name| {
        name.starts_with("_rjem_") || name.trim_start_matches('<').starts_with("tikv_jemalloc")
    })
}

/// Whether heap profiling is on: jemalloc's sampling (with the `jemalloc` feature) or a
/// [`SamplingAllocator`] as the global allocator that has sampled at least once.
pub fn heap_profiling_enabled() -> bool {
    #[cfg(feature = "jemalloc")]
    if jemalloc::profiling_active() {
        return true;
    }
    ENABLED.load(Ordering::Relaxed)
}

/// The heap profile now, or `None` when heap profiling is off. With the `jemalloc` feature
/// and jemalloc's profiling on (`prof:true`), the profile is jemalloc's own
/// (`jemalloc::jemalloc_profile`); otherwise the [`SamplingAllocator`]'s.
pub fn heap_profile() -> Option<Profile> {
    #[cfg(feature = "jemalloc")]
    if jemalloc::profiling_active() {
        return match jemalloc::jemalloc_profile() {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!(error = %e, "jemalloc heap profile");
                None
            }
        };
    }
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    // Copy the table out first: symbolization allocates, and must not hold the lock the
    // allocator's slow path takes.
    let sites: Vec<(SiteKey, [f64; 4])> = THREAD
        .try_with(|t| {
            t.busy.set(true);
            let copy = lock_state()
                .as_ref()
                .map(|s| {
                    s.sites
                        .iter()
                        .map(|x| {
                            let v = [
                                x.alloc_objects,
                                x.alloc_bytes,
                                x.inuse_objects,
                                x.inuse_bytes,
                            ];
                            ((x.frames.clone(), x.labels.clone()), v)
                        })
                        .collect()
                })
                .unwrap_or_default();
            t.busy.set(false);
            copy
        })
        .unwrap_or_default();
    Some(build_profile(&sites, RATE.load(Ordering::Relaxed)))
}

/// The pprof heap profile of `sites` (stacks of adjusted addresses, encoded labels, and
/// estimated `[alloc_objects, alloc_space, inuse_objects, inuse_space]`), sampled every
/// `rate` bytes on average, symbolized in-process. Shared by both heap sources.
pub(crate) fn build_profile(sites: &[(SiteKey, [f64; 4])], rate: usize) -> Profile {
    let mut b = ProfileBuilder::new(&[
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
        ("inuse_objects", "count"),
        ("inuse_space", "bytes"),
    ]);
    b.set_period(("space", "bytes"), rate as i64);
    b.set_default_sample_type("inuse_space");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    b.set_time(now, 0);
    let mut addrs: Vec<u64> = sites.iter().flat_map(|s| s.0.0.iter().copied()).collect();
    addrs.sort_unstable();
    addrs.dedup();
    let resolved = symbols::resolve(&mut b, &addrs);
    let mut decoded = Vec::new();
    let mut ids = Vec::new();
    for ((frames, label_bytes), v) in sites {
        let locs: Vec<&symbols::Resolved> = frames.iter().filter_map(|a| resolved.get(a)).collect();
        #[cfg(feature = "jemalloc")]
        let inside = locs
            .iter()
            .rposition(|r| is_jemalloc(r))
            .map_or(0, |i| i + 1);
        #[cfg(not(feature = "jemalloc"))]
        let inside = 0;
        let skip = inside
            + locs[inside..]
                .iter()
                .take_while(|r| is_plumbing(&r.leaf_name))
                .count();
        ids.clear();
        ids.extend(locs[skip..].iter().map(|r| r.location));
        labels::decode(label_bytes, &mut decoded);
        let labels: Vec<SampleLabel<'_>> = decoded
            .iter()
            .map(|(k, v)| SampleLabel::Str(k, v))
            .collect();
        let values = v.map(|x| x.round() as i64);
        b.add_sample(&ids, &values, &labels);
    }
    let mut profile = b.build();
    symbols::mark_symbolized(&mut profile);
    profile
}

/// The message of `/profile/heap` when heap profiling is off.
pub const HEAP_DISABLED: &str = "heap profiling is off: make ember_sdk::SamplingAllocator the global allocator \
(#[global_allocator] static ALLOC: ember_sdk::SamplingAllocator = ember_sdk::SamplingAllocator::system();) \
and rebuild; it samples one allocation per 2 MiB on average";
