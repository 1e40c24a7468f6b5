//! Everything that runs inside the `SIGPROF` handler, and the little that must be `unsafe`
//! to make it possible: installing the handler, arming the timer, the pre-allocated sample
//! ring, the validated frame-pointer walk, and the per-thread state the handler reads.
//!
//! # Timer: `ITIMER_PROF`
//!
//! One process-wide `setitimer(ITIMER_PROF)`, not a per-thread `timer_create`. The kernel
//! counts the CPU time of every thread of the process and sends `SIGPROF` to the thread that
//! was running when a period elapsed, so every thread is covered, including ones started by
//! libraries the SDK never sees, without enumerating `/proc/self/task` and creating (and
//! leaking, when threads exit) one timer per thread. The known cost: the kernel checks the
//! timer on its tick, so on a host with many busy cores the total rate is capped near
//! `CONFIG_HZ` signals per second (Go's issue 35057, why Go moved to per-thread timers).
//! At the default 99 Hz (19 Hz in push mode) that caps a profile at about 2–10 busy cores;
//! each sample carries the period it stands for, so totals stay right below that cap.
//!
//! # What the handler does (async-signal-safe)
//!
//! No allocation, no locks, no `backtrace`, no panics: it reads the interrupted registers from
//! the `ucontext`, claims a free slot of a ring allocated before the timer was armed (a CAS on
//! the slot's state; a full ring drops the sample and counts it), walks frame pointers, copies
//! the thread's cached id and name and the current labels (thread-locals with constant
//! initialisers and no destructor: plain TLS reads) and publishes the slot with a release
//! store. Every memory read of the walk is validated first ([`walk`]): inside a readable
//! anonymous mapping that contains the interrupted stack pointer (a table built from
//! `/proc/self/maps` outside the handler), 8-byte aligned, each frame strictly above the
//! previous one. A bad frame pointer ends the walk; it never faults. Symbolization happens
//! later, in the collector ([`crate::symbols`]).
//!
//! Everything `unsafe` in the crate is in this module and in `heap::alloc`.

#![allow(unsafe_code)]

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Deepest stack recorded; deeper stacks are cut at the root side and counted.
pub(crate) const MAX_FRAMES: usize = 128;
/// Bytes of labels copied per sample (whole label scopes only; the rest is counted).
pub(crate) const LABEL_BYTES: usize = 256;
/// Samples the ring holds between two drains by the collector (every 20 ms).
const SLOTS: usize = 1024;
/// Nested label scopes a thread can have at once (deeper ones are ignored and counted).
pub(crate) const LABEL_DEPTH: usize = 16;

const EMPTY: u32 = 0;
const WRITING: u32 = 1;
const FULL: u32 = 2;
const READING: u32 = 3;

/// One captured sample as written by the handler.
#[derive(Clone, Copy)]
pub(crate) struct RawSample {
    pub(crate) tid: u32,
    pub(crate) depth: u32,
    pub(crate) label_len: u32,
    pub(crate) period_ns: u64,
    pub(crate) name: [u8; 16],
    pub(crate) labels: [u8; LABEL_BYTES],
    /// Leaf first: the interrupted PC, then return addresses.
    pub(crate) frames: [u64; MAX_FRAMES],
}

impl RawSample {
    /// A sample with every field zero: what the ring's slots and the collector's buffer
    /// start as.
    pub(crate) const EMPTY: RawSample = RawSample {
        tid: 0,
        depth: 0,
        label_len: 0,
        period_ns: 0,
        name: [0; 16],
        labels: [0; LABEL_BYTES],
        frames: [0; MAX_FRAMES],
    };
}

struct Slot {
    state: AtomicU32,
    sample: UnsafeCell<RawSample>,
}

/// The pre-allocated sample ring shared by the handler (many writers) and the collector.
struct Ring {
    slots: Box<[Slot]>,
    next: AtomicUsize,
}

