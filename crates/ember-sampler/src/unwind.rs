//! User-stack unwinding from CFI (`.eh_frame`/`.eh_frame_hdr`/`.debug_frame`)
//! with framehop, for binaries built without frame pointers, and the
//! per-binary choice between that and the kernel's frame-pointer walk for
//! `--call-graph auto`.
//!
//! The kernel hands us the user registers and a copy of the top of the user
//! stack with each sample; we replay the CFI rules over that copy. Unwind
//! sections are read once per *binary identity* (build-id, else the file's
//! device, inode, size and mtime) and shared by every process mapping that
//! binary; the per-process unwinders are rebuilt only when a process's
//! mappings change. The cache of binaries is bounded (least recently used
//! entries go first), so a host sampled for days keeps a fixed footprint.

use crate::arch;
use crate::process::Process;
use framehop::Unwinder;
use framehop::{ExplicitModuleSectionInfo, Module};
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::HashMap;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use ember_samples::mmap::Mmap;
pub use ember_samples::{AutoChoice, Method};

/// A section of a mapped binary: unwinding reads the few pages it needs
/// straight from the page cache instead of copying whole sections (a big
/// shared library has megabytes of `.eh_frame`).
#[derive(Clone)]
struct Data {
    map: Arc<Mmap>,
    range: Range<usize>,
}

impl std::ops::Deref for Data {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.map.bytes().get(self.range.clone()).unwrap_or_default()
    }
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Data({:?})", self.range)
    }
}

/// Unwind-relevant sections of one binary.
#[derive(Debug, Default)]
struct Sections {
    /// PT_LOAD segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
    text_svma: Option<Range<u64>>,
    eh_frame: Option<(Range<u64>, Data)>,
    eh_frame_hdr: Option<(Range<u64>, Data)>,
    got: Option<Range<u64>>,
    debug_frame: Option<Data>,
}

impl Sections {
    /// Loads the unwind sections of the file at `path` (already resolved)
    /// and its build-id.
    fn load(path: &Path) -> Option<(Sections, Option<Vec<u8>>)> {
        let map = Arc::new(Mmap::open(path).ok()?);
        let file = object::File::parse(map.bytes()).ok()?;
        let build_id = file
            .build_id()
            .ok()
            .flatten()
            .filter(|id| !id.is_empty())
            .map(<[u8]>::to_vec);
        let section = |name: &str| -> Option<(Range<u64>, Data)> {
            let s = file.section_by_name(name)?;
            // Compressed sections (some .debug_frame) cannot be used in place.
            let range = s.compressed_file_range().ok()?;
            if range.format != object::CompressionFormat::None {
                return None;
            }
            let start = usize::try_from(range.offset).ok()?;
            let end = start.checked_add(usize::try_from(range.compressed_size).ok()?)?;
            if end > map.bytes().len() {
                return None;
            }
            let data = Data {
                map: map.clone(),
                range: start..end,
            };
            Some((s.address()..s.address() + s.size(), data))
        };
        // .text is left out on purpose: it can be huge and CFI alone
        // describes prologues and epilogues of compiler-generated code.
        let text_svma = file
            .section_by_name(".text")
            .map(|s| s.address()..s.address() + s.size());
        let mut out = Sections {
            text_svma,
            eh_frame: section(".eh_frame"),
            eh_frame_hdr: section(".eh_frame_hdr"),
            got: section(".got").map(|(r, _)| r),
            debug_frame: section(".debug_frame").map(|(_, d)| d),
            ..Default::default()
        };
        for seg in file.segments() {
            let (off, size) = seg.file_range();
            out.segments.push((off, size, seg.address()));
        }
        Some((out, build_id))
    }

    /// Bytes of unwind data this entry keeps mapped (what its pages can
    /// add to RSS once touched).
    fn mapped_bytes(&self) -> u64 {
        let len = |d: &Data| d.range.len() as u64;
        self.eh_frame.as_ref().map_or(0, |(_, d)| len(d))
            + self.eh_frame_hdr.as_ref().map_or(0, |(_, d)| len(d))
            + self.debug_frame.as_ref().map_or(0, len)
    }

    fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    fn offset_to_vaddr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(off, size, _)| offset >= off && offset - off < size.max(1))
            .map(|&(off, _, vaddr)| offset - off + vaddr)
    }

    fn module(&self, name: &str, avma: Range<u64>, pgoff: u64) -> Option<Module<Data>> {
        let svma = self.offset_to_vaddr(pgoff)?;
        let base_avma = avma.start.checked_sub(svma)?;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text_svma.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma: self.eh_frame.as_ref().map(|(r, _)| r.clone()),
            eh_frame: self.eh_frame.as_ref().map(|(_, d)| d.clone()),
            eh_frame_hdr_svma: self.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
            eh_frame_hdr: self.eh_frame_hdr.as_ref().map(|(_, d)| d.clone()),
            debug_frame: self.debug_frame.clone(),
            text: None,
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        };
        Some(Module::new(name.to_string(), avma, base_avma, info))
    }
}

/// A frame found by unwinding: address and whether it is a return address.
pub type UnwoundFrame = (u64, bool);

/// Identity of a binary: its build-id, else its file (device, inode, size,
/// mtime) so that a binary replaced on disk is never mistaken for the old one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BinaryId {
    /// GNU build-id bytes.
    BuildId(Vec<u8>),
    /// No build-id: the file itself.
    File(FileKey),
}

/// A file as `stat` identifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
}

/// `auto` state of one binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Auto {
    /// Still comparing: samples seen, and in how many the frame-pointer walk
    /// recovered exactly the frames CFI did inside this binary.
    Deciding { seen: u32, fp_agreed: u32 },
    /// Settled.
    Decided(Method),
}

/// Samples (with the leaf in a binary) compared before deciding.
pub const AUTO_DECISION_SAMPLES: u32 = 16;
/// Share of those in which the frame-pointer walk must match CFI for the
/// binary to use frame pointers from then on.
const AUTO_FP_AGREEMENT: f64 = 0.8;

struct Cached {
    sections: Option<Arc<Sections>>,
    /// First path seen, for reports.
    path: Arc<str>,
    build_id: Option<Vec<u8>>,
    auto: Auto,
    reason: String,
    /// Samples whose leaf was in this binary (under `auto`).
    samples: u64,
    last_used: u64,
    bytes: u64,
}

/// Limits of the per-binary cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Most binaries kept.
    pub max_binaries: usize,
    /// Most bytes of unwind sections kept mapped by the cache.
    pub max_bytes: u64,
}

impl Default for CacheLimits {
    /// 512 binaries, 256 MiB of unwind sections (mapped, paged in on use).
    fn default() -> Self {
        CacheLimits {
            max_binaries: 512,
            max_bytes: 256 << 20,
        }
    }
}

/// The unwinder of one process for one state of its mappings, and the
/// binary behind each mapping (so `auto` needs no `stat` per sample).
struct ProcessUnwinder {
    version: u64,
    unwinder: arch::Unwinder<Data>,
    /// (start, end, binary) per mapping, sorted by start.
    binaries: Vec<(u64, u64, Option<BinaryId>)>,
}

impl ProcessUnwinder {
    fn binary_at(&self, addr: u64) -> Option<&BinaryId> {
        let i = self
            .binaries
            .partition_point(|&(start, _, _)| start <= addr);
        let (_, end, id) = self.binaries.get(i.checked_sub(1)?)?;
        (addr < *end).then_some(id.as_ref()?)
    }
}

/// CFI unwinder with per-binary (shared across processes) and
/// per-process caches.
pub struct DwarfUnwinder {
    binaries: HashMap<BinaryId, Cached>,
    /// Which binary a file is (stat → identity), so identical files at
    /// different paths (containers) share one entry.
    files: HashMap<FileKey, BinaryId>,
    processes: HashMap<u32, ProcessUnwinder>,
    cache: arch::Cache,
    limits: CacheLimits,
    clock: u64,
    bytes: u64,
    /// Binaries loaded (cache misses), for tests and diagnostics.
    loads: u64,
}

impl Default for DwarfUnwinder {
    fn default() -> Self {
        Self::with_limits(CacheLimits::default())
    }
}

