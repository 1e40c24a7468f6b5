//! The `GlobalAlloc` wrapper itself: the only `unsafe` of the heap profiler (the trait is
//! unsafe to implement). Everything it does besides forwarding is in the parent module.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

/// A global allocator that forwards to `A` (the system allocator by default, or jemalloc,
/// mimalloc, ...) and samples allocations for heap profiles: on average one sample per
/// `rate` bytes allocated (2 MiB by default), at byte positions drawn from a Poisson process,
/// so an allocation of `s` bytes is sampled with probability `1 - exp(-s/rate)` and the
/// profile's totals, each sample weighted by the inverse of that probability, are unbiased.
///
/// ```no_run
/// #[global_allocator]
/// static ALLOC: ember_sdk::SamplingAllocator = ember_sdk::SamplingAllocator::system();
/// ```
///
/// Unsampled allocations cost a thread-local subtraction; frees cost one load from an 8 KiB
/// bitmap over hashes of live sampled addresses (a lock only on a hit).
#[derive(Debug)]
pub struct SamplingAllocator<A = System> {
    inner: A,
    rate: usize,
}

impl SamplingAllocator<System> {
    /// The system allocator, sampled every 2 MiB on average.
    pub const fn system() -> Self {
        SamplingAllocator {
            inner: System,
            rate: super::DEFAULT_SAMPLE_BYTES,
        }
    }
}

impl<A> SamplingAllocator<A> {
    /// Wraps `inner`, sampled every 2 MiB on average.
    pub const fn new(inner: A) -> Self {
        SamplingAllocator {
            inner,
            rate: super::DEFAULT_SAMPLE_BYTES,
        }
    }

    /// Wraps `inner`, sampled every `rate` bytes on average (at least 1).
    pub const fn with_rate(inner: A, rate: usize) -> Self {
        SamplingAllocator {
            inner,
            rate: if rate == 0 { 1 } else { rate },
        }
    }
}

// SAFETY: every call is forwarded to `inner` with the caller's arguments unchanged and its
// result returned unchanged; the sampling hooks only read the pointer values (never the
// memory) and never unwind (they catch nothing that panics: no panicking paths).
unsafe impl<A: GlobalAlloc> GlobalAlloc for SamplingAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            super::on_alloc(p as usize, layout.size(), self.rate);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            super::on_alloc(p as usize, layout.size(), self.rate);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        super::on_free(ptr as usize);
        // SAFETY: the caller's contract for `dealloc` is passed on as is.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Forget the old block first: once realloc returns, its address may belong to
        // another thread's new allocation.
        super::on_free(ptr as usize);
        // SAFETY: the caller's contract for `realloc` is passed on as is.
        let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            super::on_alloc(p as usize, new_size, self.rate);
        }
        p
    }
}
