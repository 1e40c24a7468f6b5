//! Symbol tables: sorted address ranges whose names live in an owned arena or in a mapped
//! file's string table, nearest-symbol lookups, and demangling.

use super::Symbol;
use super::binary::{c_str, make_symbol};
use crate::mmap::Mmap;
use std::borrow::Cow;
use std::sync::Arc;

/// Where symbol names live: an owned arena (kallsyms, JIT maps) or a
/// mapped ELF file (names stay in its string table).
#[derive(Debug)]
pub(super) enum NameSource {
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
pub(super) struct Sym {
    pub(super) start: u64,
    pub(super) size: u32,
    /// Byte offset of the name; the top bit selects source 0 or 1.
    pub(super) name: u32,
}

pub(super) const SOURCE_BIT: u32 = 1 << 31;

/// Sorted symbol table with "last symbol at or below" lookup.
#[derive(Debug, Default)]
pub(super) struct SymTable {
    pub(super) syms: Vec<Sym>,
    /// At most two: the binary (or an arena) and its split debug file.
    pub(super) sources: Vec<NameSource>,
}

impl SymTable {
    /// Adds a symbol whose NUL-terminated name starts at `name_off` in
    /// source `source` (0 or 1); names past 2 GiB are not representable.
    pub(super) fn push(&mut self, start: u64, size: u64, source: usize, name_off: usize) {
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
    pub(super) fn push_owned(&mut self, start: u64, size: u64, name: &str) {
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

    pub(super) fn finish(&mut self) {
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

    pub(super) fn name(&self, sym: &Sym) -> Cow<'_, str> {
        let source = usize::from(sym.name & SOURCE_BIT != 0);
        let off = (sym.name & !SOURCE_BIT) as usize;
        let bytes = self.sources.get(source).map_or(&[][..], |s| s.bytes());
        String::from_utf8_lossy(c_str(bytes, off))
    }

    pub(super) fn lookup(&self, addr: u64, unsized_limit: u64) -> Option<&Sym> {
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
    pub(super) fn symbol(&self, addr: u64, unsized_limit: u64, demangled: bool) -> Option<Symbol> {
        let sym = self.lookup(addr, unsized_limit)?;
        let raw = self.name(sym);
        (!raw.is_empty()).then(|| make_symbol(&raw, sym.start, demangled))
    }
}

/// Demangles Rust (legacy and v0) and C++ (Itanium) names; others pass through.
///
/// C++ names read as `c++filt` prints them: through GNU libiberty (the code `c++filt` runs)
/// where the build linked it, else through `cpp_demangle` (see `build.rs`).
pub fn demangle(name: &str) -> String {
    let base = name.split_once('@').map_or(name, |(b, _)| b);
    let rusty = base.starts_with("_R") || is_rust_legacy(base);
    if rusty && let Ok(d) = rustc_demangle::try_demangle(base) {
        return format!("{d:#}");
    }
    if base.starts_with("_Z")
        && let Some(text) = demangle_cxx(base)
    {
        return text;
    }
    if let Ok(d) = rustc_demangle::try_demangle(base) {
        return format!("{d:#}");
    }
    name.to_string()
}

/// A legacy Rust symbol: `_ZN`, its path, and the hash element `17h` + 16 hex digits + `E`
/// (before any `.llvm.`/`.cold` suffix). The path itself may hold dots
/// (`call_once$u7b$$u7b$vtable.shim$u7d$$u7d$`), so the suffix cannot be cut at the first
/// dot: that sent such names to the C++ demangler, which printed them mangled-looking.
fn is_rust_legacy(name: &str) -> bool {
    name.starts_with("_ZN")
        && name.as_bytes().windows(20).any(|w| {
            w.starts_with(b"17h") && w[3..19].iter().all(u8::is_ascii_hexdigit) && w[19] == b'E'
        })
}

#[cfg(ember_libiberty)]
fn demangle_cxx(name: &str) -> Option<String> {
    super::libiberty::demangle(name)
}

#[cfg(not(ember_libiberty))]
fn demangle_cxx(name: &str) -> Option<String> {
    cpp_demangle::Symbol::new(name.as_bytes())
        .ok()?
        .demangle()
        .ok()
}

/// Which C++ demangler this build uses: `"libiberty"` (identical to `c++filt`) or
/// `"cpp_demangle"`.
pub fn cxx_demangler() -> &'static str {
    if cfg!(ember_libiberty) {
        "libiberty"
    } else {
        "cpp_demangle"
    }
}

/// How far an unsized symbol (hand-written assembly) reaches: at most
/// 64 KiB, so a stray address far past the last symbol stays unknown.
pub(crate) const UNSIZED_LIMIT: u64 = 0x10000;
