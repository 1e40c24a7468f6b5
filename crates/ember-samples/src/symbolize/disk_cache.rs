//! The on-disk symbol cache: lookups of a binary (by build-id) carried across runs.

use super::binary::Binary;
use super::table::demangle;
use super::{SourceFrame, Symbol};
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl Binary {
    /// Fills the caches from `dir/<build-id>.sym` and `.inl`, written by
    /// [`Binary::save_cache`] in earlier runs. Malformed lines are skipped.
    pub(super) fn load_cache(&mut self, dir: &Path) {
        if self.build_id.is_empty() {
            return;
        }
        let read = |ext: &str| {
            let path = dir.join(format!("{}.{ext}", self.build_id));
            match std::fs::metadata(&path) {
                Ok(m) if m.len() <= MAX_CACHE_FILE => std::fs::read_to_string(path).ok(),
                _ => None,
            }
        };
        if let Some(text) = read("sym") {
            for line in text.lines() {
                let mut parts = line.splitn(3, '\t');
                let Some(Ok(offset)) = parts.next().map(|s| u64::from_str_radix(s, 16)) else {
                    continue;
                };
                let entry = match (parts.next(), parts.next()) {
                    (Some("-"), None) => None,
                    (Some(start), Some(raw)) if !raw.is_empty() => {
                        let Ok(start) = u64::from_str_radix(start, 16) else {
                            continue;
                        };
                        let system_name: Arc<str> = Arc::from(raw);
                        let pretty = demangle(raw);
                        Some(Symbol {
                            name: if pretty == raw {
                                system_name.clone()
                            } else {
                                Arc::from(pretty)
                            },
                            system_name,
                            start,
                        })
                    }
                    _ => continue,
                };
                self.cache.insert(offset, entry);
            }
        }
        if let Some(text) = read("inl") {
            let mut lines = text.lines();
            while let Some(head) = lines.next() {
                let Some((offset, count)) = head.split_once('\t') else {
                    continue;
                };
                let (Ok(offset), Ok(count)) =
                    (u64::from_str_radix(offset, 16), count.parse::<usize>())
                else {
                    continue;
                };
                let mut frames = Vec::new();
                for line in lines.by_ref().take(count) {
                    let mut parts = line.splitn(3, '\t');
                    let (Some(Ok(no)), Some(file), Some(raw)) =
                        (parts.next().map(str::parse), parts.next(), parts.next())
                    else {
                        break;
                    };
                    frames.push(SourceFrame {
                        name: Arc::from(demangle(raw)),
                        system_name: Arc::from(raw),
                        file: Arc::from(file),
                        line: no,
                    });
                }
                if frames.len() == count {
                    self.frames_cache.insert(offset, frames.into());
                }
            }
        }
        self.disk_entries = self.cache.len() as u64;
    }

    /// Appends this run's new lookups to `dir/<build-id>.sym` and `.inl`.
    pub(super) fn save_cache(&mut self, dir: &Path) -> std::io::Result<()> {
        use std::fmt::Write as _;
        use std::io::Write as _;
        if self.build_id.is_empty() || (self.new_syms.is_empty() && self.new_frames.is_empty()) {
            return Ok(());
        }
        let clean = |s: &str| !s.contains(['\t', '\n', '\r']);
        let mut sym = String::new();
        for offset in self.new_syms.drain(..) {
            match self.cache.get(&offset) {
                Some(Some(s)) if clean(&s.system_name) => {
                    let _ = writeln!(sym, "{offset:x}\t{:x}\t{}", s.start, s.system_name);
                }
                Some(None) => {
                    let _ = writeln!(sym, "{offset:x}\t-");
                }
                _ => {}
            }
        }
        let mut inl = String::new();
        for offset in self.new_frames.drain(..) {
            let Some(frames) = self.frames_cache.get(&offset) else {
                continue;
            };
            if !frames
                .iter()
                .all(|f| clean(&f.system_name) && clean(&f.file))
            {
                continue;
            }
            let _ = writeln!(inl, "{offset:x}\t{}", frames.len());
            for f in frames.iter() {
                let _ = writeln!(inl, "{}\t{}\t{}", f.line, f.file, f.system_name);
            }
        }
        std::fs::create_dir_all(dir)?;
        for (ext, text) in [("sym", sym), ("inl", inl)] {
            if text.is_empty() {
                continue;
            }
            let path = dir.join(format!("{}.{ext}", self.build_id));
            // One write per file: concurrent runs append whole blocks.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?
                .write_all(text.as_bytes())?;
        }
        Ok(())
    }
}

/// Cache files above this size are ignored (and no longer grown).
pub(super) const MAX_CACHE_FILE: u64 = 64 << 20;

/// The default directory of the symbol cache: `$XDG_CACHE_HOME/ember/symbols`
/// or `~/.cache/ember/symbols`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("ember").join("symbols"))
}