// SAFETY: a slot's `sample` is written only by the one writer that moved its state
// EMPTY→WRITING and read only by the one reader that moved it FULL→READING (acquire), so no
// two threads touch the same sample at once.
unsafe impl Sync for Ring {}

static RING: AtomicPtr<Ring> = AtomicPtr::new(std::ptr::null_mut());
static ACTIVE: AtomicBool = AtomicBool::new(false);
static PERIOD_NS: AtomicU64 = AtomicU64::new(0);
static RANGES: AtomicPtr<StackRanges> = AtomicPtr::new(std::ptr::null_mut());
static RANGES_STALE: AtomicBool = AtomicBool::new(true);

/// Counters of what the handler could not record.
pub(crate) static DROPPED_FULL: AtomicU64 = AtomicU64::new(0);
pub(crate) static NO_STACK_RANGE: AtomicU64 = AtomicU64::new(0);
pub(crate) static TRUNCATED_LABELS: AtomicU64 = AtomicU64::new(0);
pub(crate) static SIGNALS: AtomicU64 = AtomicU64::new(0);

/// Readable ranges that can hold a thread stack (private, writable, anonymous mappings and
/// `[stack]`), sorted by start.
#[derive(Debug, Default)]
pub(crate) struct StackRanges {
    pub(crate) ranges: Vec<(usize, usize)>,
}

impl StackRanges {
    /// The range containing `addr`.
    pub(crate) fn find(&self, addr: usize) -> Option<(usize, usize)> {
        let i = self.ranges.partition_point(|&(start, _)| start <= addr);
        let (start, end) = *self.ranges.get(i.checked_sub(1)?)?;
        (addr < end).then_some((start, end))
    }
}

/// Per-thread state the handler reads: its id and name (cached at its first sample) and the
/// stack of label scopes pushed by [`crate::labels`].
struct ThreadState {
    tid: Cell<u32>,
    name: Cell<[u8; 16]>,
    label_ptr: [Cell<usize>; LABEL_DEPTH],
    label_len: [Cell<usize>; LABEL_DEPTH],
    label_depth: Cell<usize>,
    /// Scopes pushed past [`LABEL_DEPTH`]: popped before real entries, keeping pushes and
    /// pops paired.
    label_overflow: Cell<usize>,
}

thread_local! {
    // Constant initialiser and no destructor: access is a plain TLS offset, safe in a handler.
    static THREAD: ThreadState = const {
        ThreadState {
            tid: Cell::new(0),
            name: Cell::new([0; 16]),
            label_ptr: [const { Cell::new(0) }; LABEL_DEPTH],
            label_len: [const { Cell::new(0) }; LABEL_DEPTH],
            label_depth: Cell::new(0),
            label_overflow: Cell::new(0),
        }
    };
}

