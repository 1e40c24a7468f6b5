//! One ELF binary: headers, split debug files, symbol tables built on the first miss, DWARF on
//! the first inline lookup, and per-address caches.

use super::dwarf::DwarfInfo;
use super::table::{NameSource, SOURCE_BIT, Sym, SymTable, UNSIZED_LIMIT, demangle};
use super::{SourceFrame, Symbol};
use crate::debuginfod::Debuginfod;
use crate::mmap::Mmap;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

// What we know about one ELF binary. Only headers are read up front; the
/// symbol table is built on the first lookup that the on-disk cache cannot
/// answer, and DWARF on the first inline lookup.
#[derive(Debug)]
pub struct Binary {
    /// Built lazily by [`Binary::table`].
    pub(super) symbols: Option<SymTable>,
    /// The binary itself.
    pub(super) main: Arc<Mmap>,
    /// Its split debug file, when one is needed and was found.
    pub(super) debug: Option<Arc<Mmap>>,
    /// The binary has a `.symtab` of its own.
    pub(super) main_has_symtab: bool,
    /// PT_LOAD segments: (file offset, file size, virtual address).
    pub(super) segments: Vec<(u64, u64, u64)>,
    /// Lowercase hex GNU build-id, empty when absent.
    pub build_id: String,
    /// No symbol table was found (stripped and no debug file).
    pub stripped: bool,
    /// Path of the split debug file the symbols came from, if any.
    pub debug_file: Option<PathBuf>,
    /// The file expected to carry DWARF (the binary or its debug file).
    pub(super) dwarf_source: Option<Arc<Mmap>>,
    /// Built on first inline lookup; `None` inside when there is no DWARF.
    pub(super) dwarf: Option<Option<DwarfInfo>>,
    pub(super) cache: HashMap<u64, Option<Symbol>>,
    pub(super) frames_cache: HashMap<u64, Arc<[SourceFrame]>>,
    /// Offsets resolved in this run and not yet in the on-disk cache.
    pub(super) new_syms: Vec<u64>,
    pub(super) new_frames: Vec<u64>,
    /// Symbol lookups actually computed (cache misses), for tests and stats.
    pub lookups: u64,
    /// Symbol entries loaded from the on-disk cache.
    pub disk_entries: u64,
}

/// Symbols read between two hand-backs of the touched file pages: bounds
/// the peak RSS of tables of huge binaries (100+ MB shared libraries).
pub(super) const RELEASE_EVERY: usize = 8 * 1024;

/// Calls `f(start, size, name_offset)` for every function symbol with a
/// non-zero address in `.symtab` and `.dynsym` of the mapped ELF file, where
/// `name_offset` is the file offset of its NUL-terminated name. Only the
/// symbol entries are read: names stay untouched (a big Rust library has
/// 20 MB of them) until a symbol is actually chosen.
pub(super) fn each_text_symbol(map: &Mmap, f: &mut dyn FnMut(u64, u64, usize)) {
    match object::FileKind::parse(map.bytes()) {
        Ok(object::FileKind::Elf64) => {
            each_elf_symbol::<object::elf::FileHeader64<object::Endianness>>(map, f)
        }
        Ok(object::FileKind::Elf32) => {
            each_elf_symbol::<object::elf::FileHeader32<object::Endianness>>(map, f)
        }
        _ => {}
    }
    map.release_pages();
}

