//! jemalloc's own heap sampling as the source of heap profiles (cargo feature `jemalloc`).
//!
//! A service enables it with jemalloc as its global allocator, built with profiling (this feature
//! turns on tikv-jemallocator's `profiling`):
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOC: ember_sdk::Jemalloc = ember_sdk::Jemalloc;
//!
//! // jemalloc reads its options at start-up; `prof:true` cannot be turned on later. Its
//! // `const char *malloc_conf`, prefixed `_rjem_` by tikv-jemallocator on Linux:
//! #[allow(non_upper_case_globals)]
//! // SAFETY: a `&u8` has the layout of `const char *`, and the string it points into is
//! // static and NUL-terminated.
//! #[unsafe(export_name = "_rjem_malloc_conf")]
//! pub static malloc_conf: &u8 = &b"prof:true,prof_accum:true,lg_prof_sample:21\0"[0];
//! ```
//!
//! or without code, at run time: `_RJEM_MALLOC_CONF=prof:true,prof_accum:true,lg_prof_sample:21`
//! (the prefixed name of `MALLOC_CONF`). `lg_prof_sample:21` samples once per 2 MiB allocated
//! on average, as the [`crate::SamplingAllocator`] does; `prof_accum:true` makes jemalloc keep
//! the cumulative counts (`alloc_objects`, `alloc_space`), which are 0 without it.
//!
//! Once `opt.prof` is on, [`crate::heap_profile`], `/profile/heap` (`pprof`, `svg`) and push
//! mode use this source: [`jemalloc_dump`] asks jemalloc for a dump (`prof.dump` into a
//! temporary file, read and removed), [`parse_dump`] reads its text format, and the stacks
//! are symbolized in-process like the wrapper's. `/profile/heap?format=jemalloc` returns the
//! dump itself (for `jeprof`).
//!
//! Counts: jemalloc's dump does not hold the final estimates. It writes each stack's counts
//! such that jeprof's (and pprof's) unbiasing, `scale = 1 / (1 - exp(-(bytes/objects) / R))`
//! applied to both objects and bytes with `R = 2^lg_prof_sample`, gives jemalloc's own
//! unbiased totals (see `prof_do_unbias` in jemalloc 5.3's `prof_data.c`; without
//! `prof_unbias` the raw sampled counts are written and the same formula is pprof's classic
//! estimate). That formula is applied here.

#![allow(unsafe_code)]

use std::ffi::{CString, c_char, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use ember_pprof::Profile;

pub use tikv_jemallocator::Jemalloc;

/// Failures of the jemalloc heap source.
#[derive(Debug, thiserror::Error)]
pub enum JemallocError {
    /// jemalloc's profiling is off (`opt.prof` is false).
    #[error("{HEAP_JEMALLOC_OFF}")]
    Off,
    /// `prof.dump` failed (jemalloc's error number).
    #[error("jemalloc prof.dump to {path}: error {code}")]
    Dump {
        /// The file jemalloc was asked to write.
        path: String,
        /// jemalloc's return value (an errno).
        code: i32,
    },
    /// Reading or removing the dump file failed.
    #[error("reading the jemalloc dump {path}: {source}")]
    Io {
        /// The dump file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The dump is not in the `heap_v2` text format.
    #[error("jemalloc dump, line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// The message of `/profile/heap?format=jemalloc` when jemalloc's profiling is off.
pub const HEAP_JEMALLOC_OFF: &str = "jemalloc heap profiling is off: make ember_sdk::Jemalloc the global allocator \
and start the service with jemalloc's profiling on, either in code \
(#[unsafe(export_name = \"_rjem_malloc_conf\")] static malloc_conf: &u8 = &b\"prof:true,prof_accum:true,lg_prof_sample:21\\0\"[0];) \
or in the environment (_RJEM_MALLOC_CONF=prof:true,prof_accum:true,lg_prof_sample:21)";

/// Reads a mallctl value of type `T`, `None` when the name is unknown (jemalloc built
/// without profiling) or fails.
fn read<T: Copy + Default>(name: &str) -> Option<T> {
    let name = CString::new(name).ok()?;
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>();
    // SAFETY: `name` is NUL-terminated; `value` is a valid, writable `T` and `len` is its
    // size, which is what jemalloc writes at most; no new value is passed.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            &mut value as *mut T as *mut c_void,
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && len == std::mem::size_of::<T>()).then_some(value)
}

/// Whether jemalloc samples allocations now: profiling compiled in and on at start-up
/// (`opt.prof`) and not paused (`prof.active`).
pub fn profiling_active() -> bool {
    read::<bool>("opt.prof") == Some(true) && read::<bool>("prof.active") == Some(true)
}

/// jemalloc's heap profile as it writes it (`heap_v2` text, for `jeprof`).
pub fn jemalloc_dump() -> Result<Vec<u8>, JemallocError> {
    if !profiling_active() {
        return Err(JemallocError::Off);
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "ember-sdk-{}-{}.heap",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let shown = path.display().to_string();
    let c_path =
        CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| JemallocError::Io {
            path: shown.clone(),
            source: std::io::Error::other("NUL in the temporary directory's path"),
        })?;
    let file: *const c_char = c_path.as_ptr();
    // SAFETY: `prof.dump` takes a `const char *` as its new value; we pass a pointer to it
    // and its size; `c_path` outlives the call; nothing is read back.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"prof.dump".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &file as *const *const c_char as *mut c_void,
            std::mem::size_of::<*const c_char>(),
        )
    };
    if rc != 0 {
        return Err(JemallocError::Dump {
            path: shown,
            code: rc,
        });
    }
    let data = std::fs::read(&path).map_err(|source| JemallocError::Io {
        path: shown.clone(),
        source,
    });
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::warn!(path = %shown, error = %e, "removing the jemalloc dump");
    }
    data
}

