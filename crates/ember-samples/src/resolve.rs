//! Symbolizing a [`Recording`] and writing it out: a pprof profile (through
//! `ember_pprof::ProfileBuilder`) and `perf script`-compatible text, plus the
//! end-of-run summary figures.

use crate::session::{Frame, Recording};
use crate::symbolize::{SourceFrame, Symbolizer};
use ember_pprof::{Profile, ProfileBuilder, SampleLabel};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::sync::Arc;

const KERNEL_MODULE: &str = "[kernel.kallsyms]";

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

/// Figures for the end-of-run summary.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Samples recorded.
    pub samples: u64,
    /// Records lost by the kernel.
    pub lost: u64,
    /// Distinct processes sampled.
    pub processes: usize,
    /// Frames (weighted by sample count) that could not be symbolized.
    pub unknown_frames: u64,
    /// All frames, weighted by sample count.
    pub total_frames: u64,
}

impl Summary {
    /// Percentage of frames that stayed `[unknown]`.
    pub fn unknown_percent(&self) -> f64 {
        if self.total_frames == 0 {
            0.0
        } else {
            100.0 * self.unknown_frames as f64 / self.total_frames as f64
        }
    }
}

/// Symbolizes frames of one recording, each distinct frame once.
pub struct Resolver<'a> {
    rec: &'a Recording,
    sym: &'a mut Symbolizer,
    cache: HashMap<Frame, FrameInfo>,
}

/// Mappings without a file behind them, as the kernel names them in MMAP2
/// records (`//anon`, `/memfd:NAME (deleted)`, `[anon:NAME]`, ...): JIT
/// code lives there, and only `/tmp/perf-PID.map` can name it.
fn is_anonymous(path: &str) -> bool {
    path == "//anon"
        || path.starts_with("/memfd:")
        || path.starts_with("[anon")
        || path.starts_with("/anon_hugepage")
        || path.starts_with("/dev/zero")
}