pub(super) fn each_elf_symbol<Elf>(map: &Mmap, f: &mut dyn FnMut(u64, u64, usize))
where
    Elf: object::read::elf::FileHeader<Endian = object::Endianness>,
{
    use object::read::elf::{SectionHeader as _, Sym as _};
    let data = map.bytes();
    let Ok(file) = object::read::elf::ElfFile::<Elf, &[u8]>::parse(data) else {
        return;
    };
    let endian = file.endian();
    let sections = file.elf_section_table();
    let mut seen = 0usize;
    for table in [file.elf_symbol_table(), file.elf_dynamic_symbol_table()] {
        if table.is_empty() {
            continue;
        }
        let Ok(strtab) = sections.section(table.string_section()) else {
            continue;
        };
        let str_start: u64 = strtab.sh_offset(endian).into();
        let str_end = str_start.saturating_add(strtab.sh_size(endian).into());
        let str_end = str_end.min(data.len() as u64);
        for sym in table.symbols().iter().skip(1) {
            seen += 1;
            if seen.is_multiple_of(RELEASE_EVERY) {
                map.release_pages();
            }
            let kind = sym.st_type();
            if kind != object::elf::STT_FUNC && kind != object::elf::STT_GNU_IFUNC {
                continue;
            }
            let start: u64 = sym.st_value(endian).into();
            let name = u64::from(sym.st_name(endian));
            if start == 0 || name == 0 {
                continue;
            }
            let off = str_start.saturating_add(name);
            if off >= str_end {
                continue;
            }
            f(start, sym.st_size(endian).into(), off as usize);
        }
    }
}

/// The NUL-terminated string at `off` in `bytes` (empty when out of range).
pub(super) fn c_str(bytes: &[u8], off: usize) -> &[u8] {
    let rest = bytes.get(off..).unwrap_or_default();
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    &rest[..end]
}

pub(super) fn read_symbols(map: &Mmap, source: usize, table: &mut SymTable) {
    each_text_symbol(map, &mut |start, size, off| {
        table.push(start, size, source, off);
    });
}

/// Finds, for a sorted set of addresses, the symbol each falls into, in
/// one pass over symbols arriving in any order, without building a table.
///
/// A symbol can only answer the first query at or above its start (or,
/// through that one, later queries with no closer symbol), so each query
/// slot keeps the highest-starting symbol routed to it; [`Nearest::finish`]
/// then carries answers forward. Ties on the start prefer the larger size,
/// like [`SymTable::finish`].
pub(super) struct Nearest {
    pub(super) queries: Vec<u64>,
    pub(super) best: Vec<Option<Sym>>,
}

impl Nearest {
    /// `queries` must be sorted and free of duplicates.
    pub(super) fn new(queries: Vec<u64>) -> Nearest {
        let best = vec![None; queries.len()];
        Nearest { queries, best }
    }

    /// Offers a symbol; returns the query slot it now holds (so the caller
    /// can keep a copy of its name), or `None` when it answers no query.
    pub(super) fn offer(&mut self, start: u64, size: u64, name: u32) -> Option<usize> {
        let last = *self.queries.last()?;
        if start > last {
            return None;
        }
        let slot = self.queries.partition_point(|&q| q < start);
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        let better = match &self.best[slot] {
            None => true,
            Some(b) => {
                (start, size, std::cmp::Reverse(name))
                    > (b.start, b.size, std::cmp::Reverse(b.name))
            }
        };
        if !better {
            return None;
        }
        self.best[slot] = Some(Sym { start, size, name });
        Some(slot)
    }

    /// The symbol containing each query (same order as the queries), with
    /// unsized symbols covering `unsized_limit` bytes, and the slot that
    /// holds it (see [`Nearest::offer`]).
    pub(super) fn finish(self, unsized_limit: u64) -> Vec<Option<(Sym, usize)>> {
        let mut carried: Option<(Sym, usize)> = None;
        self.queries
            .iter()
            .zip(self.best)
            .enumerate()
            .map(|(slot, (&q, best))| {
                if let Some(sym) = best {
                    carried = Some((sym, slot));
                }
                let (sym, from) = carried?;
                let limit = if sym.size > 0 {
                    u64::from(sym.size)
                } else {
                    unsized_limit
                };
                (q - sym.start < limit).then_some((sym, from))
            })
            .collect()
    }
}