/// One stack of a jemalloc dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpStack {
    /// Return addresses as written, leaf first.
    pub addrs: Vec<u64>,
    /// `[objects, bytes, cumulative objects, cumulative bytes]` as written (before unbiasing).
    pub counts: [u64; 4],
}

/// A parsed `heap_v2` dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// Mean bytes between samples (the `heap_v2/N` header).
    pub sample_rate: u64,
    /// The stacks, in the dump's order.
    pub stacks: Vec<DumpStack>,
}

/// Parses `objs: bytes [aobjs: abytes]` (after `t*: `).
fn parse_counts(s: &str) -> Option<[u64; 4]> {
    let (objs, rest) = s.split_once(':')?;
    let (bytes, rest) = rest.trim_start().split_once(' ')?;
    let inner = rest.trim().strip_prefix('[')?.strip_suffix(']')?;
    let (aobjs, abytes) = inner.split_once(':')?;
    Some([
        objs.trim().parse().ok()?,
        bytes.trim().parse().ok()?,
        aobjs.trim().parse().ok()?,
        abytes.trim().parse().ok()?,
    ])
}

/// Parses jemalloc's heap profile text: `heap_v2/<rate>`, the totals (`t*:`) and per-thread
/// lines, then per stack an `@ 0x.. 0x..` line and its `t*: objs: bytes [aobjs: abytes]`
/// line (per-thread `tN:` lines are skipped), up to `MAPPED_LIBRARIES:`.
pub fn parse_dump(text: &str) -> Result<Dump, JemallocError> {
    let bad = |line: usize, message: String| JemallocError::Parse { line, message };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, header) = lines.next().ok_or_else(|| bad(1, "empty dump".into()))?;
    let sample_rate = header
        .strip_prefix("heap_v2/")
        .and_then(|r| r.trim().parse::<u64>().ok())
        .filter(|&r| r > 0)
        .ok_or_else(|| bad(1, format!("expected heap_v2/<sample rate>, got {header:?}")))?;
    let mut stacks = Vec::new();
    let mut pending: Option<(usize, Vec<u64>)> = None;
    for (n, line) in lines {
        let t = line.trim();
        if t == "MAPPED_LIBRARIES:" {
            break;
        }
        if let Some(rest) = t.strip_prefix('@') {
            if let Some((at, _)) = pending {
                return Err(bad(at, "stack without a t*: line".into()));
            }
            let addrs = rest
                .split_whitespace()
                .map(|a| {
                    let hex = a.strip_prefix("0x").unwrap_or(a);
                    u64::from_str_radix(hex, 16).map_err(|_| bad(n, format!("bad address {a:?}")))
                })
                .collect::<Result<Vec<u64>, _>>()?;
            pending = Some((n, addrs));
        } else if let Some(rest) = t.strip_prefix("t*:") {
            let counts = parse_counts(rest)
                .ok_or_else(|| bad(n, format!("expected objs: bytes [objs: bytes], got {t:?}")))?;
            // The first t*: line (before any stack) is the total over all stacks.
            if let Some((_, addrs)) = pending.take() {
                stacks.push(DumpStack { addrs, counts });
            }
        } else if !(t.is_empty() || t.starts_with('t')) {
            return Err(bad(n, format!("unexpected line {t:?}")));
        }
    }
    if let Some((at, _)) = pending {
        return Err(bad(at, "stack without a t*: line".into()));
    }
    Ok(Dump {
        sample_rate,
        stacks,
    })
}

