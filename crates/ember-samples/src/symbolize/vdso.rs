//! The kernel's vDSO (`[vdso]` in a process's mappings): the ELF image the kernel maps into
//! every process for `clock_gettime`, `gettimeofday` and friends. It has no file, but every
//! 64-bit process of the host maps the same image, so this process's own copy serves for
//! symbols (here) and for CFI unwinding (the sampler).

use crate::mmap::Mmap;

/// The mapping name the kernel gives the vDSO.
pub const VDSO_PATH: &str = "[vdso]";

/// A copy of this process's vDSO image, read through `/proc/self/mem` at the range
/// `/proc/self/maps` gives it (no raw pointer is dereferenced). `None` when the kernel maps
/// none (`vdso=0`) or `/proc` is not mounted.
pub fn vdso_image() -> Option<Mmap> {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.trim_end().ends_with(VDSO_PATH))?;
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let mut bytes = vec![0; usize::try_from(end.checked_sub(start)?).ok()?];
    let mem = std::fs::File::open("/proc/self/mem").ok()?;
    mem.read_exact_at(&mut bytes, start).ok()?;
    Mmap::from_bytes(&bytes).ok()
}
