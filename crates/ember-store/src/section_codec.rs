//! How a block's sections and rollups are compressed: zstd at level 1 for what a flush or
//! a compaction writes; gzip, which blocks written before it used, still reads.
//!
//! Why zstd: every block is compressed while the server ingests (each flush, then each
//! compaction rewrites a profile about once per size class) and decompressed by every
//! query that misses the cache. On the realistic high-churn day's head (26 MB encoded,
//! mostly varints), zlib level 2 took ~580 ms to compress and ~130 ms to decompress for
//! 16.8 MB; zstd level 1 took ~76 ms and ~44 ms for 16.4 MB (C implementations of both,
//! one 2,000-profile flush; figures in BENCHMARKS.md). The two are told apart by their
//! magic numbers, so no block format version was needed.

use std::io::Read;

/// The first bytes of a zstd frame.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The first bytes of a gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// zstd's fastest regular level: the ratio of level 3 gained ~5 % at three times the CPU.
const LEVEL: i32 = 1;
/// The level of time chunks ([`Compressor::for_chunks`]): since they hold the profiles'
/// columns (the current block format) they are most of a block, and level 3 takes them
/// 3.3 % smaller (~175 bytes a profile of the realistic workload) for ~0.01 ms of CPU a
/// profile each time they are written; level 3 on the whole block cost ~20 % more flush and
/// compaction CPU (BENCHMARKS.md, session 19). Decompression is as fast at either level.
const CHUNK_LEVEL: i32 = 3;

/// Compresses the pieces of one block, one zstd frame each, with one compression context
/// for them all: a fresh context per piece allocated and cleared its tables and buffers
/// again, for each of the tens of time chunks of a flush.
pub(crate) struct Compressor {
    /// `None` when it could not be created (a failed allocation): every piece then fails.
    inner: Option<zstd::bulk::Compressor<'static>>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").finish_non_exhaustive()
    }
}

impl Compressor {
    /// A compressor at [`LEVEL`].
    pub(crate) fn new() -> Compressor {
        Self::at(LEVEL)
    }

    /// A compressor for time chunks, at [`CHUNK_LEVEL`].
    pub(crate) fn for_chunks() -> Compressor {
        Self::at(CHUNK_LEVEL)
    }

    fn at(level: i32) -> Compressor {
        // One frame with its content size in the header (the reader sizes its output from
        // it) and a checksum of the content, as gzip had: a flipped bit in a block is an
        // error that quarantines it, not a silently different profile.
        let inner = zstd::bulk::Compressor::new(level)
            .and_then(|mut c| c.include_checksum(true).map(|()| c))
            .ok();
        Compressor { inner }
    }

    /// `raw` compressed, as one frame.
    pub(crate) fn compress(&mut self, raw: &[u8]) -> std::io::Result<Vec<u8>> {
        match &mut self.inner {
            Some(c) => c.compress(raw),
            None => Err(std::io::Error::other("no zstd context")),
        }
    }
}

/// One zstd frame written piece by piece (level and checksum as [`Compressor`]'s), for a
/// piece too large to gather raw first: a compaction's merged head. Its frame header
/// does not state the content size (not known until the end), which [`decompress`] reads
/// by streaming.
pub(crate) struct StreamCompressor {
    inner: zstd::stream::write::Encoder<'static, Vec<u8>>,
}

impl StreamCompressor {
    /// A frame about to be written; an error only when zstd cannot allocate its context.
    pub(crate) fn new() -> std::io::Result<StreamCompressor> {
        let mut inner = zstd::stream::write::Encoder::new(Vec::new(), LEVEL)?;
        inner.include_checksum(true)?;
        Ok(StreamCompressor { inner })
    }

    /// Adds `raw` to the frame.
    pub(crate) fn write(&mut self, raw: &[u8]) -> std::io::Result<()> {
        std::io::Write::write_all(&mut self.inner, raw)
    }

    /// The compressed frame.
    pub(crate) fn finish(self) -> std::io::Result<Vec<u8>> {
        self.inner.finish()
    }
}

/// The bytes `compressed` holds, zstd or gzip; an error for anything else or a damaged
/// stream.
pub(crate) fn decompress(compressed: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if compressed.starts_with(&ZSTD_MAGIC) {
        // The frame header holds the content size: decompressed in one call into one
        // allocation of that size (the streaming reader copied every byte once more, through
        // its own buffer: ~5 % of a cold week's flame graph). The frame's checksum is checked
        // either way.
        if let Ok(Some(size)) = zstd::zstd_safe::get_frame_content_size(compressed)
            && let Ok(size) = usize::try_from(size)
            && size <= 1 << 30
        {
            return zstd::bulk::decompress(compressed, size);
        }
        // A frame written piece by piece: its size is not in the header. Varint columns
        // compress 1.6 to 1.8 times; reserving for twice the frame spares most regrowth.
        bytes.reserve(compressed.len().saturating_mul(2));
        zstd::stream::read::Decoder::with_buffer(compressed)?.read_to_end(&mut bytes)?;
    } else if compressed.starts_with(&GZIP_MAGIC) {
        flate2::read::GzDecoder::new(compressed).read_to_end(&mut bytes)?;
    } else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "neither zstd nor gzip",
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_codecs_read_and_anything_else_is_an_error() {
        let raw: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut c = Compressor::new();
        let out = c.compress(&raw).unwrap();
        assert!(out.len() < raw.len() / 4);
        assert_eq!(decompress(&out).unwrap(), raw);
        // The context is reused: the next frame stands alone.
        let again = c.compress(&raw[..1000]).unwrap();
        assert_eq!(decompress(&again).unwrap(), &raw[..1000]);
        let out = [b"prefix".as_slice(), &out].concat();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &raw).unwrap();
        assert_eq!(decompress(&gz.finish().unwrap()).unwrap(), raw);
        assert!(decompress(b"plain bytes").is_err());
        // A frame written piece by piece (no content size in its header) reads the same.
        let mut stream = StreamCompressor::new().unwrap();
        for piece in raw.chunks(7_000) {
            stream.write(piece).unwrap();
        }
        let streamed = stream.finish().unwrap();
        assert_eq!(
            zstd::zstd_safe::get_frame_content_size(&streamed).ok(),
            Some(None)
        );
        assert_eq!(decompress(&streamed).unwrap(), raw);
        let mut flipped = streamed.clone();
        let at = flipped.len() / 2;
        flipped[at] ^= 0x10;
        assert!(decompress(&flipped).is_err(), "the checksum catches it");
        let mut cut = out[6..].to_vec();
        cut.truncate(cut.len() / 2);
        assert!(decompress(&cut).is_err(), "a truncated frame is an error");
        // A flipped bit in the middle of the data: the checksum catches it.
        let mut flipped = out[6..].to_vec();
        let at = flipped.len() / 2;
        flipped[at] ^= 0x10;
        assert!(decompress(&flipped).is_err(), "a flipped bit is an error");
    }
}
