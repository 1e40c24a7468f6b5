//! The crate's only `unsafe`: mapping a regular file read-only.
//!
//! Large folded inputs (tens of MB) are parsed in place, so the whole file must be addressable
//! at once. Copying it into a heap buffer costs a kernel copy plus a page fault for every
//! 4 KiB of fresh heap, which measured about a third of `ember flamegraph`'s time on a 27 MB
//! input; mapping the page-cache pages directly (populated up front) avoids both.

#![allow(unsafe_code)]

use std::fs::File;

/// Maps all of `file` read-only, with the pages populated up front (`MAP_POPULATE` on Linux)
/// so that parsing does not take a fault per page. `None` when the kernel refuses (the caller
/// then reads the file instead).
pub(crate) fn map(file: &File) -> Option<memmap2::Mmap> {
    // SAFETY: `Mmap::map` is unsafe because the mapped bytes can change underneath the
    // returned slice if another process writes to or truncates the file while it is mapped
    // (truncation makes the kernel raise SIGBUS on access past the new end). Ember only maps
    // the profile files it was asked to read and never writes to them; the caveat, the same
    // as for any tool that maps its input (ripgrep, inferno), is documented on
    // `input::read_bytes`: do not truncate an input while Ember is reading it. Nothing else
    // is assumed: the mapping is private to the returned value and unmapped when it drops.
    unsafe { memmap2::MmapOptions::new().populate().map(file) }.ok()
}
