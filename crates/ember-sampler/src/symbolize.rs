//! Turning addresses into function names: ELF `.symtab`/`.dynsym` (with
//! split debug files found by build-id or `.gnu_debuglink`), kernel symbols
//! from `/proc/kallsyms`, JIT maps `/tmp/perf-PID.map`, and Rust/C++
//! demangling. Each binary is parsed once and each (binary, address) is
//! looked up once; anything unreadable degrades to `None` plus a warning.

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
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

#[derive(Debug, Clone)]
struct Sym {
    start: u64,
    size: u64,
    name: Arc<str>,
    system_name: Arc<str>,
}

/// Sorted symbol table with "last symbol at or below" lookup.
#[derive(Debug, Default)]
struct SymTable {
    syms: Vec<Sym>,
}

impl SymTable {
    fn finish(&mut self) {
        // Prefer sized, global-looking duplicates: keep the first per address
        // after sorting by (start, size descending).
        self.syms
            .sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
        self.syms.dedup_by_key(|s| s.start);
    }

    fn lookup(&self, addr: u64, unsized_limit: u64) -> Option<&Sym> {
        let idx = self.syms.partition_point(|s| s.start <= addr);
        let sym = self.syms.get(idx.checked_sub(1)?)?;
        let limit = if sym.size > 0 {
            sym.size
        } else {
            unsized_limit
        };
        (addr - sym.start < limit).then_some(sym)
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
    if rusty {
        if let Ok(d) = rustc_demangle::try_demangle(base) {
            return format!("{d:#}");
        }
    }
    if base.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(base.as_bytes()) {
            if let Ok(text) = sym.demangle() {
                return text;
            }
        }
    }
    if let Ok(d) = rustc_demangle::try_demangle(base) {
        return format!("{d:#}");
    }
    name.to_string()
}

/// What we know about one ELF binary.
#[derive(Debug, Default)]
pub struct Binary {
    symbols: SymTable,
    /// PT_LOAD segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
    /// Lowercase hex GNU build-id, empty when absent.
    pub build_id: String,
    /// No symbol table was found (stripped and no debug file).
    pub stripped: bool,
    cache: HashMap<u64, Option<Symbol>>,
}

