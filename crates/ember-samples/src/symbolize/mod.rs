//! Turning addresses into function names: ELF `.symtab`/`.dynsym` (with
//! split debug files found by build-id or `.gnu_debuglink`), DWARF inlined
//! frames and lines (addr2line), kernel symbols from `/proc/kallsyms`, JIT
//! maps `/tmp/perf-PID.map`, and Rust/C++ demangling. Each binary is opened
//! once (headers first, symbol tables on the first miss, DWARF on the first
//! inline lookup) and each (binary, address) is looked up once per run; an
//! optional on-disk cache keyed by build-id carries lookups across runs.
//! Anything unreadable degrades to `None` plus a warning.

use crate::debuginfod::Debuginfod;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A resolved symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Demangled name.
    pub name: Arc<str>,
    /// Name as stored in the binary (mangled).
    pub system_name: Arc<str>,
    /// Address of the symbol's first byte (ELF virtual address, or absolute
    /// for kernel and JIT symbols).
    pub start: u64,
}

/// One function frame at an address from DWARF: an inlined callee or the
/// real (outermost) function, with the source position inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFrame {
    /// Demangled name.
    pub name: Arc<str>,
    /// Name as stored in the debug info (mangled when a linkage name exists).
    pub system_name: Arc<str>,
    /// Source file, empty when unknown.
    pub file: Arc<str>,
    /// Source line, 0 when unknown.
    pub line: u32,
}

/// A read-only private mapping of a whole file. Symbol and string tables
/// are read straight from it, so nothing is copied onto the heap, and the
/// kernel can drop its pages again under pressure (they are file-backed).
#[derive(Debug)]
pub(crate) struct Mmap {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and never remapped while alive.
unsafe impl Send for Mmap {}
// SAFETY: as above; shared references only read.
unsafe impl Sync for Mmap {}

impl Mmap {
    pub(crate) fn open(path: &Path) -> std::io::Result<Mmap> {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(path)?;
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| std::io::Error::other("file too large"))?;
        if len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "empty file",
            ));
        }
        // SAFETY: a fresh read-only private mapping of an open file; the fd
        // may be closed afterwards (the mapping keeps the file referenced).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mmap { ptr, len })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len describe a live PROT_READ mapping owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    /// Gives the pages touched while building tables back to the kernel:
    /// they are re-read from the page cache if a name is needed later.
    fn release_pages(&self) {
        // SAFETY: advisory call on our own mapping; clean file-backed pages
        // are simply re-faulted on the next access.
        unsafe {
            libc::madvise(self.ptr, self.len, libc::MADV_DONTNEED);
        }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping the region we mapped; no borrows outlive self.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

/// Where symbol names live: an owned arena (kallsyms, JIT maps) or a
/// mapped ELF file (names stay in its string table).
#[derive(Debug)]
enum NameSource {
    Arena(Vec<u8>),
    File(Arc<Mmap>),
}

impl NameSource {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            NameSource::Arena(v) => v,
            NameSource::File(m) => m.bytes(),
        }
    }
}

/// 16 bytes per symbol: big binaries have hundreds of thousands. Names
/// are NUL-terminated in their source, so only their offset is kept.
#[derive(Debug, Clone, Copy)]
struct Sym {
    start: u64,
    size: u32,
    /// Byte offset of the name; the top bit selects source 0 or 1.
    name: u32,
}

const SOURCE_BIT: u32 = 1 << 31;

/// Sorted symbol table with "last symbol at or below" lookup.
#[derive(Debug, Default)]
struct SymTable {
    syms: Vec<Sym>,
    /// At most two: the binary (or an arena) and its split debug file.
    sources: Vec<NameSource>,
}

impl SymTable {
    /// Adds a symbol whose NUL-terminated name starts at `name_off` in
    /// source `source` (0 or 1); names past 2 GiB are not representable.
    fn push(&mut self, start: u64, size: u64, source: usize, name_off: usize) {
        let Ok(off) = u32::try_from(name_off) else {
            return;
        };
        if off & SOURCE_BIT != 0 || source > 1 {
            return;
        }
        self.syms.push(Sym {
            start,
            size: u32::try_from(size).unwrap_or(u32::MAX),
            name: if source == 1 { off | SOURCE_BIT } else { off },
        });
    }

