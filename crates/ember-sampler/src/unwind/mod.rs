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
use sections::{Data, Sections};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

mod auto;
mod sections;

pub use ember_samples::{AutoChoice, Method};

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
    /// The kernel's vDSO (`[vdso]`), one image for every process of the host.
    Vdso,
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

/// The 8 bytes at `addr` of the stack copy that starts at `sp`.
fn read_u64(stack: &[u8], sp: u64, addr: u64) -> Option<u64> {
    let off = usize::try_from(addr.checked_sub(sp)?).ok()?;
    let bytes = stack.get(off..off.checked_add(8)?)?;
    Some(u64::from_ne_bytes(bytes.try_into().ok()?))
}

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
        self.clock += 1;
        let now = self.clock;
        if **path == *"[vdso]" {
            let id = BinaryId::Vdso;
            if let Some(entry) = self.binaries.get_mut(&id) {
                entry.last_used = now;
            } else {
                self.loads += 1;
                let loaded = Sections::load_vdso();
                self.insert(&id, loaded, path, now);
            }
            return Some(id);
        }
        let (file, meta) = resolve(path, pid)?;
        let key = FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        };
        if let Some(id) = self.files.get(&key)
            && let Some(entry) = self.binaries.get_mut(id)
        {
            entry.last_used = now;
            return Some(id.clone());
        }
        self.loads += 1;
        let loaded = Sections::load(&file);
        let id = match loaded.as_ref().and_then(|(_, b)| b.clone()) {
            Some(b) => BinaryId::BuildId(b),
            None => BinaryId::File(key),
        };
        self.files.insert(key, id.clone());
        if let Some(entry) = self.binaries.get_mut(&id) {
            // Same build-id at another path or in another container.
            entry.last_used = now;
            return Some(id);
        }
        self.insert(&id, loaded, path, now);
        Some(id)
    }

    /// Caches what was loaded for a binary first seen at `path` (nothing usable when
    /// `loaded` is `None`, so a file that is not ELF is not read again).
    fn insert(
        &mut self,
        id: &BinaryId,
        loaded: Option<(Sections, Option<Vec<u8>>)>,
        path: &Arc<str>,
        now: u64,
    ) {
        let (sections, build_id) = match loaded {
            Some((s, b)) => (Some(Arc::new(s)), b),
            None => (None, None),
        };
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
        self.evict(id);
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
        let mut frames = vec![(start.pc, false)];
        self.cfi_from(
            pid,
            framehop::FrameAddress::InstructionPointer(start.pc),
            arch::unwind_regs(&start),
            start.sp,
            stack,
            &mut frames,
        );
        frames
    }

    /// Follows CFI from the frame at `address` (its registers in `regs`) outwards, pushing
    /// the callers it finds onto `frames` (up to [`MAX_FRAMES`] in all). `stack` is the copy
    /// of the user stack from `sp`, the sampled stack pointer. A frame outside every known
    /// module falls back to its frame pointer (framehop's rule): JIT code.
    fn cfi_from(
        &mut self,
        pid: u32,
        mut address: framehop::FrameAddress,
        mut regs: arch::UnwindRegs,
        sp: u64,
        stack: &[u8],
        frames: &mut Vec<UnwoundFrame>,
    ) {
        let Some(ProcessUnwinder { unwinder, .. }) = self.processes.get(&pid) else {
            return;
        };
        let mut read_stack = |addr: u64| read_u64(stack, sp, addr).ok_or(());
        while frames.len() < MAX_FRAMES {
            // Ok(None) is a root (CFI says there is no caller: `_start`, a thread's
            // `clone3`); an error is a stack copy too short or a rule we cannot follow.
            match unwinder.unwind_frame(address, &mut regs, &mut self.cache, &mut read_stack) {
                Ok(Some(ret)) => match framehop::FrameAddress::from_return_address(ret) {
                    Some(next) => {
                        frames.push((ret, true));
                        address = next;
                    }
                    None => break,
                },
                Ok(None) | Err(_) => break,
            }
        }
    }

    /// Drops the unwinder of an exited process.
    pub fn forget(&mut self, pid: u32) {
        self.processes.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
        // Removed with its content when the guard drops, at the end of the test.
        let dir = tempfile::tempdir().expect("temp dir");
        let dir = dir.path();
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
        std::fs::remove_dir_all(dir).ok();
        assert!(
            matches!(a, BinaryId::BuildId(_)),
            "test binaries carry a build-id"
        );
        assert_eq!(a, b);
        assert_eq!(u.cache_stats(), (1, 2));
    }
}
