//! Per-process state rebuilt from side-band records: names (process and
//! thread), and executable mappings, so that every sample is attributed to
//! the binaries mapped *at the moment it was taken* (across `exec`, `fork`
//! and short-lived processes).

use crate::parse::Mmap2Record;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

static VERSIONS: AtomicU64 = AtomicU64::new(1);

/// A process-wide unique mapping-state version, so that a pid reloaded or
/// reused never matches a stale cache entry.
fn next_version() -> u64 {
    VERSIONS.fetch_add(1, Ordering::Relaxed)
}

/// One executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Map {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// Path or pseudo name (`[vdso]`, `//anon`, ...).
    pub path: Arc<str>,
}

/// What we know about one process.
#[derive(Debug, Clone, Default)]
pub struct Process {
    /// Process name (the main thread's comm).
    pub comm: String,
    /// Executable mappings sorted by start address, non-overlapping.
    pub maps: Vec<Map>,
    /// The process exited during the recording.
    pub exited: bool,
    /// Bumped on every change to `maps`, so per-process caches (unwinders)
    /// know when to rebuild.
    pub version: u64,
}

impl Process {
    /// The mapping containing `addr`.
    pub fn find(&self, addr: u64) -> Option<&Map> {
        let idx = self.maps.partition_point(|m| m.start <= addr);
        let map = self.maps.get(idx.checked_sub(1)?)?;
        (addr < map.end).then_some(map)
    }

    /// Adds a mapping, replacing whatever it overlaps (like the kernel does).
    pub fn insert(&mut self, map: Map) {
        if map.end <= map.start {
            return;
        }
        self.version = next_version();
        let mut kept = Vec::with_capacity(self.maps.len() + 1);
        for old in self.maps.drain(..) {
            if old.end <= map.start || old.start >= map.end {
                kept.push(old);
                continue;
            }
            if old.start < map.start {
                kept.push(Map {
                    end: map.start,
                    ..old.clone()
                });
            }
            if old.end > map.end {
                kept.push(Map {
                    start: map.end,
                    pgoff: old.pgoff + (map.end - old.start),
                    ..old
                });
            }
        }
        kept.push(map);
        kept.sort_by_key(|m| m.start);
        self.maps = kept;
    }
}

/// All processes and threads seen during a recording.
#[derive(Debug, Default)]
pub struct ProcessTable {
    /// Processes by pid.
    pub processes: HashMap<u32, Process>,
    /// Thread names by tid.
    pub threads: HashMap<u32, String>,
    /// Process id of each known thread.
    thread_pids: HashMap<u32, u32>,
    /// Interned paths, so identical binaries share one allocation.
    paths: HashMap<String, Arc<str>>,
    /// Pids whose /proc state we could not read (warned once).
    pub unreadable: Vec<u32>,
}

impl ProcessTable {
    fn intern(&mut self, path: &str) -> Arc<str> {
        if let Some(p) = self.paths.get(path) {
            return p.clone();
        }
        let arc: Arc<str> = Arc::from(path);
        self.paths.insert(path.to_string(), arc.clone());
        arc
    }

    /// Loads a process's current name and executable mappings from /proc.
    /// Used for processes that existed before the recording started.
    pub fn load_from_proc(&mut self, pid: u32) -> bool {
        let Ok(maps_text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            if !self.unreadable.contains(&pid) {
                self.unreadable.push(pid);
            }
            self.processes.entry(pid).or_default();
            return false;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default();
        let mut process = Process {
            comm: comm.clone(),
            ..Default::default()
        };
        for line in maps_text.lines() {
            if let Some((map, exec)) = parse_maps_line(line, |p| self.intern(p))
                && exec
            {
                process.insert(map);
            }
        }
        self.processes.insert(pid, process);
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                let Some(tid) = task
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok())
                else {
                    continue;
                };
                let name = std::fs::read_to_string(task.path().join("comm"))
                    .map(|s| s.trim_end().to_string())
                    .unwrap_or_else(|_| comm.clone());
                self.threads.insert(tid, name);
                self.thread_pids.insert(tid, pid);
            }
        }
        true
    }

    /// The process a thread belongs to, when known (0 for the idle task).
    pub fn pid_of(&self, tid: u32) -> Option<u32> {
        if tid == 0 {
            return Some(0);
        }
        self.thread_pids.get(&tid).copied()
    }

    /// Applies an MMAP2 record.
    pub fn mmap(&mut self, rec: &Mmap2Record) {
        let path = self.intern(&rec.filename);
        let map = Map {
            start: rec.addr,
            end: rec.addr.saturating_add(rec.len),
            pgoff: rec.pgoff,
            path,
        };
        self.processes.entry(rec.pid).or_default().insert(map);
    }

    /// Applies a COMM record; `exec` drops the old image's mappings.
    pub fn comm(&mut self, pid: u32, tid: u32, comm: &str, exec: bool) {
        let process = self.processes.entry(pid).or_default();
        if exec {
            process.maps.clear();
            process.version = next_version();
        }
        if pid == tid {
            process.comm = comm.to_string();
        }
        self.threads.insert(tid, comm.to_string());
        self.thread_pids.insert(tid, pid);
    }

    /// Applies a FORK record: a new process copies its parent's state, a
    /// new thread inherits its creator's name.
    pub fn fork(&mut self, pid: u32, ppid: u32, tid: u32, ptid: u32) {
        if pid != ppid && !self.processes.contains_key(&pid) {
            let child = self.processes.get(&ppid).cloned().unwrap_or_default();
            self.processes.insert(
                pid,
                Process {
                    exited: false,
                    ..child
                },
            );
        } else if pid != ppid {
            // A pid we saw before was reused: start from the parent's image.
            let child = self.processes.get(&ppid).cloned().unwrap_or_default();
            self.processes.insert(pid, child);
        }
        let name = self
            .threads
            .get(&ptid)
            .cloned()
            .or_else(|| self.processes.get(&pid).map(|p| p.comm.clone()))
            .unwrap_or_default();
        self.threads.insert(tid, name);
        self.thread_pids.insert(tid, pid);
    }

    /// Drops the state of a task that exited: its thread name and, for a
    /// main thread, its process (mappings included). Returns true when a
    /// process was removed. Long sessions call this so that memory follows
    /// the live tasks, not every task ever seen.
    pub fn forget(&mut self, tid: u32) -> bool {
        self.threads.remove(&tid);
        self.thread_pids.remove(&tid);
        if self.processes.get(&tid).is_some_and(|p| p.exited) {
            self.processes.remove(&tid);
            return true;
        }
        false
    }

    /// Drops interned paths no mapping refers to any more.
    pub fn release_unused_paths(&mut self) {
        self.paths.retain(|_, p| Arc::strong_count(p) > 1);
    }

    /// Number of interned paths (for tests of bounded memory).
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }

    /// Applies an EXIT record.
    pub fn exit(&mut self, pid: u32, tid: u32) {
        if pid == tid
            && let Some(p) = self.processes.get_mut(&pid)
        {
            p.exited = true;
        }
    }
}

