//! DWARF inlined frames and source lines at an address (addr2line over a mapped file).

use super::SourceFrame;
use super::table::demangle;
use crate::mmap::{Mmap, Pinned};
use object::{Object, ObjectSection};
use std::sync::Arc;

type DwarfReader = addr2line::gimli::EndianSlice<'static, addr2line::gimli::RunTimeEndian>;

/// An addr2line context over a mapped file (kept alive with it).
pub(super) struct DwarfInfo {
    ctx: Pinned<addr2line::Context<DwarfReader>>,
}

impl std::fmt::Debug for DwarfInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DwarfInfo")
    }
}

impl DwarfInfo {
    /// Builds the context when `map` holds uncompressed `.debug_info`.
    pub(super) fn load(map: Arc<Mmap>) -> Option<DwarfInfo> {
        let ctx = Pinned::build(map.clone(), context)?;
        // Building the context touched every unit header and range list;
        // lookups re-read only what they need.
        map.release_pages();
        Some(DwarfInfo { ctx })
    }

    /// Frames at `vaddr`, innermost inlined callee first, real function last.
    pub(super) fn frames(&self, vaddr: u64) -> Vec<SourceFrame> {
        frames_at(self.ctx.get(), vaddr)
    }
}

/// The addr2line context of an ELF file's bytes when it holds uncompressed `.debug_info`.
fn context(data: &'static [u8]) -> Option<addr2line::Context<DwarfReader>> {
    let file = object::File::parse(data).ok()?;
    let info = file.section_by_name(".debug_info")?;
    let compressed = info.compressed_file_range().ok()?;
    if info.size() == 0 || compressed.format != object::CompressionFormat::None {
        return None;
    }
    let endian = if file.is_little_endian() {
        addr2line::gimli::RunTimeEndian::Little
    } else {
        addr2line::gimli::RunTimeEndian::Big
    };
    let section = |id: addr2line::gimli::SectionId| -> Result<DwarfReader, ()> {
        let bytes = file
            .section_by_name(id.name())
            .and_then(|s| {
                // Compressed debug sections would need a copy; they
                // are skipped (functions still come from .symtab).
                let compressed = s.compressed_file_range().ok()?;
                if compressed.format != object::CompressionFormat::None {
                    return None;
                }
                s.data().ok()
            })
            .unwrap_or(&[]);
        Ok(addr2line::gimli::EndianSlice::new(bytes, endian))
    };
    let mut dwarf = addr2line::gimli::Dwarf::load(section).ok()?;
    // Rust binaries have thousands of units sharing a few abbreviation
    // tables: parse each table once instead of once per unit (the
    // context holds every unit, so this is most of its heap).
    dwarf.populate_abbreviations_cache(addr2line::gimli::AbbreviationsCacheStrategy::Duplicates);
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// Frames at `vaddr`, innermost inlined callee first, real function last.
fn frames_at(ctx: &addr2line::Context<DwarfReader>, vaddr: u64) -> Vec<SourceFrame> {
    let mut out = Vec::new();
    let Ok(mut iter) = ctx.find_frames(vaddr).skip_all_loads() else {
        return out;
    };
    while let Ok(Some(frame)) = iter.next() {
        let raw = frame
            .function
            .as_ref()
            .and_then(|f| f.raw_name().ok())
            .map(|n| n.into_owned())
            .unwrap_or_default();
        if raw.is_empty() {
            continue;
        }
        let pretty = demangle(&raw);
        let (file, line) = frame
            .location
            .map(|l| (l.file.unwrap_or(""), l.line.unwrap_or(0)))
            .unwrap_or(("", 0));
        out.push(SourceFrame {
            name: Arc::from(pretty),
            system_name: Arc::from(raw),
            file: Arc::from(file),
            line,
        });
    }
    out
}
