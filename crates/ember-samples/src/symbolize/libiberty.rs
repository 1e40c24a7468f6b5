//! GNU libiberty's demangler (`cplus_demangle`, the code `c++filt` runs), linked statically
//! when the build found `libiberty.a` (see `build.rs`). The crate's only `unsafe` outside
//! `mmap`: one foreign call and the free of the string it returns.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};

unsafe extern "C" {
    /// libiberty: the demangled form of `mangled` in a `malloc`'d string, or NULL.
    fn cplus_demangle(mangled: *const c_char, options: c_int) -> *mut c_char;
    /// The C library's `free`, for the string `cplus_demangle` returns.
    fn free(ptr: *mut c_void);
}

/// `DMGL_PARAMS | DMGL_ANSI | DMGL_VERBOSE` (`demangle.h`): parameters, cv-qualifiers and
/// the standard abbreviations spelled out, `c++filt`'s default options.
const CXXFILT_OPTIONS: c_int = 1 | 2 | 8;

/// `name` as `c++filt` prints it, `None` when libiberty cannot demangle it.
pub(super) fn demangle(name: &str) -> Option<String> {
    let mangled = CString::new(name).ok()?;
    // SAFETY: `mangled` is NUL-terminated and lives across the call; cplus_demangle only
    // reads it, keeps no pointer to it, and is reentrant (no state but its locals).
    let out = unsafe { cplus_demangle(mangled.as_ptr(), CXXFILT_OPTIONS) };
    if out.is_null() {
        return None;
    }
    // SAFETY: a non-NULL result is a NUL-terminated string that libiberty allocated with
    // malloc and handed over to us: read once, then freed exactly once, never used again.
    let text = unsafe { CStr::from_ptr(out) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: see above; `out` came from malloc and is not referenced after this.
    unsafe { free(out.cast()) };
    Some(text)
}