/// Parses one `/proc/PID/maps` line into a mapping and whether it is executable.
fn parse_maps_line(line: &str, mut intern: impl FnMut(&str) -> Arc<str>) -> Option<(Map, bool)> {
    let mut fields = line.splitn(6, ' ');
    let range = fields.next()?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    let (lo, hi) = range.split_once('-')?;
    let start = u64::from_str_radix(lo, 16).ok()?;
    let end = u64::from_str_radix(hi, 16).ok()?;
    let pgoff = u64::from_str_radix(offset, 16).ok()?;
    let path = if path.is_empty() { "//anon" } else { path };
    Some((
        Map {
            start,
            end,
            pgoff,
            path: intern(path),
        },
        perms.as_bytes().get(2) == Some(&b'x'),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(start: u64, end: u64, pgoff: u64, path: &str) -> Map {
        Map {
            start,
            end,
            pgoff,
            path: Arc::from(path),
        }
    }

    #[test]
    fn overlapping_mmap_splits_old_mapping() {
        let mut p = Process::default();
        p.insert(map(0x1000, 0x5000, 0, "a"));
        p.insert(map(0x2000, 0x3000, 0, "b"));
        assert_eq!(
            p.maps,
            vec![
                map(0x1000, 0x2000, 0, "a"),
                map(0x2000, 0x3000, 0, "b"),
                map(0x3000, 0x5000, 0x2000, "a")
            ]
        );
        assert_eq!(&*p.find(0x3fff).unwrap().path, "a");
        assert_eq!(&*p.find(0x2000).unwrap().path, "b");
        assert!(p.find(0x5000).is_none());
        assert!(p.find(0xfff).is_none());
    }

    #[test]
    fn own_proc_maps_contain_this_test_binary() {
        let mut table = ProcessTable::default();
        let pid = std::process::id();
        assert!(table.load_from_proc(pid));
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let here = own_proc_maps_contain_this_test_binary as *const () as u64;
        let p = &table.processes[&pid];
        assert_eq!(&*p.find(here).unwrap().path, exe.to_str().unwrap());
        assert!(table.threads.contains_key(&pid));
    }

    #[test]
    fn exec_clears_and_fork_copies() {
        let mut t = ProcessTable::default();
        t.processes.insert(
            10,
            Process {
                comm: "sh".into(),
                maps: vec![map(0x1000, 0x2000, 0, "/bin/sh")],
                exited: false,
                version: 1,
            },
        );
        t.threads.insert(10, "sh".into());
        t.fork(11, 10, 11, 10);
        assert_eq!(t.processes[&11].maps.len(), 1);
        assert_eq!(t.threads[&11], "sh");
        t.comm(11, 11, "ls", true);
        assert!(t.processes[&11].maps.is_empty());
        assert_eq!(t.processes[&11].comm, "ls");
        assert_eq!(t.processes[&10].comm, "sh");
        t.exit(11, 11);
        assert!(t.processes[&11].exited);
    }

    #[test]
    fn maps_lines_parse() {
        let line = "7f1c2d400000-7f1c2d428000 r-xp 00028000 08:01 1234   /usr/lib/libc.so.6";
        let (m, exec) = parse_maps_line(line, |s| Arc::from(s)).unwrap();
        assert!(exec);
        assert_eq!(
            (m.start, m.end, m.pgoff, &*m.path),
            (
                0x7f1c2d400000,
                0x7f1c2d428000,
                0x28000,
                "/usr/lib/libc.so.6"
            )
        );
        assert!(parse_maps_line("garbage", |s| Arc::from(s)).is_none());
    }
}
