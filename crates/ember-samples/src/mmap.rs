//! Read-only mappings of whole files for the symbolizer (and the sampler's CFI unwinder, which
//! reads `.eh_frame` the same way): symbol and string tables are read
//! straight from the mapping (nothing copied onto the heap), and the kernel can drop the
//! pages again under pressure because they are file-backed.
//!
//! This is the crate's only `unsafe` code: mapping a file (another process truncating the
//! file while it is mapped would fault the reader, which is the accepted price of reading
//! 100+ MB binaries without copying them), handing clean pages back, and keeping a value that
//! borrows a mapping next to it (`Pinned`).

#![allow(unsafe_code)]

use std::path::Path;
use std::sync::Arc;

/// A read-only private mapping of a whole, non-empty file.
#[derive(Debug)]
pub struct Mmap {
    map: memmap2::Mmap,
    /// A copy in anonymous memory ([`Mmap::from_bytes`]): its pages are the only copy, so
    /// they are never handed back.
    anonymous: bool,
}

impl Mmap {
    /// Maps `path`; an empty file is an error (there is nothing to map).
    pub fn open(path: &Path) -> std::io::Result<Mmap> {
        let file = std::fs::File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "empty file",
            ));
        }
        // SAFETY: a read-only private mapping of a file opened for reading. Binaries and
        // debug files are not modified in place while a profiler reads them (package
        // managers replace them by rename, which leaves this mapping on the old inode); the
        // fd may be closed afterwards, the mapping keeps the file referenced.
        let map = unsafe { memmap2::MmapOptions::new().map(&file)? };
        Ok(Mmap {
            map,
            anonymous: false,
        })
    }

    /// A read-only anonymous mapping holding a copy of `bytes` (an image with no file behind
    /// it, such as the kernel's vDSO), so it can be read like a mapped file.
    pub fn from_bytes(bytes: &[u8]) -> std::io::Result<Mmap> {
        if bytes.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "empty image",
            ));
        }
        let mut map = memmap2::MmapOptions::new().len(bytes.len()).map_anon()?;
        map.copy_from_slice(bytes);
        Ok(Mmap {
            map: map.make_read_only()?,
            anonymous: true,
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Gives the pages touched while building tables back to the kernel: they are re-read
    /// from the page cache if a name is needed later.
    pub fn release_pages(&self) {
        if self.anonymous {
            // MADV_DONTNEED would zero an anonymous mapping's pages, not re-read them.
            return;
        }
        // SAFETY: MADV_DONTNEED on a read-only private file mapping that was never written:
        // its pages are clean copies of the file and are simply re-faulted from it on the
        // next access, so no reader can observe a change.
        let _ = unsafe {
            self.map
                .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
        };
    }
}

/// A value built over a mapping's bytes, kept together with the mapping it borrows from
/// (an addr2line context over a debug file, which wants `'static` data).
pub(crate) struct Pinned<T> {
    /// Declared first: dropped before the mapping it borrows.
    value: T,
    _map: Arc<Mmap>,
}

impl<T> std::fmt::Debug for Pinned<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pinned")
    }
}

impl<T> Pinned<T> {
    /// Builds the value from the mapping's bytes. `build` may keep the slice only inside the
    /// value it returns (every caller is in this crate and does).
    pub(crate) fn build(
        map: Arc<Mmap>,
        build: impl FnOnce(&'static [u8]) -> Option<T>,
    ) -> Option<Self> {
        // SAFETY: the slice points into the mapping, which `_map` keeps alive for as long as
        // the value (declared first, so dropped first) exists; the mapping never moves or
        // changes, and `build` stores the slice nowhere but in the value.
        let data: &'static [u8] =
            unsafe { std::mem::transmute::<&[u8], &'static [u8]>(map.bytes()) };
        let value = build(data)?;
        Some(Pinned { value, _map: map })
    }

    /// The value.
    pub(crate) fn get(&self) -> &T {
        &self.value
    }
}
