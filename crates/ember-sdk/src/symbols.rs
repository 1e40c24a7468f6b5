//! Symbolization of the process's own addresses, outside the signal handler: the mappings of
//! `/proc/self/maps`, and per binary `ember_samples::symbolize::Binary` (ELF `.symtab` and
//! `.dynsym`, split debug files, DWARF inlined frames and lines).
//!
//! What stays resident is small: each binary is memory-mapped (pages are handed back after
//! every batch), its symbol table and DWARF context are built for one batch of addresses and
//! dropped after it (`Binary::prepare`), and only the answers are kept, one entry per
//! distinct address seen. The cache is shared by every profile of the process.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ember_pprof::ProfileBuilder;
use ember_samples::symbolize::Binary;

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

/// A resolved address: its location in the builder and the outermost function's name.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) location: u64,
    /// Innermost frame's name (the inlined callee when there is one), empty when unknown.
    pub(crate) leaf_name: Arc<str>,
}

/// Loaded binaries by path (`None`: unreadable), kept across profiles.
static BINARIES: Mutex<Option<HashMap<Arc<str>, Option<Binary>>>> = Mutex::new(None);

/// Resolves `addrs` (already adjusted: leaf PCs as is, return addresses minus one) and
/// interns a location for each in `builder`.
pub(crate) fn resolve(builder: &mut ProfileBuilder, addrs: &[u64]) -> HashMap<u64, Resolved> {
    let maps = executable_mappings();
    let mut per_binary: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut mapping_of: HashMap<u64, usize> = HashMap::new();
    for &a in addrs {
        let i = maps.partition_point(|m| m.start <= a);
        if let Some(m) = i.checked_sub(1).map(|i| (i, &maps[i]))
            && a < m.1.end
        {
            mapping_of.insert(a, m.0);
            per_binary
                .entry(m.0)
                .or_default()
                .push(a - m.1.start + m.1.offset);
        }
    }
    let mut guard = BINARIES.lock().unwrap_or_else(|p| p.into_inner());
    let binaries = guard.get_or_insert_with(HashMap::new);
    // Several mappings of one file share the Binary; prepare each file's offsets at once.
    let mut offsets_by_path: HashMap<Arc<str>, Vec<u64>> = HashMap::new();
    for (i, offsets) in &per_binary {
        offsets_by_path
            .entry(maps[*i].path.clone())
            .or_default()
            .extend_from_slice(offsets);
    }
    for (path, offsets) in &offsets_by_path {
        let binary = binaries.entry(path.clone()).or_insert_with(|| {
            Binary::load(Path::new(&**path))
                .map_err(|e| tracing::debug!("ember-sdk: cannot symbolize {path}: {e}"))
                .ok()
        });
        if let Some(b) = binary {
            b.prepare(offsets, true);
        }
    }
    let mut mapping_ids: HashMap<usize, u64> = HashMap::new();
    let mut out = HashMap::with_capacity(addrs.len());
    for &a in addrs {
        let Some(&mi) = mapping_of.get(&a) else {
            let location = builder.location(0, a, &[]);
            out.insert(
                a,
                Resolved {
                    location,
                    leaf_name: "".into(),
                },
            );
            continue;
        };
        let m = &maps[mi];
        let binary = binaries.get_mut(&m.path).and_then(|b| b.as_mut());
        let mapping_id = *mapping_ids.entry(mi).or_insert_with(|| {
            let build_id = binary
                .as_ref()
                .map(|b| b.build_id.clone())
                .unwrap_or_default();
            builder.mapping(m.start, m.end, m.offset, &m.path, &build_id)
        });
        let offset = a - m.start + m.offset;
        let mut lines = Vec::new();
        let mut leaf_name: Arc<str> = "".into();
        if let Some(b) = binary {
            let frames = b.source_frames(offset);
            if frames.is_empty() {
                if let Some(sym) = b.lookup_offset(offset) {
                    let f = builder.function(&sym.name, &sym.system_name, "");
                    lines.push((f, 0));
                    leaf_name = sym.name.clone();
                }
            } else {
                for fr in frames.iter() {
                    let f = builder.function(&fr.name, &fr.system_name, &fr.file);
                    lines.push((f, i64::from(fr.line)));
                }
                leaf_name = frames[0].name.clone();
            }
        }
        let location = builder.location(mapping_id, a, &lines);
        out.insert(
            a,
            Resolved {
                location,
                leaf_name,
            },
        );
    }
    out
}
