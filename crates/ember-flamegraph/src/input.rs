//! Reading the bytes to render: regular files are memory-mapped, everything else is read.
//!
//! Large folded inputs (tens of MB) are parsed in place, so the whole file must be addressable
//! at once. Copying it into a heap buffer costs a kernel copy plus a page fault for every 4 KiB
//! of fresh heap, which measured about a third of `ember flamegraph`'s time on a 27 MB input;
//! mapping the page-cache pages directly (populated up front) avoids both.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::path::Path;

/// The contents of one input: a read-only file mapping or an owned buffer. Dereferences to
/// the bytes.
pub struct InputBytes {
    inner: Inner,
}

enum Inner {
    Owned(Vec<u8>),
    #[cfg(unix)]
    Mapped {
        ptr: *mut libc::c_void,
        len: usize,
    },
}

// SAFETY: the mapping is read-only and owned by this value, so sharing or moving it across
// threads is as safe as for a `Vec<u8>`.
unsafe impl Send for InputBytes {}
// SAFETY: as above; `&InputBytes` only ever hands out `&[u8]`.
unsafe impl Sync for InputBytes {}

impl InputBytes {
    /// Wraps bytes already in memory.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        InputBytes {
            inner: Inner::Owned(bytes),
        }
    }

    /// Whether the bytes are a file mapping (rather than a copy).
    pub fn is_mapped(&self) -> bool {
        !matches!(self.inner, Inner::Owned(_))
    }
}

impl Deref for InputBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.inner {
            Inner::Owned(v) => v,
            // SAFETY: `ptr` is a live PROT_READ mapping of exactly `len` bytes, unmapped only
            // in `drop`, and the returned slice borrows `self`.
            #[cfg(unix)]
            Inner::Mapped { ptr, len } => unsafe {
                std::slice::from_raw_parts(ptr.cast::<u8>(), *len)
            },
        }
    }
}

impl Drop for InputBytes {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Inner::Mapped { ptr, len } = self.inner {
            // SAFETY: the mapping was created by `map` with this address and length and no
            // slice of it outlives `self`. A failure here would only leak address space.
            unsafe {
                libc::munmap(ptr, len);
            }
        }
    }
}

/// Reads `path`, or standard input when `path` is `-`. Non-empty regular files are mapped
/// read-only (falling back to reading when mapping fails); pipes, devices and stdin are read
/// into memory.
///
/// A mapped file must not be truncated by another process while the returned bytes are in
/// use (the same caveat as any tool that maps its input, e.g. ripgrep): the kernel would
/// signal the process on access past the new end.
pub fn read_input(path: &Path) -> io::Result<InputBytes> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        io::stdin().lock().read_to_end(&mut bytes)?;
        return Ok(InputBytes::from_vec(bytes));
    }
    let mut file = File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > 0 {
        #[cfg(unix)]
        if let Some(mapped) = usize::try_from(meta.len())
            .ok()
            .and_then(|len| map(&file, len))
        {
            return Ok(mapped);
        }
        // One exact-size buffer (plus a byte so read_to_end can see EOF without regrowing).
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0) + 1);
        file.read_to_end(&mut bytes)?;
        return Ok(InputBytes::from_vec(bytes));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(InputBytes::from_vec(bytes))
}

/// Maps `len` bytes of `file` read-only, with the pages populated up front (MAP_POPULATE on
/// Linux) so parsing does not take a fault per page.
#[cfg(unix)]
fn map(file: &File, len: usize) -> Option<InputBytes> {
    use std::os::fd::AsRawFd;
    #[cfg(target_os = "linux")]
    let flags = libc::MAP_PRIVATE | libc::MAP_POPULATE;
    #[cfg(not(target_os = "linux"))]
    let flags = libc::MAP_PRIVATE;
    // SAFETY: a fresh private read-only mapping of an open file descriptor; the kernel picks
    // the address, and the result is checked before use.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            flags,
            file.as_raw_fd(),
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    Some(InputBytes {
        inner: Inner::Mapped { ptr, len },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_file_equals_read_file() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/input.rs");
        let mapped = read_input(&path).expect("read own source");
        assert!(cfg!(not(unix)) || mapped.is_mapped());
        assert_eq!(&mapped[..], std::fs::read(&path).expect("read").as_slice());
    }

    #[test]
    fn empty_and_missing_files() {
        let dir = std::env::temp_dir().join(format!("ember-fg-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let empty = dir.join("empty");
        std::fs::write(&empty, b"").expect("write");
        let got = read_input(&empty).expect("empty file");
        assert!(got.is_empty() && !got.is_mapped());
        assert!(read_input(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
