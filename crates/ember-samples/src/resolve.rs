//! Symbolizing the frames of a [`Recording`]: each distinct frame once, in batches per
//! binary, into a [`FrameInfo`] that the pprof, perf script and timeline writers share.

use crate::recording::Recording;
use crate::stack::Frame;
use crate::symbolize::{SourceFrame, Symbolizer};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The module name of kernel frames, as perf prints it.
pub(crate) const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// A symbolized frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameInfo {
    /// Display name (demangled), or `[unknown] module+0xoffset`.
    pub name: Arc<str>,
    /// Mangled name (equal to `name` when there is none).
    pub system_name: Arc<str>,
    /// Binary path, `[kernel.kallsyms]`, or the JIT map.
    pub module: Arc<str>,
    /// Offset of the address inside its symbol (for perf-script `sym+0x..`).
    pub sym_offset: Option<u64>,
    /// The name came from a symbol table.
    pub known: bool,
    /// Source file of the address inside this function (with `--inline`).
    pub file: Arc<str>,
    /// Source line of the address inside this function, 0 when unknown.
    pub line: u32,
    /// Functions inlined at this address, innermost first (with `--inline`).
    pub inlined: Arc<[SourceFrame]>,
}

/// Symbolizes frames of one recording, each distinct frame once.
pub struct Resolver<'a> {
    rec: &'a Recording,
    pub(crate) sym: &'a mut Symbolizer,
    cache: HashMap<Frame, FrameInfo>,
}

impl std::fmt::Debug for Resolver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("resolved", &self.cache.len())
            .finish_non_exhaustive()
    }
}

/// Mappings without a file behind them, as the kernel names them in MMAP2
/// records (`//anon`, `/memfd:NAME (deleted)`, `[anon:NAME]`, ...): JIT
/// code lives there, and only `/tmp/perf-PID.map` can name it.
pub(crate) fn is_anonymous(path: &str) -> bool {
    path == "//anon"
        || path.starts_with("/memfd:")
        || path.starts_with("[anon")
        || path.starts_with("/anon_hugepage")
        || path.starts_with("/dev/zero")
}

pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl<'a> Resolver<'a> {
    /// A resolver over `rec` using (and filling) the caches of `sym`; the
    /// frames of the aggregated stacks are symbolized right away, in
    /// batches (see [`Resolver::prepare`]).
    pub fn new(rec: &'a Recording, sym: &'a mut Symbolizer) -> Self {
        let mut resolver = Resolver {
            rec,
            sym,
            cache: HashMap::new(),
        };
        resolver.prepare(rec.all_stacks().flat_map(|(k, _, _)| &k.frames));
        resolver
    }

    /// Symbolizes `frames` in batches so that [`Resolver::resolve`] answers
    /// them from its cache: kernel addresses in one pass over kallsyms, and
    /// each binary's addresses in one pass over its symbol tables (DWARF in
    /// address order with `--inline`), after which the binary's tables and
    /// touched pages are dropped. Peak memory is then that of the largest
    /// binary, not the sum of all. Frames never prepared still resolve one
    /// by one. Call it with all frames you will resolve (e.g. the raw stacks
    /// of a recording) before resolving them.
    pub fn prepare<'f>(&mut self, frames: impl IntoIterator<Item = &'f Frame>) {
        let mut todo: Vec<Frame> = Vec::new();
        let mut seen: HashSet<Frame> = HashSet::new();
        let mut kernel: Vec<u64> = Vec::new();
        // Lookup offsets per binary path (with a pid to reach it through).
        let mut binaries: HashMap<Arc<str>, (u32, Vec<u64>)> = HashMap::new();
        for frame in frames {
            if self.cache.contains_key(frame) || !seen.insert(*frame) {
                continue;
            }
            todo.push(*frame);
            match *frame {
                Frame::Kernel { addr, ret } => {
                    kernel.push(if ret { addr.wrapping_sub(1) } else { addr });
                }
                Frame::User { map, addr, ret } => {
                    let Some(m) = self.rec.map(map) else {
                        continue;
                    };
                    if is_anonymous(&m.path) {
                        continue;
                    }
                    let offset = addr.wrapping_sub(m.start).wrapping_add(m.pgoff);
                    let lookup = if ret { offset.wrapping_sub(1) } else { offset };
                    let entry = binaries
                        .entry(m.path.clone())
                        .or_insert_with(|| (m.pid, Vec::new()));
                    entry.1.push(lookup);
                }
                Frame::Anon { .. } => {}
            }
        }
        drop(seen);
        if todo.is_empty() {
            return;
        }
        self.sym.prepare_kernel(&kernel);
        drop(kernel);
        let inline = self.sym.inline;
        for (path, (pid, offsets)) in binaries {
            if let Some(binary) = self.sym.binary(&path, pid) {
                binary.prepare(&offsets, inline);
            }
        }
        self.cache.reserve(todo.len());
        for frame in todo {
            let info = self.compute(&frame);
            self.cache.insert(frame, info);
        }
    }

    /// Warnings collected by the symbolizer so far.
    pub fn warnings(&self) -> &[String] {
        &self.sym.warnings
    }

    /// The symbolized form of `frame`.
    pub fn resolve(&mut self, frame: &Frame) -> FrameInfo {
        if let Some(hit) = self.cache.get(frame) {
            return hit.clone();
        }
        let info = self.compute(frame);
        self.cache.insert(*frame, info.clone());
        info
    }

    fn compute(&mut self, frame: &Frame) -> FrameInfo {
        let no_inline: Arc<[SourceFrame]> = Arc::from(Vec::new());
        let empty: Arc<str> = Arc::from("");
        let known = |name: Arc<str>, system: Arc<str>, module: Arc<str>, off: u64| FrameInfo {
            name,
            system_name: system,
            module,
            sym_offset: Some(off),
            known: true,
            file: empty.clone(),
            line: 0,
            inlined: no_inline.clone(),
        };
        let unknown = |module: Arc<str>, label: String| {
            // No parentheses: pprof tools strip "(...)" as C++ parameters,
            // which would merge every unknown frame into one.
            let name: Arc<str> = Arc::from(format!("[unknown] {label}"));
            FrameInfo {
                name: name.clone(),
                system_name: name,
                module,
                sym_offset: None,
                known: false,
                file: empty.clone(),
                line: 0,
                inlined: no_inline.clone(),
            }
        };
        match *frame {
            Frame::Kernel { addr, ret } => {
                let lookup = if ret { addr.wrapping_sub(1) } else { addr };
                match self.sym.kernel(lookup) {
                    Some(s) => known(s.name, s.system_name, KERNEL_MODULE.into(), addr - s.start),
                    None => unknown(KERNEL_MODULE.into(), format!("{KERNEL_MODULE}+{addr:#x}")),
                }
            }
            Frame::User { map, addr, ret } => {
                let Some(m) = self.rec.map(map) else {
                    return unknown("[unknown]".into(), format!("{addr:#x}"));
                };
                if is_anonymous(&m.path) {
                    // JIT code: named by the process's perf map, if any.
                    let lookup = if ret { addr.wrapping_sub(1) } else { addr };
                    return match self.sym.jit(m.pid, lookup) {
                        Some(s) => known(
                            s.name,
                            s.system_name,
                            Arc::from(format!("/tmp/perf-{}.map", m.pid)),
                            addr - s.start,
                        ),
                        None => unknown(m.path.clone(), format!("{addr:#x}")),
                    };
                }
                let offset = addr - m.start + m.pgoff;
                let lookup = if ret { offset.wrapping_sub(1) } else { offset };
                let inline = self.sym.inline;
                let found = self.sym.binary(&m.path, m.pid).and_then(|b| {
                    let vaddr = b.offset_to_vaddr(offset)?;
                    let sym = b.lookup_offset(lookup)?;
                    let frames = if inline {
                        b.source_frames(lookup)
                    } else {
                        no_inline.clone()
                    };
                    Some((sym, vaddr, frames))
                });
                match found {
                    Some((s, vaddr, frames)) => {
                        let mut info = known(
                            s.name,
                            s.system_name,
                            m.path.clone(),
                            vaddr.saturating_sub(s.start),
                        );
                        // DWARF's last frame is the symbol's own function:
                        // keep the symbol table's name (identical to the
                        // non-inline view) and take its file and line.
                        if let Some((outer, callees)) = frames.split_last() {
                            info.file = outer.file.clone();
                            info.line = outer.line;
                            info.inlined = callees.into();
                        }
                        info
                    }
                    None => unknown(
                        m.path.clone(),
                        format!("{}+{offset:#x}", file_name(&m.path)),
                    ),
                }
            }
            Frame::Anon { pid, addr, ret } => {
                let lookup = if ret { addr.wrapping_sub(1) } else { addr };
                match self.sym.jit(pid, lookup) {
                    Some(s) => known(
                        s.name,
                        s.system_name,
                        Arc::from(format!("/tmp/perf-{pid}.map")),
                        addr - s.start,
                    ),
                    None => unknown("[unknown]".into(), format!("{addr:#x}")),
                }
            }
        }
    }
}
