//! User-stack unwinding from CFI (`.eh_frame`/`.eh_frame_hdr`/`.debug_frame`)
//! with framehop, for binaries built without frame pointers.
//!
//! The kernel hands us the user registers and a copy of the top of the user
//! stack with each sample; we replay the CFI rules over that copy. Unwind
//! sections are read once per binary and shared (reference-counted) by the
//! per-process unwinders, which are rebuilt only when a process's mappings
//! change.

use crate::process::Process;
use framehop::Unwinder;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module};
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::symbolize::Mmap;

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
    fn load(path: &str, pid: u32) -> Option<Sections> {
        let map = Mmap::open(Path::new(path))
            .or_else(|_| Mmap::open(Path::new(&format!("/proc/{pid}/root{path}"))))
            .ok()?;
        let map = Arc::new(map);
        let file = object::File::parse(map.bytes()).ok()?;
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
        Some(out)
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

/// CFI unwinder with per-binary and per-process caches.
#[derive(Default)]
pub struct DwarfUnwinder {
    sections: HashMap<Arc<str>, Option<Arc<Sections>>>,
    processes: HashMap<u32, (u64, UnwinderX86_64<Data>)>,
    cache: CacheX86_64,
}

impl std::fmt::Debug for DwarfUnwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DwarfUnwinder")
            .field("binaries", &self.sections.len())
            .field("processes", &self.processes.len())
            .finish()
    }
}

/// Most frames we follow in one stack (like the kernel's default limit).
const MAX_FRAMES: usize = 127;

impl DwarfUnwinder {
    /// An unwinder with empty caches.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when `path` has CFI we can unwind with (loads it on first use).
    pub fn has_cfi(&mut self, path: &Arc<str>, pid: u32) -> bool {
        self.sections_for(path, pid).is_some_and(|s| s.has_cfi())
    }

    fn sections_for(&mut self, path: &Arc<str>, pid: u32) -> Option<Arc<Sections>> {
        self.sections
            .entry(path.clone())
            .or_insert_with(|| {
                if path.starts_with('/') {
                    Sections::load(path, pid).map(Arc::new)
                } else {
                    None
                }
            })
            .clone()
    }

    /// Unwinds one user stack of process `pid` from `regs` (bp, sp, ip in
    /// `perf_regs` order) and the stack copy `stack` (starting at sp).
    /// Returns frames leaf first; an empty result when registers are missing.
    pub fn unwind(
        &mut self,
        pid: u32,
        process: &Process,
        regs: &[u64],
        stack: &[u8],
    ) -> Vec<UnwoundFrame> {
        let [bp, sp, ip] = regs else {
            return Vec::new();
        };
        let (bp, sp, ip) = (*bp, *sp, *ip);
        let stale = self
            .processes
            .get(&pid)
            .is_none_or(|(version, _)| *version != process.version);
        if stale {
            let mut unwinder = UnwinderX86_64::new();
            for map in &process.maps {
                if let Some(sections) = self.sections_for(&map.path, pid)
                    && let Some(module) = sections.module(&map.path, map.start..map.end, map.pgoff)
                {
                    unwinder.add_module(module);
                }
            }
            self.processes.insert(pid, (process.version, unwinder));
        }
        let Some((_, unwinder)) = self.processes.get(&pid) else {
            return Vec::new();
        };
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let regs = UnwindRegsX86_64::new(ip, sp, bp);
        let mut iter = unwinder.iter_frames(ip, regs, &mut self.cache, &mut read_stack);
        let mut frames = Vec::new();
        while let Ok(Some(frame)) = iter.next() {
            frames.push((frame.address(), frame.is_return_address()));
            if frames.len() >= MAX_FRAMES {
                break;
            }
        }
        frames
    }

    /// Drops the unwinder of an exited process.
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }
}