    /// Adds a symbol whose name is copied into the arena (source 0).
    fn push_owned(&mut self, start: u64, size: u64, name: &str) {
        if self.sources.is_empty() {
            self.sources.push(NameSource::Arena(Vec::new()));
        }
        let NameSource::Arena(arena) = &mut self.sources[0] else {
            return;
        };
        let off = arena.len();
        arena.extend_from_slice(name.as_bytes());
        arena.push(0);
        self.push(start, size, 0, off);
    }

    fn finish(&mut self) {
        // Prefer sized duplicates: keep the first per address after sorting
        // by (start, size descending, name position) — the name position
        // makes aliases (identical code folded) resolve the same every run
        // and like [`Nearest`].
        self.syms.sort_unstable_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.size.cmp(&a.size))
                .then(a.name.cmp(&b.name))
        });
        self.syms.dedup_by_key(|s| s.start);
        self.syms.shrink_to_fit();
        for source in &mut self.sources {
            if let NameSource::Arena(v) = source {
                v.shrink_to_fit();
            }
        }
    }

    fn name(&self, sym: &Sym) -> Cow<'_, str> {
        let source = usize::from(sym.name & SOURCE_BIT != 0);
        let off = (sym.name & !SOURCE_BIT) as usize;
        let bytes = self.sources.get(source).map_or(&[][..], |s| s.bytes());
        String::from_utf8_lossy(c_str(bytes, off))
    }

    fn lookup(&self, addr: u64, unsized_limit: u64) -> Option<&Sym> {
        let idx = self.syms.partition_point(|s| s.start <= addr);
        let sym = self.syms.get(idx.checked_sub(1)?)?;
        let limit = if sym.size > 0 {
            u64::from(sym.size)
        } else {
            unsized_limit
        };
        (addr - sym.start < limit).then_some(sym)
    }

    /// The symbol at `addr` as a [`Symbol`], names demangled when `demangled`.
    fn symbol(&self, addr: u64, unsized_limit: u64, demangled: bool) -> Option<Symbol> {
        let sym = self.lookup(addr, unsized_limit)?;
        let raw = self.name(sym);
        (!raw.is_empty()).then(|| make_symbol(&raw, sym.start, demangled))
    }
}

/// Demangles Rust (legacy and v0) and C++ (Itanium) names; others pass through.
pub fn demangle(name: &str) -> String {
    let base = name.split_once('@').map_or(name, |(b, _)| b);
    let rusty = base.starts_with("_R")
        || (base.starts_with("_ZN") && {
            let core = base.split('.').next().unwrap_or(base);
            core.ends_with('E') && core.contains("17h")
        });
    if rusty && let Ok(d) = rustc_demangle::try_demangle(base) {
        return format!("{d:#}");
    }
    if base.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(base.as_bytes())
        && let Ok(text) = sym.demangle()
    {
        return text;
    }
    if let Ok(d) = rustc_demangle::try_demangle(base) {
        return format!("{d:#}");
    }
    name.to_string()
}

type DwarfReader = addr2line::gimli::EndianSlice<'static, addr2line::gimli::RunTimeEndian>;

/// An addr2line context over a mapped file. Field order matters: the
/// context borrows the mapping and must be dropped first.
struct DwarfInfo {
    ctx: addr2line::Context<DwarfReader>,
    _map: Arc<Mmap>,
}

impl std::fmt::Debug for DwarfInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DwarfInfo")
    }
}