/// Pushes a label scope (encoded pairs, see [`crate::labels`]) for the current thread.
///
/// The bytes must stay alive and unchanged until the matching [`pop_labels`]; returns false
/// (nothing recorded, but still to be paired with a pop) when the thread already has
/// [`LABEL_DEPTH`] scopes.
pub(crate) fn push_labels(bytes: &[u8]) -> bool {
    THREAD
        .try_with(|t| {
            let d = t.label_depth.get();
            if d >= LABEL_DEPTH {
                t.label_overflow.set(t.label_overflow.get() + 1);
                TRUNCATED_LABELS.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            t.label_ptr[d].set(bytes.as_ptr() as usize);
            t.label_len[d].set(bytes.len());
            // The handler may run between any two instructions on this thread: the entry must
            // be complete before the depth makes it visible.
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
            t.label_depth.set(d + 1);
            true
        })
        .unwrap_or(false)
}

/// Pops the innermost label scope of the current thread (after which its bytes may be freed).
pub(crate) fn pop_labels() {
    let _ = THREAD.try_with(|t| {
        if t.label_overflow.get() > 0 {
            t.label_overflow.set(t.label_overflow.get() - 1);
            return;
        }
        let d = t.label_depth.get();
        if d > 0 {
            t.label_depth.set(d - 1);
        }
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    });
}

/// The current thread's label scopes, outermost first, copied (for the heap sampler).
pub(crate) fn current_labels(out: &mut Vec<u8>) {
    let _ = THREAD.try_with(|t| {
        for d in 0..t.label_depth.get() {
            // SAFETY: entries below the depth point to live bytes (push_labels' contract),
            // and only this thread changes them.
            let s = unsafe {
                std::slice::from_raw_parts(t.label_ptr[d].get() as *const u8, t.label_len[d].get())
            };
            out.extend_from_slice(s);
        }
    });
}

/// Walks a frame-pointer chain starting at frame pointer `fp`, writing return addresses into
/// `out`; returns how many were written. Reads only inside `[lo, hi)`, which must be readable
/// memory (a thread stack): a frame pointer outside it, misaligned, or not strictly above the
/// previous one ends the walk, as does a zero return address. Never faults, never allocates.
#[inline]
pub(crate) fn walk(mut fp: usize, lo: usize, hi: usize, out: &mut [u64]) -> usize {
    let mut n = 0;
    while n < out.len() {
        if fp < lo || !fp.is_multiple_of(8) || hi < 16 || fp > hi - 16 {
            break;
        }
        // SAFETY: [fp, fp + 16) lies inside [lo, hi), which the caller guarantees readable.
        let (next, ret) = unsafe {
            let p = fp as *const usize;
            (std::ptr::read(p), std::ptr::read(p.add(1)))
        };
        if ret == 0 {
            break;
        }
        out[n] = ret as u64;
        n += 1;
        if next <= fp {
            break;
        }
        fp = next;
    }
    n
}

/// The caller's frame pointer register (meaningful when the caller keeps frame pointers).
#[inline(always)]
pub(crate) fn frame_pointer() -> usize {
    let fp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register, touches no memory.
    unsafe {
        std::arch::asm!("mov {}, rbp", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads a register, touches no memory.
    unsafe {
        std::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        fp = 0;
    }
    fp
}

/// The bounds of the calling thread's stack from pthread (allocates: never in the handler).
pub(crate) fn own_stack_bounds() -> Option<(usize, usize)> {
    // SAFETY: pthread_getattr_np fills `attr` for the calling thread; it is destroyed after.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        ok.then(|| (addr as usize, addr as usize + size))
    }
}

/// Publishes a new table of stack ranges; returns the previous one, which the caller must
/// keep alive until no handler can still be reading it (the collector keeps it 2 s).
pub(crate) fn publish_ranges(ranges: StackRanges) -> Option<Box<StackRanges>> {
    let new = Box::into_raw(Box::new(ranges));
    RANGES_STALE.store(false, Ordering::Relaxed);
    let old = RANGES.swap(new, Ordering::AcqRel);
    // SAFETY: `old` came from Box::into_raw in an earlier call.
    (!old.is_null()).then(|| unsafe { Box::from_raw(old) })
}

/// Whether a handler met a stack outside the published ranges (a new thread's stack).
pub(crate) fn ranges_stale() -> bool {
    RANGES_STALE.load(Ordering::Relaxed)
}

/// Installs the handler (once) and allocates the ring; idempotent.
pub(crate) fn install() -> std::io::Result<()> {
    if !RING.load(Ordering::Acquire).is_null() {
        return Ok(());
    }
    let slots: Box<[Slot]> = (0..SLOTS)
        .map(|_| Slot {
            state: AtomicU32::new(EMPTY),
            sample: UnsafeCell::new(RawSample::EMPTY),
        })
        .collect();
    let ring = Box::into_raw(Box::new(Ring {
        slots,
        next: AtomicUsize::new(0),
    }));
    if RING
        .compare_exchange(
            std::ptr::null_mut(),
            ring,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // SAFETY: ours, never published.
        drop(unsafe { Box::from_raw(ring) });
        return Ok(());
    }
    // SAFETY: a zeroed sigaction with our handler, SA_SIGINFO for the ucontext and SA_RESTART
    // so interrupted system calls of the service resume instead of failing with EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        if libc::sigaction(libc::SIGPROF, &sa, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Arms `ITIMER_PROF` at `hz` (0 disarms). Samples taken from now on stand for 1/hz s.
pub(crate) fn set_frequency(hz: u32) -> std::io::Result<()> {
    let usec = if hz == 0 {
        0
    } else {
        (1_000_000 / u64::from(hz)).max(1)
    };
    PERIOD_NS.store(usec * 1000, Ordering::Relaxed);
    ACTIVE.store(hz != 0, Ordering::Release);
    let tv = libc::timeval {
        tv_sec: (usec / 1_000_000) as libc::time_t,
        tv_usec: (usec % 1_000_000) as libc::suseconds_t,
    };
    let timer = libc::itimerval {
        it_interval: tv,
        it_value: tv,
    };
    // SAFETY: plain system call with a valid itimerval.
    if unsafe { libc::setitimer(libc::ITIMER_PROF, &timer, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Hands free pages of glibc's heap back to the kernel after symbolization, which frees tens
/// of MiB of DWARF state at once (glibc keeps such memory resident otherwise).
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of glibc's arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Turns sampling on or off without touching the timer (the benchmark raises signals itself).
pub(crate) fn set_active(on: bool) {
    PERIOD_NS.store(1_000_000, Ordering::Relaxed);
    ACTIVE.store(on, Ordering::Release);
}

/// Sends `SIGPROF` to the calling thread.
pub(crate) fn raise_here() {
    // SAFETY: plain system call; the handler is installed (callers check).
    unsafe {
        libc::raise(libc::SIGPROF);
    }
}

/// Moves every published sample out of the ring into `f`, freeing its slot.
pub(crate) fn drain(mut f: impl FnMut(&RawSample)) {
    let ring = RING.load(Ordering::Acquire);
    if ring.is_null() {
        return;
    }
    // SAFETY: the ring is never freed once published.
    let ring = unsafe { &*ring };
    for slot in ring.slots.iter() {
        // Claim the sample: the collector and a finishing recording may drain at once, and
        // each sample must be read once, by one of them.
        if slot
            .state
            .compare_exchange(FULL, READING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: READING is ours: the writer is done (it published FULL) and no writer
            // or other reader touches the slot until we store EMPTY.
            f(unsafe { &*slot.sample.get() });
            slot.state.store(EMPTY, Ordering::Release);
        }
    }
}

/// Registers of the interrupted code: (pc, frame pointer, stack pointer).
///
/// # Safety
/// `ctx` must be the `ucontext_t` the kernel passed to a SA_SIGINFO handler.
unsafe fn registers(ctx: *mut libc::c_void) -> Option<(usize, usize, usize)> {
    if ctx.is_null() {
        return None;
    }
    let uc = ctx as *const libc::ucontext_t;
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    // SAFETY: per the contract, `uc` is the kernel's ucontext.
    unsafe {
        let g = &(*uc).uc_mcontext.gregs;
        Some((
            g[libc::REG_RIP as usize] as usize,
            g[libc::REG_RBP as usize] as usize,
            g[libc::REG_RSP as usize] as usize,
        ))
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    // SAFETY: per the contract, `uc` is the kernel's ucontext.
    unsafe {
        let m = &(*uc).uc_mcontext;
        Some((m.pc as usize, m.regs[29] as usize, m.sp as usize))
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        let _ = uc;
        None
    }
}

/// Cached id and name of the current thread (system calls on its first sample only).
fn thread_identity(t: &ThreadState, sample: &mut RawSample) {
    if t.tid.get() == 0 {
        // SAFETY: gettid and prctl(PR_GET_NAME) are plain system calls, async-signal-safe;
        // the name buffer is 16 bytes as PR_GET_NAME requires.
        unsafe {
            t.tid.set(libc::syscall(libc::SYS_gettid) as u32);
            let mut name = [0u8; 16];
            libc::prctl(
                libc::PR_GET_NAME,
                name.as_mut_ptr() as libc::c_ulong,
                0,
                0,
                0,
            );
            t.name.set(name);
        }
    }
    sample.tid = t.tid.get();
    sample.name = t.name.get();
}

/// Copies the thread's label scopes, outermost first, whole scopes only.
fn copy_labels(t: &ThreadState, sample: &mut RawSample) {
    let mut len = 0;
    for d in 0..t.label_depth.get().min(LABEL_DEPTH) {
        let (ptr, n) = (t.label_ptr[d].get(), t.label_len[d].get());
        if len + n > LABEL_BYTES {
            TRUNCATED_LABELS.fetch_add(1, Ordering::Relaxed);
            break;
        }
        // SAFETY: entries below the depth point to live bytes of this (interrupted) thread,
        // which cannot free them while its handler runs; the destination has room (checked).
        unsafe {
            std::ptr::copy_nonoverlapping(ptr as *const u8, sample.labels.as_mut_ptr().add(len), n);
        }
        len += n;
    }
    sample.label_len = len as u32;
}

extern "C" fn handler(_sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno; restored before returning so the
    // interrupted code never sees our system calls' errors.
    let errno = unsafe { *libc::__errno_location() };
    sample_now(ctx);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

fn sample_now(ctx: *mut libc::c_void) {
    if !ACTIVE.load(Ordering::Acquire) {
        return;
    }
    SIGNALS.fetch_add(1, Ordering::Relaxed);
    let ring = RING.load(Ordering::Acquire);
    if ring.is_null() {
        return;
    }
    // SAFETY: the ring is never freed once published.
    let ring = unsafe { &*ring };
    // SAFETY: the kernel passed `ctx` to our SA_SIGINFO handler.
    let Some((pc, fp, sp)) = (unsafe { registers(ctx) }) else {
        return;
    };
    let slot = {
        let i = ring.next.fetch_add(1, Ordering::Relaxed) % SLOTS;
        let s = &ring.slots[i];
        if s.state
            .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            DROPPED_FULL.fetch_add(1, Ordering::Relaxed);
            return;
        }
        s
    };
    // SAFETY: we own the slot (EMPTY→WRITING) until we publish it.
    let sample = unsafe { &mut *slot.sample.get() };
    sample.period_ns = PERIOD_NS.load(Ordering::Relaxed);
    sample.frames[0] = pc as u64;
    let ranges = RANGES.load(Ordering::Acquire);
    // SAFETY: a published table stays alive ≥ 2 s after being replaced (publish_ranges).
    let range = (!ranges.is_null())
        .then(|| unsafe { &*ranges })
        .and_then(|r| r.find(sp));
    let depth = match range {
        Some((_, hi)) => 1 + walk(fp, sp, hi, &mut sample.frames[1..]),
        None => {
            NO_STACK_RANGE.fetch_add(1, Ordering::Relaxed);
            RANGES_STALE.store(true, Ordering::Relaxed);
            1
        }
    };
    sample.depth = depth as u32;
    let _ = THREAD.try_with(|t| {
        thread_identity(t, sample);
        copy_labels(t, sample);
    });
    slot.state.store(FULL, Ordering::Release);
}

/// Runs the handler's capture path on the current thread outside any signal, for the
/// benchmark of one capture: walk from the caller's frame pointer within the stack bounds,
/// labels and identity included. Returns the depth.
pub(crate) fn capture_here(bounds: (usize, usize), out: &mut RawSample) -> usize {
    let fp = frame_pointer();
    let sp = &fp as *const usize as usize;
    out.frames[0] = capture_here as *const () as u64;
    let depth = 1 + walk(fp, sp.max(bounds.0), bounds.1, &mut out.frames[1..]);
    out.depth = depth as u32;
    let _ = THREAD.try_with(|t| {
        thread_identity(t, out);
        copy_labels(t, out);
    });
    depth
}

/// An empty sample buffer (boxed: it is 1.3 KiB).
pub(crate) fn empty_sample() -> Box<RawSample> {
    Box::new(RawSample::EMPTY)
}
