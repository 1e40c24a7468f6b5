//! Reading one input: a path or `-` for standard input, memory-mapped when it is a large
//! regular file, transparently gunzipped (under a size cap) when it starts with the gzip magic
//! bytes.

use std::fs::File;
use std::io::{self, Read};
use std::ops::Deref;
use std::path::Path;

use crate::FormatError;

/// Default cap on an input's size after gzip decompression: 256 MiB, the same as the pprof
/// decoder's, so a gzip bomb costs at most that much memory.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 256 * 1024 * 1024;

/// Regular files at least this large are mapped rather than read: below it, a read is as
/// cheap as setting up a mapping.
const MAP_THRESHOLD: u64 = 64 * 1024;

/// The bytes of one input: a read-only file mapping or an owned buffer. Dereferences to the
/// bytes.
#[derive(Debug)]
pub struct InputBytes {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl InputBytes {
    /// Wraps bytes already in memory.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        InputBytes {
            inner: Inner::Owned(bytes),
        }
    }

    /// Whether the bytes are a file mapping (rather than a copy).
    pub fn is_mapped(&self) -> bool {
        matches!(self.inner, Inner::Mapped(_))
    }
}

impl Deref for InputBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.inner {
            Inner::Owned(v) => v,
            Inner::Mapped(m) => m,
        }
    }
}

/// Whether `bytes` start with the gzip magic number.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// Reads `path` (`-`: standard input) with the default decompression cap; see
/// [`read_bytes_with_limit`].
pub fn read_bytes(path: &Path) -> Result<InputBytes, FormatError> {
    read_bytes_with_limit(path, DEFAULT_MAX_DECOMPRESSED)
}

/// Reads `path`, or standard input when `path` is `-`, and gunzips it when it starts with the
/// gzip magic bytes (stopping with an error past `max_decompressed` bytes).
///
/// Non-gzip regular files of 64 KiB or more are mapped read-only instead of copied (falling
/// back to reading when mapping fails). A mapped file must not be truncated by another process
/// while the returned bytes are in use (the caveat of any tool that maps its input): the kernel
/// would signal the process on access past the new end.
pub fn read_bytes_with_limit(
    path: &Path,
    max_decompressed: u64,
) -> Result<InputBytes, FormatError> {
    let io_error = |source| FormatError::Io {
        path: path.display().to_string(),
        source,
    };
    let raw = read_raw(path).map_err(io_error)?;
    if !is_gzip(&raw) {
        return Ok(raw);
    }
    let limits = ember_pprof::DecodeLimits {
        max_decompressed_bytes: max_decompressed,
    };
    match ember_pprof::decompress(&raw, &limits) {
        Ok(plain) => Ok(InputBytes::from_vec(plain.into_owned())),
        Err(source) => Err(FormatError::Decompress {
            path: path.display().to_string(),
            source,
        }),
    }
}

/// Reads the bytes as they are on disk (or on stdin).
fn read_raw(path: &Path) -> io::Result<InputBytes> {
    if path == Path::new("-") {
        let mut bytes = Vec::new();
        io::stdin().lock().read_to_end(&mut bytes)?;
        return Ok(InputBytes::from_vec(bytes));
    }
    let mut file = File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() {
        if meta.len() >= MAP_THRESHOLD
            && let Some(mapped) = crate::mmap::map(&file)
        {
            return Ok(InputBytes {
                inner: Inner::Mapped(mapped),
            });
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty directory for one test, removed with its content when dropped (when the
    /// test that holds it ends), so test runs leave nothing behind in the temp directory.
    fn temp_dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("ember-formats-{name}-"))
            .tempdir()
            .expect("temp dir")
    }

    #[test]
    fn large_file_is_mapped_and_equals_its_contents() {
        let dir = temp_dir("map");
        let dir = dir.path();
        let path = dir.join("big.folded");
        let text = "a;b;c 1\n".repeat(20_000);
        std::fs::write(&path, &text).expect("write");
        let mapped = read_bytes(&path).expect("read");
        assert!(mapped.is_mapped());
        assert_eq!(&mapped[..], text.as_bytes());
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn empty_small_and_missing_files() {
        let dir = temp_dir("small");
        let dir = dir.path();
        let empty = dir.join("empty");
        std::fs::write(&empty, b"").expect("write");
        let got = read_bytes(&empty).expect("empty file");
        assert!(got.is_empty() && !got.is_mapped());
        let small = dir.join("small");
        std::fs::write(&small, b"a 1\n").expect("write");
        assert_eq!(&read_bytes(&small).expect("small")[..], b"a 1\n");
        let missing = read_bytes(&dir.join("missing")).expect_err("missing file");
        assert!(missing.to_string().contains("missing"), "{missing}");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn gzip_is_undone_under_the_cap() {
        use std::io::Write;
        let dir = temp_dir("gzip");
        let dir = dir.path();
        let path = dir.join("stacks.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&b"a;b 1\n".repeat(1000)).expect("gzip");
        std::fs::write(&path, gz.finish().expect("gzip")).expect("write");
        assert_eq!(read_bytes(&path).expect("gunzip").len(), 6000);
        let err = read_bytes_with_limit(&path, 5999).expect_err("over the cap");
        assert!(err.to_string().contains("size limit"), "{err}");
        std::fs::remove_dir_all(dir).ok();
    }
}