impl DwarfInfo {
    /// Builds the context when `map` holds uncompressed `.debug_info`.
    fn load(map: Arc<Mmap>) -> Option<DwarfInfo> {
        // SAFETY: the slice points into the mapping, which is kept alive by
        // `_map` for as long as the context (declared first, dropped first)
        // exists; the mapping never moves.
        let data: &'static [u8] =
            unsafe { std::mem::transmute::<&[u8], &'static [u8]>(map.bytes()) };
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
        dwarf
            .populate_abbreviations_cache(addr2line::gimli::AbbreviationsCacheStrategy::Duplicates);
        let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
        // Building the context touched every unit header and range list;
        // lookups re-read only what they need.
        map.release_pages();
        Some(DwarfInfo { ctx, _map: map })
    }

    /// Frames at `vaddr`, innermost inlined callee first, real function last.
    fn frames(&self, vaddr: u64) -> Vec<SourceFrame> {
        let mut out = Vec::new();
        let Ok(mut iter) = self.ctx.find_frames(vaddr).skip_all_loads() else {
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
}

// What we know about one ELF binary. Only headers are read up front; the
/// symbol table is built on the first lookup that the on-disk cache cannot
/// answer, and DWARF on the first inline lookup.
#[derive(Debug)]
pub struct Binary {
    /// Built lazily by [`Binary::table`].
    symbols: Option<SymTable>,
    /// The binary itself.
    main: Arc<Mmap>,
    /// Its split debug file, when one is needed and was found.
    debug: Option<Arc<Mmap>>,
    /// The binary has a `.symtab` of its own.
    main_has_symtab: bool,
    /// PT_LOAD segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
    /// Lowercase hex GNU build-id, empty when absent.
    pub build_id: String,
    /// No symbol table was found (stripped and no debug file).
    pub stripped: bool,
    /// Path of the split debug file the symbols came from, if any.
    pub debug_file: Option<PathBuf>,
    /// The file expected to carry DWARF (the binary or its debug file).
    dwarf_source: Option<Arc<Mmap>>,
    /// Built on first inline lookup; `None` inside when there is no DWARF.
    dwarf: Option<Option<DwarfInfo>>,
    cache: HashMap<u64, Option<Symbol>>,
    frames_cache: HashMap<u64, Arc<[SourceFrame]>>,
    /// Offsets resolved in this run and not yet in the on-disk cache.
    new_syms: Vec<u64>,
    new_frames: Vec<u64>,
    /// Symbol lookups actually computed (cache misses), for tests and stats.
    pub lookups: u64,
    /// Symbol entries loaded from the on-disk cache.
    pub disk_entries: u64,
}

/// Symbols read between two hand-backs of the touched file pages: bounds
/// the peak RSS of tables of huge binaries (100+ MB shared libraries).
const RELEASE_EVERY: usize = 8 * 1024;

/// Calls `f(start, size, name_offset)` for every function symbol with a
/// non-zero address in `.symtab` and `.dynsym` of the mapped ELF file, where
/// `name_offset` is the file offset of its NUL-terminated name. Only the
/// symbol entries are read: names stay untouched (a big Rust library has
/// 20 MB of them) until a symbol is actually chosen.
fn each_text_symbol(map: &Mmap, f: &mut dyn FnMut(u64, u64, usize)) {
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

fn each_elf_symbol<Elf>(map: &Mmap, f: &mut dyn FnMut(u64, u64, usize))
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
fn c_str(bytes: &[u8], off: usize) -> &[u8] {
    let rest = bytes.get(off..).unwrap_or_default();
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    &rest[..end]
}

fn read_symbols(map: &Mmap, source: usize, table: &mut SymTable) {
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
struct Nearest {
    queries: Vec<u64>,
    best: Vec<Option<Sym>>,
}

impl Nearest {
    /// `queries` must be sorted and free of duplicates.
    fn new(queries: Vec<u64>) -> Nearest {
        let best = vec![None; queries.len()];
        Nearest { queries, best }
    }

    /// Offers a symbol; returns the query slot it now holds (so the caller
    /// can keep a copy of its name), or `None` when it answers no query.
    fn offer(&mut self, start: u64, size: u64, name: u32) -> Option<usize> {
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
    fn finish(self, unsized_limit: u64) -> Vec<Option<(Sym, usize)>> {
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
fn make_symbol(raw: &str, start: u64, demangled: bool) -> Symbol {
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

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Candidate split debug files for a binary.
fn debug_candidates(path: &Path, build_id: &str, debuglink: Option<&str>) -> Vec<PathBuf> {
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

fn has_debug_info<'d>(file: &object::File<'d, &'d [u8]>) -> bool {
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
    fn try_debug_file(&mut self, candidate: PathBuf, debug_has_symtab: &mut bool) -> bool {
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
    fn table(&mut self) -> &SymTable {
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
    fn nearest_symbols(&mut self, misses: &[(u64, u64)]) -> Vec<Option<Symbol>> {
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

    /// Fills the caches from `dir/<build-id>.sym` and `.inl`, written by
    /// [`Binary::save_cache`] in earlier runs. Malformed lines are skipped.
    fn load_cache(&mut self, dir: &Path) {
        if self.build_id.is_empty() {
            return;
        }
        let read = |ext: &str| {
            let path = dir.join(format!("{}.{ext}", self.build_id));
            match std::fs::metadata(&path) {
                Ok(m) if m.len() <= MAX_CACHE_FILE => std::fs::read_to_string(path).ok(),
                _ => None,
            }
        };
        if let Some(text) = read("sym") {
            for line in text.lines() {
                let mut parts = line.splitn(3, '\t');
                let Some(Ok(offset)) = parts.next().map(|s| u64::from_str_radix(s, 16)) else {
                    continue;
                };
                let entry = match (parts.next(), parts.next()) {
                    (Some("-"), None) => None,
                    (Some(start), Some(raw)) if !raw.is_empty() => {
                        let Ok(start) = u64::from_str_radix(start, 16) else {
                            continue;
                        };
                        let system_name: Arc<str> = Arc::from(raw);
                        let pretty = demangle(raw);
                        Some(Symbol {
                            name: if pretty == raw {
                                system_name.clone()
                            } else {
                                Arc::from(pretty)
                            },
                            system_name,
                            start,
                        })
                    }
                    _ => continue,
                };
                self.cache.insert(offset, entry);
            }
        }
        if let Some(text) = read("inl") {
            let mut lines = text.lines();
            while let Some(head) = lines.next() {
                let Some((offset, count)) = head.split_once('\t') else {
                    continue;
                };
                let (Ok(offset), Ok(count)) =
                    (u64::from_str_radix(offset, 16), count.parse::<usize>())
                else {
                    continue;
                };
                let mut frames = Vec::new();
                for line in lines.by_ref().take(count) {
                    let mut parts = line.splitn(3, '\t');
                    let (Some(Ok(no)), Some(file), Some(raw)) =
                        (parts.next().map(str::parse), parts.next(), parts.next())
                    else {
                        break;
                    };
                    frames.push(SourceFrame {
                        name: Arc::from(demangle(raw)),
                        system_name: Arc::from(raw),
                        file: Arc::from(file),
                        line: no,
                    });
                }
                if frames.len() == count {
                    self.frames_cache.insert(offset, frames.into());
                }
            }
        }
        self.disk_entries = self.cache.len() as u64;
    }

    /// Appends this run's new lookups to `dir/<build-id>.sym` and `.inl`.
    fn save_cache(&mut self, dir: &Path) -> std::io::Result<()> {
        use std::fmt::Write as _;
        use std::io::Write as _;
        if self.build_id.is_empty() || (self.new_syms.is_empty() && self.new_frames.is_empty()) {
            return Ok(());
        }
        let clean = |s: &str| !s.contains(['\t', '\n', '\r']);
        let mut sym = String::new();
        for offset in self.new_syms.drain(..) {
            match self.cache.get(&offset) {
                Some(Some(s)) if clean(&s.system_name) => {
                    let _ = writeln!(sym, "{offset:x}\t{:x}\t{}", s.start, s.system_name);
                }
                Some(None) => {
                    let _ = writeln!(sym, "{offset:x}\t-");
                }
                _ => {}
            }
        }
        let mut inl = String::new();
        for offset in self.new_frames.drain(..) {
            let Some(frames) = self.frames_cache.get(&offset) else {
                continue;
            };
            if !frames
                .iter()
                .all(|f| clean(&f.system_name) && clean(&f.file))
            {
                continue;
            }
            let _ = writeln!(inl, "{offset:x}\t{}", frames.len());
            for f in frames.iter() {
                let _ = writeln!(inl, "{}\t{}\t{}", f.line, f.file, f.system_name);
            }
        }
        std::fs::create_dir_all(dir)?;
        for (ext, text) in [("sym", sym), ("inl", inl)] {
            if text.is_empty() {
                continue;
            }
            let path = dir.join(format!("{}.{ext}", self.build_id));
            // One write per file: concurrent runs append whole blocks.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?
                .write_all(text.as_bytes())?;
        }
        Ok(())
    }
}

/// How far an unsized symbol (hand-written assembly) reaches: at most
/// 64 KiB, so a stray address far past the last symbol stays unknown.
const UNSIZED_LIMIT: u64 = 0x10000;

/// Cache files above this size are ignored (and no longer grown).
const MAX_CACHE_FILE: u64 = 64 << 20;

/// The default directory of the symbol cache: `$XDG_CACHE_HOME/ember/symbols`
/// or `~/.cache/ember/symbols`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("ember").join("symbols"))
}

/// kallsyms has no sizes: a kernel symbol covers at most 1 MiB.
const KERNEL_UNSIZED_LIMIT: u64 = 0x100000;

/// A text symbol line of kallsyms: `addr type name [module]`.
struct KallsymsLine<'a> {
    addr: u64,
    name: &'a [u8],
    /// The symbol belongs to a module (or BPF, ftrace): `[name]` follows.
    module: bool,
}

impl<'a> KallsymsLine<'a> {
    /// The line when it is a text symbol (`t`, `T`, `w`, `W`) with a
    /// non-zero address.
    fn parse(line: &'a [u8]) -> Option<KallsymsLine<'a>> {
        let mut parts = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|p| !p.is_empty());
        let (addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
        if !matches!(kind, b"t" | b"T" | b"w" | b"W") {
            return None;
        }
        let addr = u64::from_str_radix(std::str::from_utf8(addr).ok()?, 16).ok()?;
        (addr != 0).then_some(KallsymsLine {
            addr,
            name,
            module: parts.next().is_some(),
        })
    }
}

/// Kernel symbols from `/proc/kallsyms`.
#[derive(Debug, Default)]
pub struct Kallsyms {
    symbols: SymTable,
}

impl Kallsyms {
    /// Parses kallsyms text (`addr type name [module]`), keeping text symbols.
    pub fn parse(text: &str) -> Kallsyms {
        Self::read(text.as_bytes())
    }

    /// Like [`Kallsyms::parse`], line by line from a reader; unreadable or
    /// non-UTF-8 lines are skipped.
    pub fn read(mut input: impl std::io::BufRead) -> Kallsyms {
        let mut table = SymTable::default();
        let mut line = Vec::new();
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if let Some(KallsymsLine { addr, name, .. }) = KallsymsLine::parse(&line)
                && let Ok(name) = std::str::from_utf8(name)
            {
                table.push_owned(addr, 0, name);
            }
        }
        table.finish();
        Kallsyms { symbols: table }
    }

    /// Resolves sorted, distinct kernel addresses in one streaming pass
    /// over kallsyms text, keeping no table: only the names that answer a
    /// query are copied. Returns `None` when the text has no usable
    /// addresses (e.g. `kptr_restrict`).
    ///
    /// Reading stops early once the (address-ordered) core kernel symbols
    /// pass the highest query: modules, BPF programs and trampolines sit
    /// outside the kernel image, so they cannot be nearer to an address
    /// inside it than the image's own symbols.
    pub fn resolve_sorted(
        mut input: impl std::io::BufRead,
        queries: &[u64],
    ) -> Option<Vec<Option<Symbol>>> {
        let mut near = Nearest::new(queries.to_vec());
        let mut names: Vec<Vec<u8>> = vec![Vec::new(); queries.len()];
        let (lowest, highest) = (queries.first().copied()?, queries.last().copied()?);
        let mut first: Option<u64> = None;
        let mut previous = 0u64;
        let mut in_order = true;
        let mut line = Vec::new();
        loop {
            line.clear();
            match input.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let Some(parsed) = KallsymsLine::parse(&line) else {
                continue;
            };
            let first = *first.get_or_insert(parsed.addr);
            in_order &= !parsed.module && parsed.addr >= previous;
            previous = parsed.addr;
            if in_order && parsed.addr > highest && lowest >= first {
                break;
            }
            if let Some(slot) = near.offer(parsed.addr, 0, 0) {
                names[slot].clear();
                names[slot].extend_from_slice(parsed.name);
            }
        }
        first?;
        Some(
            near.finish(KERNEL_UNSIZED_LIMIT)
                .into_iter()
                .map(|hit| {
                    let (sym, slot) = hit?;
                    let name = std::str::from_utf8(&names[slot]).ok()?;
                    Some(make_symbol(name, sym.start, false))
                })
                .collect(),
        )
    }

    /// True when the table holds no usable addresses (e.g. `kptr_restrict`).
    pub fn is_empty(&self) -> bool {
        self.symbols.syms.is_empty()
    }

    /// The kernel function containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<Symbol> {
        self.symbols.symbol(addr, KERNEL_UNSIZED_LIMIT, false)
    }
}

/// A JIT symbol map (`/tmp/perf-PID.map`: `START SIZE name` in hex).
#[derive(Debug, Default)]
pub struct PerfMap {
    symbols: SymTable,
}

impl PerfMap {
    /// Parses perf-map text; malformed lines are skipped.
    pub fn parse(text: &str) -> PerfMap {
        let mut table = SymTable::default();
        for line in text.lines() {
            let mut parts = line.splitn(3, ' ');
            let (Some(start), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let parse = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let (Some(start), Some(size)) = (parse(start), parse(size)) else {
                continue;
            };
            table.push_owned(start, size.max(1), name.trim_end());
        }
        table.finish();
        PerfMap { symbols: table }
    }

    /// The JIT function containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<Symbol> {
        self.symbols.symbol(addr, 1, false)
    }
}

/// Caches of every symbol source, shared by all outputs of a recording.
#[derive(Debug, Default)]
pub struct Symbolizer {
    binaries: HashMap<Arc<str>, Option<Binary>>,
    kernel: Option<Kallsyms>,
    /// Kernel addresses resolved by [`Symbolizer::prepare_kernel`].
    kernel_cache: HashMap<u64, Option<Symbol>>,
    kernel_warned: bool,
    jit: HashMap<u32, Option<PerfMap>>,
    /// Problems met (unreadable or stripped binaries), each reported once.
    pub warnings: Vec<String>,
    /// Resolve inlined functions and file:line from DWARF (`--inline`).
    pub inline: bool,
    /// Directory of the on-disk symbol cache (per build-id), if any.
    pub cache_dir: Option<PathBuf>,
    /// Where debug files missing locally are fetched from, if anywhere
    /// ([`Symbolizer::new`] configures it from `DEBUGINFOD_URLS`).
    pub debuginfod: Option<Debuginfod>,
}

impl Symbolizer {
    /// A symbolizer with empty caches; debug files missing locally are
    /// fetched from the debuginfod servers of `DEBUGINFOD_URLS`, if set.
    pub fn new() -> Self {
        Symbolizer {
            debuginfod: Debuginfod::from_env(),
            ..Self::default()
        }
    }

    /// Like [`Symbolizer::new`], also reading DWARF for inlined frames and
    /// lines when `inline`.
    pub fn with_inline(inline: bool) -> Self {
        Symbolizer {
            inline,
            ..Self::new()
        }
    }

    /// The parsed binary at `path`, loading it on first use; `pid` lets us
    /// reach files through `/proc/PID/root` (containers, deleted files).
    pub fn binary(&mut self, path: &Arc<str>, pid: u32) -> Option<&mut Binary> {
        if !self.binaries.contains_key(path) {
            let inline = self.inline;
            let loaded = if path.starts_with('/') {
                let direct = Binary::load_with(
                    Path::new(&**path),
                    self.debuginfod.as_mut(),
                    inline,
                    &mut self.warnings,
                );
                match direct {
                    Ok(b) => Some(b),
                    Err(first) => {
                        let via_root = format!("/proc/{pid}/root{path}");
                        match Binary::load_with(
                            Path::new(&via_root),
                            self.debuginfod.as_mut(),
                            inline,
                            &mut self.warnings,
                        ) {
                            Ok(b) => Some(b),
                            Err(_) => {
                                self.warnings.push(format!(
                                    "cannot read {first}; its frames stay [unknown]"
                                ));
                                None
                            }
                        }
                    }
                }
            } else {
                None
            };
            let mut loaded = loaded;
            if let (Some(b), Some(dir)) = (&mut loaded, &self.cache_dir) {
                b.load_cache(dir);
            }
            if let Some(b) = &loaded
                && b.stripped
            {
                let tried = if self.debuginfod.is_some() {
                    "locally or from debuginfod"
                } else {
                    "locally; set DEBUGINFOD_URLS to fetch one"
                };
                self.warnings.push(format!(
                    "{path} has no symbol table (stripped, no debug file found {tried}); \
                     its frames stay [unknown]"
                ));
            }
            self.binaries.insert(path.clone(), loaded);
        }
        self.binaries.get_mut(path).and_then(|b| b.as_mut())
    }

    /// Writes new lookups of every binary to the on-disk cache (if one is
    /// set); failures become warnings.
    pub fn save_cache(&mut self) {
        let Some(dir) = self.cache_dir.clone() else {
            return;
        };
        let mut failed = None;
        for b in self.binaries.values_mut().flatten() {
            if let Err(e) = b.save_cache(&dir) {
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            self.warnings.push(format!(
                "cannot write the symbol cache in {}: {e}",
                dir.display()
            ));
        }
    }

    /// Loads the whole kernel symbol table now and keeps it, so later kernel
    /// lookups never read `/proc/kallsyms` again. For long-running callers (the
    /// agent): a one-shot recording is cheaper with the streaming pass of
    /// [`Symbolizer::prepare_kernel`], a daemon that symbolizes every few
    /// seconds is cheaper with the table (a few MB).
    pub fn keep_kernel_table(&mut self) {
        self.load_kernel_table();
    }

    fn load_kernel_table(&mut self) {
        if self.kernel.is_none() {
            // Streamed: the file is ~10 MB of text, the table a fraction.
            let table = std::fs::File::open("/proc/kallsyms")
                .map(|f| Kallsyms::read(std::io::BufReader::new(f)))
                .unwrap_or_default();
            if table.is_empty() {
                self.warn_no_kallsyms();
            }
            self.kernel = Some(table);
        }
    }

    /// Kernel symbol for `addr`.
    pub fn kernel(&mut self, addr: u64) -> Option<Symbol> {
        if let Some(hit) = self.kernel_cache.get(&addr) {
            return hit.clone();
        }
        self.load_kernel_table();
        self.kernel.as_ref().and_then(|k| k.lookup(addr))
    }

    /// Resolves many kernel addresses at once for [`Symbolizer::kernel`]
    /// to answer from its cache: one pass over `/proc/kallsyms` that keeps
    /// only the answers, not the ~120k-symbol table.
    pub fn prepare_kernel(&mut self, addrs: &[u64]) {
        let mut queries: Vec<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.kernel_cache.contains_key(a))
            .collect();
        queries.sort_unstable();
        queries.dedup();
        if queries.is_empty() {
            return;
        }
        let found = match &self.kernel {
            Some(table) => Some(queries.iter().map(|&a| table.lookup(a)).collect()),
            None => std::fs::File::open("/proc/kallsyms").ok().and_then(|f| {
                Kallsyms::resolve_sorted(std::io::BufReader::with_capacity(64 << 10, f), &queries)
            }),
        };
        let found = found.unwrap_or_else(|| {
            self.warn_no_kallsyms();
            vec![None; queries.len()]
        });
        self.kernel_cache.extend(queries.into_iter().zip(found));
    }

    fn warn_no_kallsyms(&mut self) {
        if !std::mem::replace(&mut self.kernel_warned, true) {
            self.warnings.push(
                "/proc/kallsyms has no addresses (kptr_restrict?); kernel frames stay [unknown]"
                    .to_string(),
            );
        }
    }

    /// JIT symbol for `addr` in process `pid` from `/tmp/perf-PID.map`.
    pub fn jit(&mut self, pid: u32, addr: u64) -> Option<Symbol> {
        self.jit
            .entry(pid)
            .or_insert_with(|| {
                std::fs::read_to_string(format!("/tmp/perf-{pid}.map"))
                    .ok()
                    .map(|t| PerfMap::parse(&t))
            })
            .as_ref()
            .and_then(|m| m.lookup(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }

    #[test]
    fn kallsyms_lookup() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t do_thing\nffffffff81000200 D data\nbad line\n",
        );
        assert_eq!(&*k.lookup(0xffffffff81000150).unwrap().name, "do_thing");
        assert_eq!(&*k.lookup(0xffffffff81000000).unwrap().name, "_stext");
        assert!(k.lookup(0xffffffff80000000).is_none());
    }

    #[test]
    fn perf_map_lookup() {
        let m = PerfMap::parse("7f0000001000 20 LazyCompile:foo\n7f0000002000 10 bar baz\nzz\n");
        assert_eq!(&*m.lookup(0x7f000000101f).unwrap().name, "LazyCompile:foo");
        assert!(m.lookup(0x7f0000001020).is_none());
        assert_eq!(&*m.lookup(0x7f0000002000).unwrap().name, "bar baz");
    }

    #[test]
    fn own_binary_symbolizes_a_known_function() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mut table = crate::process::ProcessTable::default();
        let pid = std::process::id();
        assert!(table.load_from_proc(pid));
        let here = own_binary_symbolizes_a_known_function as *const () as u64;
        let map = table.processes[&pid].find(here).unwrap().clone();
        let mut s = Symbolizer::new();
        let bin = s.binary(&map.path, pid).unwrap();
        let sym = bin.lookup_offset(here - map.start + map.pgoff).unwrap();
        assert!(
            sym.name.ends_with("own_binary_symbolizes_a_known_function"),
            "{} in {}",
            sym.name,
            exe.display()
        );
        assert!(!bin.build_id.is_empty());
    }

    #[test]
    fn unreadable_binary_warns_once() {
        let mut s = Symbolizer::new();
        let p: Arc<str> = Arc::from("/nonexistent/lib.so");
        assert!(s.binary(&p, 1).is_none());
        assert!(s.binary(&p, 1).is_none());
        assert_eq!(s.warnings.len(), 1);
    }

    /// File offsets spread over a binary's executable segments: every
    /// 97th byte plus a few past the end, so hits, gaps and misses occur.
    fn probe_offsets(b: &Binary) -> Vec<u64> {
        let mut out = Vec::new();
        for &(off, size, _) in &b.segments {
            out.extend((off..off + size).step_by(97));
            out.push(off + size + 0x20000);
        }
        out.push(u64::MAX - 1);
        out
    }

    #[test]
    fn batch_lookups_match_single_lookups_on_real_binaries() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let mut libc = None;
        for line in std::fs::read_to_string("/proc/self/maps").unwrap().lines() {
            if let Some(path) = line.split_whitespace().nth(5)
                && path.contains("libc.so")
            {
                libc = Some(PathBuf::from(path));
            }
        }
        for path in std::iter::once(exe).chain(libc) {
            let mut single = Binary::load(&path).unwrap();
            let mut batch = Binary::load(&path).unwrap();
            let offsets = probe_offsets(&single);
            assert!(offsets.len() > 1000, "{}", path.display());
            batch.prepare(&offsets, false);
            assert!(batch.symbols.is_none(), "the batch builds no table");
            let mut hits = 0;
            for &o in &offsets {
                let want = single.lookup_offset(o);
                hits += usize::from(want.is_some());
                assert_eq!(batch.lookup_offset(o), want, "{} +{o:#x}", path.display());
            }
            assert!(hits > offsets.len() / 4, "{}: {hits} hits", path.display());
            // The answers came from the batch, one computation per offset.
            assert_eq!(batch.lookups, single.lookups);
        }
    }

    #[test]
    fn streaming_kallsyms_matches_the_table() {
        let text = std::fs::read("/proc/kallsyms").unwrap();
        let table = Kallsyms::read(&text[..]);
        if table.is_empty() {
            // kptr_restrict hides addresses: both must say so.
            assert!(Kallsyms::resolve_sorted(&text[..], &[1, 2]).is_none());
            return;
        }
        let addrs: Vec<u64> = table.symbols.syms.iter().map(|s| s.start).collect();
        let (lo, hi) = (addrs[0], addrs[addrs.len() - 1]);
        // Symbol starts, addresses just inside and between them, beyond
        // both ends, and an upper bound well inside the core kernel so the
        // early stop is exercised.
        let mut queries: Vec<u64> = addrs
            .iter()
            .step_by(37)
            .flat_map(|&a| [a, a + 1, a.wrapping_sub(1)])
            .chain([lo - 1, hi + 5, hi + 0x200000, 1])
            .collect();
        queries.sort_unstable();
        queries.dedup();
        for qs in [&queries[..], &queries[..queries.len() / 3]] {
            let got = Kallsyms::resolve_sorted(&text[..], qs).unwrap();
            for (&q, got) in qs.iter().zip(got) {
                assert_eq!(got, table.lookup(q), "{q:#x}");
            }
        }
    }

    #[test]
    fn nearest_prefers_the_larger_symbol_on_equal_starts_and_limits_unsized_ones() {
        let mut n = Nearest::new(vec![10, 19, 30, 200]);
        // Arrival order does not matter.
        n.offer(20, 0, 3);
        n.offer(10, 4, 1);
        n.offer(10, 8, 2);
        n.offer(10, 2, 9);
        n.offer(500, 1, 7);
        let got: Vec<Option<u32>> = n
            .finish(50)
            .into_iter()
            .map(|h| h.map(|(s, _)| s.name))
            .collect();
        assert_eq!(got, [Some(2), None, Some(3), None]);
    }
}