fn file_name(path: &str) -> &str {
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
        resolver.prepare(
            rec.stacks
                .keys()
                .chain(rec.off_cpu_stacks.keys())
                .flat_map(|k| &k.frames),
        );
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
                    let Some(m) = self.rec.maps.get(map as usize) else {
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
                let Some(m) = self.rec.maps.get(map as usize) else {
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

/// Builds the pprof profile of a recording: sample types `samples/count` and
/// `cpu/nanoseconds`, labels `pid`, `tid`, `comm`, `thread_name`.
pub fn build_profile(rec: &Recording, sym: &mut Symbolizer) -> (Profile, Summary) {
    let mut types = vec![("samples", "count"), ("cpu", "nanoseconds")];
    if rec.off_cpu {
        types.push(("off_cpu", "nanoseconds"));
    }
    if rec.wall {
        types.push(("wall", "nanoseconds"));
    }
    let mut b = ProfileBuilder::new(&types);
    let period = 1_000_000_000 / i64::from(rec.frequency.max(1));
    b.set_period(("cpu", "nanoseconds"), period);
    b.set_time(rec.start_unix_ns, rec.duration_ns);
    b.set_default_sample_type(if rec.wall {
        "wall"
    } else if rec.off_cpu {
        "off_cpu"
    } else {
        "cpu"
    });
    let mut summary = Summary {
        samples: rec.samples,
        lost: rec.lost,
        processes: rec.process_count(),
        ..Default::default()
    };

    let mut resolver = Resolver::new(rec, sym);
    // Mapping ids per recording map; the kernel gets one spanning its addresses.
    let mut mapping_ids: HashMap<u32, u64> = HashMap::new();
    let (mut kmin, mut kmax) = (u64::MAX, 0u64);
    for key in rec.stacks.keys().chain(rec.off_cpu_stacks.keys()) {
        for f in &key.frames {
            if let Frame::Kernel { addr, .. } = f {
                kmin = kmin.min(*addr);
                kmax = kmax.max(*addr);
            }
        }
    }
    // Deterministic output: walk stacks in a stable order.
    // (key, value, off-CPU?) in a stable order.
    let mut keys: Vec<_> = rec
        .stacks
        .iter()
        .map(|(k, v)| (k, v, false))
        .chain(rec.off_cpu_stacks.iter().map(|(k, v)| (k, v, true)))
        .collect();
    keys.sort_by(|a, b| {
        (a.2, a.0.pid, a.0.tid)
            .cmp(&(b.2, b.0.pid, b.0.tid))
            .then_with(|| frames_cmp(&a.0.frames, &b.0.frames))
    });
    // pprof tools treat the first mapping as the main binary: register the
    // executables (file name starting with the process name) first, then the
    // other user mappings in order of use, the kernel last.
    for exe_pass in [true, false] {
        for (key, _, _) in &keys {
            for f in key.frames.iter().rev() {
                let Frame::User { map, .. } = *f else {
                    continue;
                };
                let m = &rec.maps[map as usize];
                if exe_pass && (key.comm.is_empty() || !file_name(&m.path).starts_with(&*key.comm))
                {
                    continue;
                }
                if let std::collections::hash_map::Entry::Vacant(slot) = mapping_ids.entry(map) {
                    let build_id = resolver
                        .sym
                        .binary(&m.path, m.pid)
                        .map(|bin| bin.build_id.clone())
                        .unwrap_or_default();
                    slot.insert(b.mapping(m.start, m.end, m.pgoff, &m.path, &build_id));
                }
            }
        }
    }
    let kernel_mapping = (kmin <= kmax)
        .then(|| b.mapping(kmin & !0xfff, kmax.saturating_add(1), 0, KERNEL_MODULE, ""));
    let mut location_ids: HashMap<Frame, u64> = HashMap::new();
    let mut locs = Vec::new();
    for (key, value, off) in keys {
        locs.clear();
        for frame in &key.frames {
            let info = resolver.resolve(frame);
            summary.total_frames += value.count;
            if !info.known {
                summary.unknown_frames += value.count;
            }
            if let Some(&id) = location_ids.get(frame) {
                locs.push(id);
                continue;
            }
            let (mapping, addr) = match *frame {
                Frame::Kernel { addr, .. } => (kernel_mapping.unwrap_or(0), addr),
                Frame::User { map, addr, .. } => {
                    (mapping_ids.get(&map).copied().unwrap_or(0), addr)
                }
                Frame::Anon { addr, .. } => (0, addr),
            };
            // pprof: the innermost inlined function first, the real one last.
            let mut lines: Vec<(u64, i64)> = info
                .inlined
                .iter()
                .map(|f| {
                    (
                        b.function(&f.name, &f.system_name, &f.file),
                        i64::from(f.line),
                    )
                })
                .collect();
            lines.push((
                b.function(&info.name, &info.system_name, &info.file),
                i64::from(info.line),
            ));
            let id = b.location(mapping, addr, &lines);
            location_ids.insert(*frame, id);
            locs.push(id);
        }
        let labels = [
            SampleLabel::Num("pid", i64::from(key.pid), ""),
            SampleLabel::Num("tid", i64::from(key.tid), ""),
            SampleLabel::Str("comm", &key.comm),
            SampleLabel::Str("thread_name", &key.thread_name),
        ];
        // samples, cpu[, off_cpu][, wall]: wall is whichever time this is.
        let ns = value.period as i64;
        let mut values = if off {
            vec![0, 0, ns]
        } else {
            vec![value.count as i64, ns]
        };
        if rec.off_cpu && !off {
            values.push(0);
        }
        if rec.wall {
            values.push(ns);
        }
        b.add_sample(&locs, &values, &labels);
    }
    (b.build(), summary)
}

/// Orders stacks frame by frame (kind, then address), without allocating.
fn frames_cmp(a: &[Frame], b: &[Frame]) -> Ordering {
    let key = |f: &Frame| match *f {
        Frame::Kernel { addr, .. } => (0u8, addr),
        Frame::User { addr, .. } => (1, addr),
        Frame::Anon { addr, .. } => (2, addr),
    };
    a.iter().map(key).cmp(b.iter().map(key))
}

/// Writes `perf script`-style text (one block per sample, leaf first), which
/// `stackcollapse-perf.pl` and `ember collapse` read.
pub fn write_perf_script(
    rec: &Recording,
    sym: &mut Symbolizer,
    mut out: impl Write,
) -> io::Result<()> {
    let mut resolver = Resolver::new(rec, sym);
    let mut keys: Vec<_> = rec.stacks.iter().collect();
    keys.sort_by(|a, b| {
        (a.0.pid, a.0.tid)
            .cmp(&(b.0.pid, b.0.tid))
            .then_with(|| frames_cmp(&a.0.frames, &b.0.frames))
    });
    let mut block = Vec::new();
    for (key, value) in keys {
        block.clear();
        // perf prints the comm verbatim; an empty one would break parsers.
        let comm = if key.thread_name.is_empty() {
            "[unknown]"
        } else {
            &key.thread_name
        };
        writeln!(block, "{comm} {}/{} cpu-clock: ", key.pid, key.tid)?;
        for frame in &key.frames {
            let info = resolver.resolve(frame);
            let addr = match *frame {
                Frame::Kernel { addr, .. }
                | Frame::User { addr, .. }
                | Frame::Anon { addr, .. } => addr,
            };
            // perf script prints inlined callees as frames of their own
            // at the same address, innermost first.
            for f in info.inlined.iter() {
                writeln!(block, "\t{addr:16x} {} ({})", f.name, info.module)?;
            }
            match (info.known, info.sym_offset) {
                (true, Some(off)) => writeln!(
                    block,
                    "\t{addr:16x} {}+{off:#x} ({})",
                    info.name, info.module
                )?,
                _ => writeln!(block, "\t{addr:16x} [unknown] ({})", info.module)?,
            }
        }
        writeln!(block)?;
        for _ in 0..value.count {
            out.write_all(&block)?;
        }
    }
    out.flush()
}