fn read_symbols<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>, table: &mut SymTable) {
    let mut add = |sym: object::Symbol<'d, '_, R>| {
        if sym.kind() != SymbolKind::Text || sym.address() == 0 {
            return;
        }
        let Ok(raw) = sym.name() else { return };
        if raw.is_empty() {
            return;
        }
        // Demangling waits until a symbol is actually hit: big binaries
        // have hundreds of thousands of symbols and few are ever sampled.
        let system_name: Arc<str> = Arc::from(raw);
        let name = system_name.clone();
        table.syms.push(Sym {
            start: sym.address(),
            size: sym.size(),
            name,
            system_name,
        });
    };
    for sym in file.symbols() {
        add(sym);
    }
    for sym in file.dynamic_symbols() {
        add(sym);
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

impl Binary {
    /// Parses an ELF file (and its split debug file when it has no `.symtab`).
    pub fn load(path: &Path) -> Result<Binary, String> {
        // Read lazily through a cache: only headers, symbol and string
        // tables are touched, not the (possibly huge) code and debug data.
        let handle = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let data = object::ReadCache::new(handle);
        let file = object::File::parse(&data).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut binary = Binary::default();
        for seg in file.segments() {
            let (off, size) = seg.file_range();
            binary.segments.push((off, size, seg.address()));
        }
        if let Ok(Some(id)) = file.build_id() {
            binary.build_id = hex(id);
        }
        let has_symtab = file.symbols().next().is_some();
        read_symbols(&file, &mut binary.symbols);
        if !has_symtab {
            let link = file
                .gnu_debuglink()
                .ok()
                .flatten()
                .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
            for candidate in debug_candidates(path, &binary.build_id, link.as_deref()) {
                if candidate == path {
                    continue;
                }
                let Ok(debug_handle) = std::fs::File::open(&candidate) else {
                    continue;
                };
                let debug_data = object::ReadCache::new(debug_handle);
                if let Ok(debug) = object::File::parse(&debug_data) {
                    if debug.symbols().next().is_some() {
                        read_symbols(&debug, &mut binary.symbols);
                        break;
                    }
                }
            }
        }
        binary.symbols.finish();
        binary.stripped = binary.symbols.syms.is_empty();
        Ok(binary)
    }

    /// Converts a file offset to the ELF virtual address it is loaded at.
    pub fn offset_to_vaddr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(off, size, _)| offset >= off && offset - off < size.max(1))
            .map(|&(off, _, vaddr)| offset - off + vaddr)
    }

    /// Looks up the function containing file offset `offset`.
    pub fn lookup_offset(&mut self, offset: u64) -> Option<Symbol> {
        if let Some(hit) = self.cache.get(&offset) {
            return hit.clone();
        }
        let found = self.offset_to_vaddr(offset).and_then(|vaddr| {
            // Unsized symbols (hand-written assembly) cover at most 64 KiB,
            // so a stray address far past the last symbol stays unknown.
            self.symbols.lookup(vaddr, 0x10000).map(|s| {
                let pretty = demangle(&s.system_name);
                Symbol {
                    name: if *pretty == *s.system_name {
                        s.system_name.clone()
                    } else {
                        Arc::from(pretty)
                    },
                    system_name: s.system_name.clone(),
                    start: s.start,
                }
            })
        });
        self.cache.insert(offset, found.clone());
        found
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
        let mut table = SymTable::default();
        for line in text.lines() {
            let mut parts = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let name: Arc<str> = Arc::from(name);
            table.syms.push(Sym {
                start: addr,
                size: 0,
                name: name.clone(),
                system_name: name,
            });
        }
        table.finish();
        Kallsyms { symbols: table }
    }

    /// True when the table holds no usable addresses (e.g. `kptr_restrict`).
    pub fn is_empty(&self) -> bool {
        self.symbols.syms.is_empty()
    }

    /// The kernel function containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<Symbol> {
        self.symbols.lookup(addr, 0x100000).map(|s| Symbol {
            name: s.name.clone(),
            system_name: s.system_name.clone(),
            start: s.start,
        })
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
            let name: Arc<str> = Arc::from(name.trim_end());
            table.syms.push(Sym {
                start,
                size: size.max(1),
                name: name.clone(),
                system_name: name,
            });
        }
        table.finish();
        PerfMap { symbols: table }
    }

    /// The JIT function containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<Symbol> {
        self.symbols.lookup(addr, 1).map(|s| Symbol {
            name: s.name.clone(),
            system_name: s.system_name.clone(),
            start: s.start,
        })
    }
}

/// Caches of every symbol source, shared by all outputs of a recording.
#[derive(Debug, Default)]
pub struct Symbolizer {
    binaries: HashMap<Arc<str>, Option<Binary>>,
    kernel: Option<Kallsyms>,
    jit: HashMap<u32, Option<PerfMap>>,
    /// Problems met (unreadable or stripped binaries), each reported once.
    pub warnings: Vec<String>,
}

impl Symbolizer {
    /// A symbolizer with empty caches.
    pub fn new() -> Self {
        Self::default()
    }

    /// The parsed binary at `path`, loading it on first use; `pid` lets us
    /// reach files through `/proc/PID/root` (containers, deleted files).
    pub fn binary(&mut self, path: &Arc<str>, pid: u32) -> Option<&mut Binary> {
        if !self.binaries.contains_key(path) {
            let loaded = if path.starts_with('/') {
                let direct = Binary::load(Path::new(&**path));
                match direct {
                    Ok(b) => Some(b),
                    Err(first) => {
                        let via_root = format!("/proc/{pid}/root{path}");
                        match Binary::load(Path::new(&via_root)) {
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
            if let Some(b) = &loaded {
                if b.stripped {
                    self.warnings.push(format!(
                        "{path} has no symbol table (stripped, no debug file found); its frames stay [unknown]"
                    ));
                }
            }
            self.binaries.insert(path.clone(), loaded);
        }
        self.binaries.get_mut(path).and_then(|b| b.as_mut())
    }

    /// Kernel symbol for `addr`.
    pub fn kernel(&mut self, addr: u64) -> Option<Symbol> {
        if self.kernel.is_none() {
            let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
            let table = Kallsyms::parse(&text);
            if table.is_empty() {
                self.warnings.push(
                    "/proc/kallsyms has no addresses (kptr_restrict?); kernel frames stay [unknown]"
                        .to_string(),
                );
            }
            self.kernel = Some(table);
        }
        self.kernel.as_ref().and_then(|k| k.lookup(addr))
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
}
