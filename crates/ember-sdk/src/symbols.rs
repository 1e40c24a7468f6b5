//! Symbolization of the process's own addresses, outside the signal handler: the mappings of
//! `/proc/self/maps`, and per binary `ember_samples::symbolize::Binary` (ELF `.symtab` and
//! `.dynsym`, split debug files, DWARF inlined frames and lines).
//!
//! What stays resident is small: a binary is loaded only for addresses never seen before
//! (memory-mapped, pages handed back after each batch), its symbol table and DWARF context
//! are built per chunk of nearby addresses and dropped after it (`Binary::prepare`), and the
//! binary itself is dropped once the answers are copied into a compact cache (interned
//! strings, 12 bytes per frame, in a few large buffers); then free heap pages go back to the kernel (`malloc_trim`,
//! glibc). The cache is shared by every profile of the process.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ember_pprof::ProfileBuilder;
use ember_samples::symbolize::Binary;

use crate::signal;

/// One executable mapping of the process.
#[derive(Debug, Clone)]
pub(crate) struct Mapping {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) offset: u64,
    pub(crate) path: Arc<str>,
}

/// The executable file mappings of this process, sorted by start.
pub(crate) fn executable_mappings() -> Vec<Mapping> {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(2).unwrap_or("");
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        out.push(Mapping {
            start,
            end,
            offset,
            path: path.into(),
        });
    }
    out.sort_by_key(|m| m.start);
    out
}

/// Readable, writable private anonymous mappings (thread stacks live in them) and the main
/// thread's `[stack]`, for the handler's walk bounds.
pub(crate) fn stack_ranges() -> Vec<(usize, usize)> {
    let text = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(3).unwrap_or("");
        if !perms.starts_with("rw") || !(path.is_empty() || path == "[stack]") {
            continue;
        }
        if let Some((s, e)) = range.split_once('-')
            && let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16))
        {
            out.push((s, e));
        }
    }
    out.sort_unstable();
    out
}

/// Addresses symbolized per DWARF context: the context (addr2line's parsed units, the bulk
/// of the memory) is built for one chunk of nearby addresses and dropped before the next,
/// which bounds the peak at the units one chunk touches instead of the whole binary's.
const CHUNK: usize = 2048;

/// `Binary::prepare` over address-sorted chunks of `offsets`.
pub(crate) fn prepare_in_chunks(binary: &mut Binary, offsets: &[u64]) {
    let mut sorted = offsets.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    for chunk in sorted.chunks(CHUNK) {
        binary.prepare(chunk, true);
    }
}

/// A resolved address: its location in the builder and the outermost function's name.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) location: u64,
    /// Innermost frame's name (the inlined callee when there is one), empty when unknown.
    pub(crate) leaf_name: Arc<str>,
    /// Outermost frame's name (the real function the others are inlined into), empty when
    /// unknown. Read to cut jemalloc's frames (feature `jemalloc`).
    #[cfg_attr(not(feature = "jemalloc"), allow(dead_code))]
    pub(crate) function_name: Arc<str>,
}

/// One function frame of an address, as indices into [`Cache`]'s strings.
#[derive(Debug, Clone, Copy)]
struct Frame {
    name: u32,
    file: u32,
    line: u32,
}

/// The answers kept between profiles, compactly and in a few large buffers: every string
/// once in one text buffer, every frame (12 bytes) in one array, and per address a range of
/// that array. Large buffers matter as much as few bytes: thousands of small long-lived
/// allocations interleaved with the DWARF state freed after each batch would pin glibc's
/// heap pages (measured: 22 MiB resident for 7 MiB of answers). Binaries and their tables are
/// not kept: a later profile loads a binary again only for addresses never seen before.
#[derive(Default)]
struct Cache {
    text: String,
    spans: Vec<(u32, u32)>,
    by_hash: HashMap<u64, u32>,
    frames: Vec<Frame>,
    /// (path id, file offset) → (first frame, count), innermost first (0 frames: unknown).
    answers: HashMap<(u32, u64), (u32, u32)>,
    build_ids: HashMap<u32, u32>,
    unreadable: std::collections::HashSet<u32>,
}

/// Distinct addresses remembered before the cache starts over.
const MAX_ANSWERS: usize = 1 << 20;

fn hash_str(s: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(s)
}

impl Cache {
    fn new() -> Cache {
        let mut c = Cache::default();
        c.intern("");
        c
    }

    fn str(&self, id: u32) -> &str {
        let (start, len) = self.spans[id as usize];
        &self.text[start as usize..(start + len) as usize]
    }

    fn intern(&mut self, s: &str) -> u32 {
        let h = hash_str(s);
        if let Some(&i) = self.by_hash.get(&h)
            && self.str(i) == s
        {
            return i;
        }
        let i = self.spans.len() as u32;
        self.spans.push((self.text.len() as u32, s.len() as u32));
        self.text.push_str(s);
        // A 64-bit hash collision only costs a duplicate string.
        self.by_hash.entry(h).or_insert(i);
        i
    }

    fn lookup(&self, path: &str) -> Option<u32> {
        let i = *self.by_hash.get(&hash_str(path))?;
        (self.str(i) == path).then_some(i)
    }

    fn frames_of(&self, pid: u32, offset: u64) -> &[Frame] {
        self.answers
            .get(&(pid, offset))
            .map_or(&[][..], |&(start, n)| {
                &self.frames[start as usize..(start + n) as usize]
            })
    }