/// jeprof's unbiasing of one `(objects, bytes)` pair sampled every `rate` bytes.
fn unbias(objs: u64, bytes: u64, rate: u64) -> (f64, f64) {
    if objs == 0 || bytes == 0 {
        return (0.0, 0.0);
    }
    let avg = bytes as f64 / objs as f64;
    let p = 1.0 - (-avg / rate as f64).exp();
    let scale = if p > 0.0 { 1.0 / p } else { 1.0 };
    (objs as f64 * scale, bytes as f64 * scale)
}

/// The pprof profile of a parsed dump (the four sample types of [`crate::heap_profile`]),
/// symbolized against this process's mappings.
pub fn dump_to_profile(dump: &Dump) -> Profile {
    let rate = dump.sample_rate;
    let sites: Vec<(super::SiteKey, [f64; 4])> = dump
        .stacks
        .iter()
        .map(|s| {
            // Return addresses: the call is the instruction before.
            let frames: Box<[u64]> = s.addrs.iter().map(|a| a.saturating_sub(1)).collect();
            let (io, ib) = unbias(s.counts[0], s.counts[1], rate);
            let (ao, ab) = unbias(s.counts[2], s.counts[3], rate);
            ((frames, Box::default()), [ao, ab, io, ib])
        })
        .collect();
    super::build_profile(&sites, rate.try_into().unwrap_or(usize::MAX))
}

/// jemalloc's heap profile now, as pprof.
pub fn jemalloc_profile() -> Result<Profile, JemallocError> {
    let raw = jemalloc_dump()?;
    let dump = parse_dump(&String::from_utf8_lossy(&raw))?;
    Ok(dump_to_profile(&dump))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUMP: &str = "heap_v2/524288\n  t*: 3: 3145728 [0: 0]\n  t0: 3: 3145728 [0: 0]\n\
@ 0x55d0 0x55e0 0x55f0\n  t*: 2: 2097152 [4: 4194304]\n  t0: 2: 2097152 [4: 4194304]\n\
@ 0x1234\n  t*: 1: 64 [1: 64]\n\nMAPPED_LIBRARIES:\n55d0-55f0 r-xp 00000000 08:01 1 /bin/x\n";

    #[test]
    fn parses_heap_v2() {
        let d = parse_dump(DUMP).unwrap();
        assert_eq!(d.sample_rate, 524288);
        assert_eq!(d.stacks.len(), 2);
        assert_eq!(d.stacks[0].addrs, [0x55d0, 0x55e0, 0x55f0]);
        assert_eq!(d.stacks[0].counts, [2, 2097152, 4, 4194304]);
        assert_eq!(d.stacks[1].counts, [1, 64, 1, 64]);
    }

    #[test]
    fn rejects_bad_dumps() {
        for (text, line) in [
            ("heap_v1/3\n", 1),
            ("heap_v2/524288\n@ 0xzz\n", 2),
            ("heap_v2/524288\n@ 0x1\n  t*: 1 2\n", 3),
            ("heap_v2/524288\n@ 0x1\n@ 0x2\n", 2),
        ] {
            match parse_dump(text) {
                Err(JemallocError::Parse { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn unbiases_like_jeprof() {
        // 1 MiB objects at R = 2 MiB: p = 1 - e^-0.5.
        let (o, b) = unbias(1, 1 << 20, 2 << 20);
        let p = 1.0 - (-0.5f64).exp();
        assert!((o - 1.0 / p).abs() < 1e-9 && (b - (1 << 20) as f64 / p).abs() < 1e-3);
        assert_eq!(unbias(0, 0, 2 << 20), (0.0, 0.0));
    }
}
