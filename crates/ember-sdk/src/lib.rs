//! In-process CPU and heap profiles for Rust services, without a host agent: what a service
//! adds in a few lines to serve `GET /profile/cpu` and `GET /profile/heap` (pprof or SVG),
//! label its samples with the work they belong to, and push continuous profiles to Ember or
//! any Pyroscope-compatible server.
//!
//! ```no_run
//! // Heap profiles (optional): sample the global allocator, 1 per 2 MiB on average.
//! #[global_allocator]
//! static ALLOC: ember_sdk::SamplingAllocator = ember_sdk::SamplingAllocator::system();
//!
//! # async fn serve(app: axum::Router) {}
//! # async fn example() {
//! // On demand: mount the handlers on an internal port.
//! let app = axum::Router::new().merge(ember_sdk::router(ember_sdk::Profiling::new()));
//! // Continuously: 59 s of CPU at 19 Hz and a heap profile every 60 s.
//! let _push = ember_sdk::PushMode::start(ember_sdk::PushOptions::new("my-api", "http://ember:4040"));
//! # serve(app).await }
//! ```
//!
//! - CPU ([`cpu`], the `signal` module): `SIGPROF` from `ITIMER_PROF`; an async-signal-safe handler
//!   walks frame pointers (every read validated) into a pre-allocated lock-free ring;
//!   symbolization happens later, from the binary's own ELF tables and DWARF ([`symbols`]).
//!   Full stacks need frame pointers in the service's code: build with
//!   `RUSTFLAGS="-C force-frame-pointers=yes"` (the standard library already has them);
//!   without them each sample still has its exact leaf function.
//! - Labels ([`labels`]): [`Labels`] scopes for code and futures, and [`ProfilingLayer`] for
//!   `tracing` spans (`span_id`, `trace_id`, `span_name`), right under tokio's
//!   multi-threaded runtime.
//! - Heap ([`heap`]): [`SamplingAllocator`] around any `GlobalAlloc`.
//! - HTTP ([`http`]): [`router`] (axum) and [`ProfileService`] (plain hyper).
//! - Push ([`push`]): [`PushMode`].
//!
//! Linux only (x86-64 and aarch64); macOS is not supported yet (it has no `ucontext` layout
//! we can test here). The wrapper works over jemalloc as over any allocator; with the
//! `jemalloc` cargo feature (off by default), jemalloc's own sampling is an alternative heap
//! source (`heap::jemalloc`, with the `jemalloc` feature: `ember_sdk::Jemalloc` as the global allocator and
//! `prof:true,lg_prof_sample:21` in `_rjem_malloc_conf` or `_RJEM_MALLOC_CONF`), and
//! `/profile/heap?format=jemalloc` serves jemalloc's raw dump.

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod cpu;
pub mod heap;
pub mod http;
pub mod labels;
pub mod push;
mod signal;
pub mod symbols;

#[doc(hidden)]
pub mod bench;

pub use cpu::{AdHoc, AdHocError, CpuRecording, CpuStats, cpu_stats};
#[cfg(feature = "jemalloc")]
pub use heap::jemalloc::Jemalloc;
pub use heap::{DEFAULT_SAMPLE_BYTES, SamplingAllocator, heap_profile, heap_profiling_enabled};
pub use http::{Answer, MAX_FREQUENCY, MAX_SECONDS, ProfileService, Profiling, respond, router};
pub use labels::{LabelGuard, Labels, LabelsExt, ProfilingLayer, WithLabels};
pub use push::{PushMode, PushOptions};

/// Whether this build keeps frame pointers (`-C force-frame-pointers=yes` in `RUSTFLAGS`):
/// without them, CPU and heap stacks stop at the first function of the service's own code.
pub const FRAME_POINTERS: bool = cfg!(ember_sdk_frame_pointers);

/// Errors of the SDK.
#[derive(Debug, thiserror::Error)]
pub enum SdkError {
    /// A parameter is out of range.
    #[error("{0}")]
    BadParameter(String),
    /// Installing the signal handler, arming the timer or starting the collector failed.
    #[error("CPU profiler: {0}")]
    Signal(std::io::Error),
    /// Push mode could not start (a bad URL).
    #[error("push: {0}")]
    Push(String),
}