    /// Symbolizes the offsets of `path` not answered yet; true when a binary was loaded.
    fn fill(&mut self, path: &str, offsets: &[u64]) -> bool {
        let pid = self.intern(path);
        let missing: Vec<u64> = offsets
            .iter()
            .copied()
            .filter(|o| !self.answers.contains_key(&(pid, *o)))
            .collect();
        if missing.is_empty() || self.unreadable.contains(&pid) {
            return false;
        }
        let mut binary = match Binary::load(Path::new(path)) {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!("ember-sdk: cannot symbolize {path}: {e}");
                self.unreadable.insert(pid);
                return false;
            }
        };
        let build_id = self.intern(&binary.build_id);
        self.build_ids.insert(pid, build_id);
        prepare_in_chunks(&mut binary, &missing);
        for o in missing {
            let start = self.frames.len() as u32;
            let source = binary.source_frames(o);
            if source.is_empty() {
                if let Some(sym) = binary.lookup_offset(o) {
                    let name = self.intern(&sym.name);
                    self.frames.push(Frame {
                        name,
                        file: 0,
                        line: 0,
                    });
                }
            } else {
                // DWARF names functions without their path (`install`, `{closure#0}`); the
                // symbol table has the full one (`ember_sdk::signal::install`) for the
                // outermost, real function of the address.
                let outer = binary.lookup_offset(o).map(|sym| sym.name);
                let last = source.len() - 1;
                for (i, f) in source.iter().enumerate() {
                    let name = match &outer {
                        Some(full) if i == last => full,
                        _ => &f.name,
                    };
                    let (name, file) = (self.intern(name), self.intern(&f.file));
                    self.frames.push(Frame {
                        name,
                        file,
                        line: f.line,
                    });
                }
            }
            let n = self.frames.len() as u32 - start;
            self.answers.insert((pid, o), (start, n));
        }
        true
    }
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// Resolves `addrs` (already adjusted: leaf PCs as is, return addresses minus one) and
/// interns a location for each in `builder`.
pub(crate) fn resolve(builder: &mut ProfileBuilder, addrs: &[u64]) -> HashMap<u64, Resolved> {
    let maps = executable_mappings();
    let mapping_of = |a: u64| {
        let i = maps.partition_point(|m| m.start <= a).checked_sub(1)?;
        (a < maps[i].end).then_some(i)
    };
    let mut offsets_by_path: HashMap<Arc<str>, Vec<u64>> = HashMap::new();
    for &a in addrs {
        if let Some(i) = mapping_of(a) {
            let m = &maps[i];
            offsets_by_path
                .entry(m.path.clone())
                .or_default()
                .push(a - m.start + m.offset);
        }
    }
    let mut guard = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = guard.get_or_insert_with(Cache::new);
    if cache.answers.len() > MAX_ANSWERS {
        *cache = Cache::new();
    }
    let mut loaded = false;
    for (path, offsets) in &offsets_by_path {
        loaded |= cache.fill(path, offsets);
    }
    if loaded {
        signal::release_free_memory();
    }
    let mut mapping_ids: HashMap<usize, u64> = HashMap::new();
    let mut out = HashMap::with_capacity(addrs.len());
    let mut lines = Vec::new();
    for &a in addrs {
        let Some(mi) = mapping_of(a) else {
            let location = builder.location(0, a, &[]);
            out.insert(
                a,
                Resolved {
                    location,
                    leaf_name: "".into(),
                    function_name: "".into(),
                },
            );
            continue;
        };
        let m = &maps[mi];
        let pid = cache.lookup(&m.path).unwrap_or(u32::MAX);
        let mapping_id = *mapping_ids.entry(mi).or_insert_with(|| {
            let build_id = cache.build_ids.get(&pid).map_or("", |&b| cache.str(b));
            builder.mapping(m.start, m.end, m.offset, &m.path, build_id)
        });
        let frames = cache.frames_of(pid, a - m.start + m.offset);
        lines.clear();
        for f in frames {
            // Mangled names are not kept: the system name repeats the name.
            let name = cache.str(f.name);
            let id = builder.function(name, name, cache.str(f.file));
            lines.push((id, i64::from(f.line)));
        }
        let leaf_name = frames.first().map_or("", |f| cache.str(f.name)).into();
        let function_name = frames.last().map_or("", |f| cache.str(f.name)).into();
        let location = builder.location(mapping_id, a, &lines);
        out.insert(
            a,
            Resolved {
                location,
                leaf_name,
                function_name,
            },
        );
    }
    out
}

/// Marks every mapping as symbolized (functions, files, lines, inlined frames), so that
/// viewers (`go tool pprof`) keep our names instead of symbolizing the addresses again
/// from the file themselves (Go's symbolizer misplaces Rust PIE addresses).
pub(crate) fn mark_symbolized(profile: &mut ember_pprof::Profile) {
    for m in &mut profile.mapping {
        m.has_functions = true;
        m.has_filenames = true;
        m.has_line_numbers = true;
        m.has_inline_frames = true;
    }
}

/// [`Cache::fill`] for the benchmark: symbolizes offsets of any file into the shared cache;
/// returns how many of them have a name.
pub(crate) fn fill_for_bench(path: &str, offsets: &[u64]) -> usize {
    let mut guard = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = guard.get_or_insert_with(Cache::new);
    if cache.fill(path, offsets) {
        signal::release_free_memory();
    }
    let pid = cache.intern(path);
    offsets
        .iter()
        .filter(|&&o| !cache.frames_of(pid, o).is_empty())
        .count()
}