impl std::fmt::Debug for DwarfUnwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DwarfUnwinder")
            .field("binaries", &self.binaries.len())
            .field("processes", &self.processes.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// Most frames we follow in one stack (like the kernel's default limit).
const MAX_FRAMES: usize = 127;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Resolves a mapped path to a file we can open: as named, else through
/// the process's root (containers).
fn resolve(path: &str, pid: u32) -> Option<(std::path::PathBuf, std::fs::Metadata)> {
    if !path.starts_with('/') {
        return None;
    }
    let direct = std::path::PathBuf::from(path);
    if let Ok(meta) = std::fs::metadata(&direct) {
        return Some((direct, meta));
    }
    let rooted = std::path::PathBuf::from(format!("/proc/{pid}/root{path}"));
    let meta = std::fs::metadata(&rooted).ok()?;
    Some((rooted, meta))
}

impl DwarfUnwinder {
    /// An unwinder with empty caches and default limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// An unwinder whose binary cache stays within `limits`.
    pub fn with_limits(limits: CacheLimits) -> Self {
        DwarfUnwinder {
            binaries: HashMap::new(),
            files: HashMap::new(),
            processes: HashMap::new(),
            cache: arch::Cache::new(),
            limits,
            clock: 0,
            bytes: 0,
            loads: 0,
        }
    }

    /// Binaries currently cached, and how many were loaded in total.
    pub fn cache_stats(&self) -> (usize, u64) {
        (self.binaries.len(), self.loads)
    }

    /// True when `path` has CFI we can unwind with (loads it on first use).
    pub fn has_cfi(&mut self, path: &Arc<str>, pid: u32) -> bool {
        self.binary_for(path, pid)
            .and_then(|id| self.binaries.get(&id))
            .and_then(|c| c.sections.as_ref())
            .is_some_and(|s| s.has_cfi())
    }

    /// The identity of the binary mapped from `path` in `pid`, loading its
    /// sections on first sight.
    fn binary_for(&mut self, path: &Arc<str>, pid: u32) -> Option<BinaryId> {
        let (file, meta) = resolve(path, pid)?;
        let key = FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        };
        self.clock += 1;
        let now = self.clock;
        if let Some(id) = self.files.get(&key)
            && let Some(entry) = self.binaries.get_mut(id)
        {
            entry.last_used = now;
            return Some(id.clone());
        }
        self.loads += 1;
        let loaded = Sections::load(&file);
        let build_id = loaded.as_ref().and_then(|(_, b)| b.clone());
        let id = match &build_id {
            Some(b) => BinaryId::BuildId(b.clone()),
            None => BinaryId::File(key),
        };
        self.files.insert(key, id.clone());
        if let Some(entry) = self.binaries.get_mut(&id) {
            // Same build-id at another path or in another container.
            entry.last_used = now;
            return Some(id);
        }
        let sections = loaded.map(|(s, _)| Arc::new(s));
        let bytes = sections.as_ref().map_or(0, |s| s.mapped_bytes());
        let no_cfi = !sections.as_ref().is_some_and(|s| s.has_cfi());
        self.binaries.insert(
            id.clone(),
            Cached {
                sections,
                path: path.clone(),
                build_id,
                auto: if no_cfi {
                    Auto::Decided(Method::FramePointer)
                } else {
                    Auto::Deciding {
                        seen: 0,
                        fp_agreed: 0,
                    }
                },
                reason: if no_cfi {
                    "no usable CFI".into()
                } else {
                    String::new()
                },
                samples: 0,
                last_used: now,
                bytes,
            },
        );
        self.bytes += bytes;
        self.evict(&id);
        Some(id)
    }

    /// Drops least recently used binaries beyond the limits (never `keep`).
    /// Processes already unwinding with an evicted binary keep their own
    /// references until their mappings change.
    fn evict(&mut self, keep: &BinaryId) {
        while self.binaries.len() > self.limits.max_binaries || self.bytes > self.limits.max_bytes {
            let Some(victim) = self
                .binaries
                .iter()
                .filter(|(id, _)| *id != keep)
                .min_by_key(|(_, c)| c.last_used)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            if let Some(c) = self.binaries.remove(&victim) {
                self.bytes -= c.bytes;
            }
            self.files.retain(|_, id| *id != victim);
        }
    }

    /// (Re)builds the unwinder of `pid` when its mappings changed.
    fn refresh_process(&mut self, pid: u32, process: &Process) {
        let fresh = self
            .processes
            .get(&pid)
            .is_some_and(|p| p.version == process.version);
        if fresh {
            return;
        }
        let mut unwinder = arch::Unwinder::new();
        let mut binaries = Vec::with_capacity(process.maps.len());
        for map in &process.maps {
            let id = self.binary_for(&map.path, pid);
            if let Some(sections) = id
                .as_ref()
                .and_then(|id| self.binaries.get(id))
                .and_then(|c| c.sections.clone())
                && let Some(module) = sections.module(&map.path, map.start..map.end, map.pgoff)
            {
                unwinder.add_module(module);
            }
            binaries.push((map.start, map.end, id));
        }
        self.processes.insert(
            pid,
            ProcessUnwinder {
                version: process.version,
                unwinder,
                binaries,
            },
        );
    }

    /// Unwinds one user stack of process `pid` from `regs` (in
    /// [`arch::USER_REGS_MASK`] order) and the stack copy `stack` (starting
    /// at the stack pointer). Returns frames leaf first; an empty result
    /// when registers are missing.
    pub fn unwind(
        &mut self,
        pid: u32,
        process: &Process,
        regs: &[u64],
        stack: &[u8],
    ) -> Vec<UnwoundFrame> {
        let Some(start) = arch::start_regs(regs) else {
            return Vec::new();
        };
        self.refresh_process(pid, process);
        let Some(ProcessUnwinder { unwinder, .. }) = self.processes.get(&pid) else {
            return Vec::new();
        };
        let sp = start.sp;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut iter = unwinder.iter_frames(
            start.pc,
            arch::unwind_regs(&start),
            &mut self.cache,
            &mut read_stack,
        );
        let mut frames = Vec::new();
        while let Ok(Some(frame)) = iter.next() {
            frames.push((frame.address(), frame.is_return_address()));
            if frames.len() >= MAX_FRAMES {
                break;
            }
        }
        frames
    }

    /// `--call-graph auto` for one sample: the frame-pointer walk `fp` (from
    /// the kernel) or CFI, by the rule of the binary the sampled user
    /// instruction is in. The first [`AUTO_DECISION_SAMPLES`] samples of a
    /// binary compute both, use whichever got further, and count whether
    /// the frame-pointer walk found exactly CFI's frames for the run of
    /// frames inside that binary; frame pointers are kept for the binary
    /// when they matched in at least 80% of them, CFI otherwise. A binary
    /// without CFI uses frame pointers at once; an address outside any
    /// binary (JIT) is decided per sample.
    pub fn unwind_auto(
        &mut self,
        pid: u32,
        process: &Process,
        regs: &[u64],
        stack: &[u8],
        fp: Vec<UnwoundFrame>,
    ) -> Vec<UnwoundFrame> {
        let leaf = arch::start_regs(regs).map(|r| r.pc);
        let map = leaf.and_then(|pc| process.find(pc));
        self.refresh_process(pid, process);
        let id = leaf.and_then(|pc| self.processes.get(&pid)?.binary_at(pc).cloned());
        let state = id
            .as_ref()
            .and_then(|id| self.binaries.get_mut(id))
            .map(|c| {
                c.samples += 1;
                c.auto
            });
        match state {
            Some(Auto::Decided(Method::FramePointer)) => fp,
            Some(Auto::Decided(Method::Cfi)) => self.unwind(pid, process, regs, stack),
            other => {
                let cfi = self.unwind(pid, process, regs, stack);
                if let (Some(Auto::Deciding { seen, fp_agreed }), Some(id), Some(map)) =
                    (other, id, map)
                {
                    let inside = |frames: &[UnwoundFrame]| -> Vec<u64> {
                        frames
                            .iter()
                            .take_while(|(addr, _)| {
                                process.find(*addr).is_some_and(|m| m.path == map.path)
                            })
                            .map(|&(addr, _)| addr)
                            .collect()
                    };
                    let agreed = !cfi.is_empty() && inside(&fp) == inside(&cfi);
                    let (seen, fp_agreed) = (seen + 1, fp_agreed + u32::from(agreed));
                    if let Some(entry) = self.binaries.get_mut(&id) {
                        entry.auto = if seen >= AUTO_DECISION_SAMPLES {
                            let fp_ok = f64::from(fp_agreed) >= AUTO_FP_AGREEMENT * f64::from(seen);
                            entry.reason =
                                format!("frame pointers matched CFI in {fp_agreed}/{seen} samples");
                            Auto::Decided(if fp_ok {
                                Method::FramePointer
                            } else {
                                Method::Cfi
                            })
                        } else {
                            Auto::Deciding { seen, fp_agreed }
                        };
                    }
                }
                if fp.len() > cfi.len() { fp } else { cfi }
            }
        }
    }

    /// The decisions `auto` has taken so far, by binary (sorted by path).
    pub fn auto_choices(&self) -> Vec<AutoChoice> {
        let mut out: Vec<AutoChoice> = self
            .binaries
            .values()
            .filter(|c| c.samples > 0)
            .filter_map(|c| match c.auto {
                Auto::Decided(method) => Some(AutoChoice {
                    path: c.path.clone(),
                    build_id: c.build_id.as_deref().map(hex).unwrap_or_default(),
                    method,
                    reason: c.reason.clone(),
                }),
                Auto::Deciding { .. } => None,
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// Drops the unwinder of an exited process.
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binaries() -> Vec<Arc<str>> {
        let exe = std::env::current_exe().unwrap();
        let mut out: Vec<Arc<str>> = vec![Arc::from(exe.to_str().unwrap())];
        for p in [
            "/bin/sh",
            "/usr/bin/env",
            "/usr/bin/gcc",
            "/bin/ls",
            "/usr/bin/sort",
        ] {
            if Path::new(p).exists() {
                out.push(Arc::from(p));
            }
        }
        out
    }

    #[test]
    fn binary_cache_is_bounded_and_keyed_by_identity() {
        let bins = binaries();
        assert!(bins.len() >= 4, "{bins:?}");
        let pid = std::process::id();
        let mut u = DwarfUnwinder::with_limits(CacheLimits {
            max_binaries: 2,
            max_bytes: u64::MAX,
        });
        for b in &bins {
            assert!(u.has_cfi(b, pid), "{b} has .eh_frame");
        }
        let (cached, loads) = u.cache_stats();
        assert_eq!(cached, 2);
        assert_eq!(loads, bins.len() as u64);
        // The most recent ones are hits; the first was evicted and reloads.
        u.has_cfi(&bins[bins.len() - 1], pid);
        assert_eq!(u.cache_stats().1, bins.len() as u64);
        u.has_cfi(&bins[0], pid);
        assert_eq!(u.cache_stats().1, bins.len() as u64 + 1);

        // A byte budget smaller than any binary keeps only the latest.
        let mut u = DwarfUnwinder::with_limits(CacheLimits {
            max_binaries: 100,
            max_bytes: 1,
        });
        for b in &bins {
            u.has_cfi(b, pid);
        }
        assert_eq!(u.cache_stats().0, 1);
    }

    #[test]
    fn same_build_id_at_another_path_shares_one_entry() {
        let exe = std::env::current_exe().unwrap();
        let dir = std::env::temp_dir().join(format!("ember-unwind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("copy");
        std::fs::copy(&exe, &copy).unwrap();
        let pid = std::process::id();
        let mut u = DwarfUnwinder::new();
        let a = u
            .binary_for(&Arc::from(exe.to_str().unwrap()), pid)
            .unwrap();
        let b = u
            .binary_for(&Arc::from(copy.to_str().unwrap()), pid)
            .unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert!(
            matches!(a, BinaryId::BuildId(_)),
            "test binaries carry a build-id"
        );
        assert_eq!(a, b);
        assert_eq!(u.cache_stats(), (1, 2));
    }
}