/// Builds a [`Symbol`] from a raw (mangled) name.
pub(super) fn make_symbol(raw: &str, start: u64, demangled: bool) -> Symbol {
    let system_name: Arc<str> = Arc::from(raw);
    let name = if demangled {
        let pretty = demangle(raw);
        if pretty == raw {
            system_name.clone()
        } else {
            Arc::from(pretty)
        }
    } else {
        system_name.clone()
    };
    Symbol {
        name,
        system_name,
        start,
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Candidate split debug files for a binary.
pub(super) fn debug_candidates(
    path: &Path,
    build_id: &str,
    debuglink: Option<&str>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if build_id.len() > 2 {
        out.push(PathBuf::from(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &build_id[..2],
            &build_id[2..]
        )));
    }
    if let (Some(link), Some(dir)) = (debuglink, path.parent()) {
        out.push(dir.join(link));
        out.push(dir.join(".debug").join(link));
        let rel = dir.strip_prefix("/").unwrap_or(dir);
        out.push(Path::new("/usr/lib/debug").join(rel).join(link));
    }
    out
}

pub(super) fn has_debug_info<'d>(file: &object::File<'d, &'d [u8]>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

impl Binary {
    /// Reads an ELF file's headers and finds its split debug file (by
    /// build-id or `.gnu_debuglink`) when it lacks `.symtab` or DWARF.
    pub fn load(path: &Path) -> Result<Binary, String> {
        Self::load_with(path, None, false, &mut Vec::new())
    }

    /// Like [`Binary::load`]; when no local debug file supplies what the
    /// binary lacks (a `.symtab`, or DWARF when `inline`), asks `debuginfod`
    /// for it by build-id. Its failures go to `warnings`, never to the result.
    pub fn load_with(
        path: &Path,
        debuginfod: Option<&mut Debuginfod>,
        inline: bool,
        warnings: &mut Vec<String>,
    ) -> Result<Binary, String> {
        let map = Arc::new(Mmap::open(path).map_err(|e| format!("{}: {e}", path.display()))?);
        Self::from_map(map, path, debuginfod, inline, warnings)
    }

    /// Like [`Binary::load_with`], for an image already mapped (`path` names it, for split
    /// debug files found by `.gnu_debuglink` and for messages).
    pub fn from_map(
        map: Arc<Mmap>,
        path: &Path,
        debuginfod: Option<&mut Debuginfod>,
        inline: bool,
        warnings: &mut Vec<String>,
    ) -> Result<Binary, String> {
        let file =
            object::File::parse(map.bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut binary = Binary {
            symbols: None,
            main: map.clone(),
            debug: None,
            main_has_symtab: file.symbols().next().is_some(),
            segments: Vec::new(),
            build_id: String::new(),
            stripped: false,
            debug_file: None,
            dwarf_source: None,
            dwarf: None,
            cache: HashMap::new(),
            frames_cache: HashMap::new(),
            new_syms: Vec::new(),
            new_frames: Vec::new(),
            lookups: 0,
            disk_entries: 0,
        };
        for seg in file.segments() {
            let (off, size) = seg.file_range();
            binary.segments.push((off, size, seg.address()));
        }
        if let Ok(Some(id)) = file.build_id() {
            binary.build_id = hex(id);
        }
        if has_debug_info(&file) {
            binary.dwarf_source = Some(map.clone());
        }
        let mut debug_has_symtab = false;
        if !binary.main_has_symtab || binary.dwarf_source.is_none() {
            let link = file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
            for candidate in debug_candidates(path, &binary.build_id, link.as_deref()) {
                if candidate != path && binary.try_debug_file(candidate, &mut debug_has_symtab) {
                    break;
                }
            }
        }
        let lacking = (!binary.main_has_symtab && !debug_has_symtab)
            || (inline && binary.dwarf_source.is_none());
        if lacking
            && !binary.build_id.is_empty()
            && let Some(client) = debuginfod
        {
            match client.debuginfo(&binary.build_id) {
                Ok(Some(fetched)) => {
                    binary.try_debug_file(fetched, &mut debug_has_symtab);
                }
                Ok(None) => {}
                Err(e) => warnings.push(e.to_string()),
            }
            warnings.extend(client.take_unreported());
        }
        binary.stripped = !binary.main_has_symtab
            && !debug_has_symtab
            && !file
                .dynamic_symbols()
                .any(|s| s.kind() == SymbolKind::Text && s.address() != 0);
        Ok(binary)
    }

    /// Takes `candidate` as the split debug file if it adds a symbol table
    /// or DWARF the binary lacks; true when it was taken.
    pub(super) fn try_debug_file(
        &mut self,
        candidate: PathBuf,
        debug_has_symtab: &mut bool,
    ) -> bool {
        let Ok(debug_map) = Mmap::open(&candidate) else {
            return false;
        };
        let debug_map = Arc::new(debug_map);
        let Ok(debug) = object::File::parse(debug_map.bytes()) else {
            return false;
        };
        let useful_syms = !self.main_has_symtab && debug.symbols().next().is_some();
        let useful_dwarf = self.dwarf_source.is_none() && has_debug_info(&debug);
        if !useful_syms && !useful_dwarf {
            return false;
        }
        if useful_syms {
            *debug_has_symtab = true;
            self.debug = Some(debug_map.clone());
        }
        if useful_dwarf {
            self.dwarf_source = Some(debug_map);
        }
        self.debug_file = Some(candidate);
        true
    }

    /// The symbol table, built on first use from `.symtab`/`.dynsym` of the
    /// binary and `.symtab` of its debug file. Names stay in the mapped
    /// files; the pages touched while building are handed back.
    pub(super) fn table(&mut self) -> &SymTable {
        let (main, debug) = (&self.main, &self.debug);
        self.symbols.get_or_insert_with(|| {
            let mut table = SymTable::default();
            table.sources.push(NameSource::File(main.clone()));
            read_symbols(main, 0, &mut table);
            if let Some(debug) = debug {
                table.sources.push(NameSource::File(debug.clone()));
                read_symbols(debug, 1, &mut table);
            }
            table.finish();
            table
        })
    }

    /// Converts a file offset to the ELF virtual address it is loaded at.
    pub fn offset_to_vaddr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(off, size, _)| offset >= off && offset - off < size.max(1))
            .map(|&(off, _, vaddr)| offset - off + vaddr)
    }

    /// Looks up the function containing file offset `offset`; each offset
    /// is computed once (and, with a disk cache, once across runs).
    pub fn lookup_offset(&mut self, offset: u64) -> Option<Symbol> {
        if let Some(hit) = self.cache.get(&offset) {
            return hit.clone();
        }
        self.lookups += 1;
        let found = self
            .offset_to_vaddr(offset)
            .and_then(|vaddr| self.table().symbol(vaddr, UNSIZED_LIMIT, true));
        self.cache.insert(offset, found.clone());
        self.new_syms.push(offset);
        found
    }

    /// DWARF frames at file offset `offset`: inlined callees innermost
    /// first, the containing function last, each with file and line.
    /// Empty when the binary has no (uncompressed) DWARF for that address.
    pub fn source_frames(&mut self, offset: u64) -> Arc<[SourceFrame]> {
        if let Some(hit) = self.frames_cache.get(&offset) {
            return hit.clone();
        }
        let vaddr = self.offset_to_vaddr(offset);
        let source = &self.dwarf_source;
        let dwarf = self
            .dwarf
            .get_or_insert_with(|| source.clone().and_then(DwarfInfo::load));
        let frames: Arc<[SourceFrame]> = match (dwarf, vaddr) {
            (Some(d), Some(vaddr)) => d.frames(vaddr).into(),
            _ => Arc::from(Vec::new()),
        };
        self.frames_cache.insert(offset, frames.clone());
        self.new_frames.push(offset);
        frames
    }

    /// Resolves many file offsets at once, for [`Binary::lookup_offset`]
    /// and (with `inline`) [`Binary::source_frames`] to answer from their
    /// caches afterwards. Offsets the caches lack are looked up in one pass
    /// over the symbol tables, without building a table, and their DWARF
    /// frames in address order; then the DWARF context is dropped and the
    /// touched file pages are handed back ([`Binary::release`]), so a binary
    /// costs memory only while its batch runs.
    pub fn prepare(&mut self, offsets: &[u64], inline: bool) {
        // (vaddr, offset) of the misses, in address order.
        let mut misses: Vec<(u64, u64)> = Vec::new();
        for &offset in offsets {
            if self.cache.contains_key(&offset) {
                continue;
            }
            match self.offset_to_vaddr(offset) {
                Some(vaddr) => misses.push((vaddr, offset)),
                None => {
                    self.lookups += 1;
                    self.cache.insert(offset, None);
                    self.new_syms.push(offset);
                }
            }
        }
        misses.sort_unstable();
        misses.dedup();
        if !misses.is_empty() {
            let found = self.nearest_symbols(&misses);
            for (&(_, offset), sym) in misses.iter().zip(found) {
                self.lookups += 1;
                self.cache.insert(offset, sym);
                self.new_syms.push(offset);
            }
        }
        if inline {
            let mut wanted: Vec<(u64, u64)> = offsets
                .iter()
                .filter(|o| !self.frames_cache.contains_key(o))
                .map(|&o| (self.offset_to_vaddr(o).unwrap_or(u64::MAX), o))
                .collect();
            wanted.sort_unstable();
            wanted.dedup();
            for (n, &(_, offset)) in wanted.iter().enumerate() {
                self.source_frames(offset);
                // addr2line keeps slices into the mapping, which are simply
                // re-read if needed: the parsed units stay, the pages go.
                if (n + 1).is_multiple_of(RELEASE_EVERY / 8)
                    && let Some(map) = &self.dwarf_source
                {
                    map.release_pages();
                }
            }
        }
        self.release();
    }

    /// The symbols containing `misses` (sorted (vaddr, offset) pairs), from
    /// the table when one was built, else in one streaming pass.
    pub(super) fn nearest_symbols(&mut self, misses: &[(u64, u64)]) -> Vec<Option<Symbol>> {
        if let Some(table) = &self.symbols {
            return misses
                .iter()
                .map(|&(vaddr, _)| table.symbol(vaddr, UNSIZED_LIMIT, true))
                .collect();
        }
        let mut queries: Vec<u64> = misses.iter().map(|&(vaddr, _)| vaddr).collect();
        queries.dedup();
        let mut near = Nearest::new(queries);
        let sources: Vec<&Arc<Mmap>> = std::iter::once(&self.main)
            .chain(self.debug.as_ref())
            .collect();
        for (source, map) in sources.iter().enumerate() {
            each_text_symbol(map, &mut |start, size, off| {
                if let Ok(off) = u32::try_from(off)
                    && off & SOURCE_BIT == 0
                {
                    let name = if source == 1 { off | SOURCE_BIT } else { off };
                    near.offer(start, size, name);
                }
            });
        }
        let queries = near.queries.clone();
        let found = near.finish(UNSIZED_LIMIT);
        let named: Vec<Option<Symbol>> = found
            .into_iter()
            .map(|hit| {
                let (sym, _) = hit?;
                let map = sources[usize::from(sym.name & SOURCE_BIT != 0)];
                let raw = c_str(map.bytes(), (sym.name & !SOURCE_BIT) as usize);
                (!raw.is_empty())
                    .then(|| make_symbol(&String::from_utf8_lossy(raw), sym.start, true))
            })
            .collect();
        misses
            .iter()
            .map(|&(vaddr, _)| {
                let i = queries.partition_point(|&q| q < vaddr);
                named.get(i).cloned().flatten()
            })
            .collect()
    }

    /// Drops what was built to answer lookups (the symbol table, the DWARF
    /// context) and hands the touched file pages back; the caches of
    /// answers stay, and anything needed later is rebuilt on demand.
    pub fn release(&mut self) {
        self.symbols = None;
        self.dwarf = None;
        self.main.release_pages();
        for map in self.debug.iter().chain(&self.dwarf_source) {
            map.release_pages();
        }
    }
}
