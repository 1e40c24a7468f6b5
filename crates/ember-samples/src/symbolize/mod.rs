//! Turning addresses into function names: ELF `.symtab`/`.dynsym` (with
//! split debug files found by build-id or `.gnu_debuglink`), DWARF inlined
//! frames and lines (addr2line), kernel symbols from `/proc/kallsyms`, the
//! vDSO (from this process's own copy), JIT maps `/tmp/perf-PID.map`, and
//! Rust/C++ demangling. Each binary is opened
//! once (headers first, symbol tables on the first miss, DWARF on the first
//! inline lookup) and each (binary, address) is looked up once per run; an
//! optional on-disk cache keyed by build-id carries lookups across runs.
//! Anything unreadable degrades to `None` plus a warning.

use crate::debuginfod::Debuginfod;
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

mod binary;
mod disk_cache;
mod dwarf;
mod jit;
mod kernel;
#[cfg(ember_libiberty)]
mod libiberty;
mod table;
#[cfg(test)]
mod tests;
mod vdso;

pub use binary::Binary;
pub use disk_cache::default_cache_dir;
pub use jit::PerfMap;
pub use kernel::Kallsyms;
pub use table::{cxx_demangler, demangle};
pub use vdso::{VDSO_PATH, vdso_image};

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
            // `//anon`, `/memfd:...`: JIT code with no file (named by perf maps, not here);
            // trying to open them only produced a misleading "cannot read //anon" warning.
            let loaded = if crate::resolve::is_anonymous(path) {
                None
            } else if path.starts_with('/') {
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
            } else if **path == *VDSO_PATH {
                let image = vdso_image().map(Arc::new);
                image.and_then(|map| {
                    let name = Path::new(VDSO_PATH);
                    let found = Binary::from_map(
                        map,
                        name,
                        self.debuginfod.as_mut(),
                        inline,
                        &mut self.warnings,
                    );
                    found
                        .map_err(|e| self.warnings.push(format!("cannot read the vDSO: {e}")))
                        .ok()
                })
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

    /// The GNU build-id (lowercase hex) of the binary at `path` as process `pid` sees it,
    /// empty when it has none or cannot be read.
    pub fn build_id(&mut self, path: &str, pid: u32) -> String {
        let path: Arc<str> = Arc::from(path);
        self.binary(&path, pid)
            .map(|b| b.build_id.clone())
            .unwrap_or_default()
    }

    /// Resolves every kernel address of `rec` in one pass over the kernel symbols, so that
    /// per-process profiles built from its parts find them cached.
    pub fn prepare_kernel_of(&mut self, rec: &crate::Recording) {
        let kernel: Vec<u64> = rec
            .all_stacks()
            .flat_map(|(k, _, _)| &k.frames)
            .filter_map(|frame| match *frame {
                crate::Frame::Kernel { addr, ret } => {
                    Some(if ret { addr.wrapping_sub(1) } else { addr })
                }
                _ => None,
            })
            .collect();
        self.prepare_kernel(&kernel);
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
