//! Ember's recording model: the samples the sampler captured, before symbolization
//! ([`Recording`]: aggregated stacks, the mappings they point into, optionally the
//! time-ordered timeline), and every operation on them:
//!
//! - building, merging cuts, keeping only the views a consumer sends, splitting per process
//!   ([`recording`]);
//! - symbolizing ([`symbolize`]: ELF tables, split debug files, DWARF inlines, kallsyms, JIT
//!   maps, an on-disk cache; [`debuginfod`] fetching; [`resolve`]: each distinct frame once);
//! - writing out: pprof ([`pprof`]), `perf script` text ([`perf_script`]), the symbolized
//!   timeline the bucket exporters consume ([`timeline`]).
//!
//! The sampler (`ember-sampler`) produces recordings and depends on this crate; consumers
//! (the agent, the exporters, `ember record`) depend on this crate and never on how samples
//! were captured.
//!
//! Unsafe code is confined to [`mmap`] (mapping files for the symbolizer).

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

pub mod capture;
pub mod debuginfod;
pub mod mmap;
pub mod perf_script;
pub mod pprof;
pub mod raw;
pub mod recording;
pub mod resolve;
pub mod stack;
pub mod symbolize;
pub mod timeline;

pub use capture::{AutoChoice, ExitStatus, Method, OffCpuSource};
pub use pprof::{Summary, build_profile};
pub use raw::{RawEvent, RawSample, RawSwitch};
pub use recording::Recording;
pub use resolve::{FrameInfo, Resolver};
pub use stack::{Frame, MapInfo, StackKey, StackValue};
pub use symbolize::Symbolizer;
