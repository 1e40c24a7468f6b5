//! A small FxHash-style hasher for the stack-count map.
//!
//! Keys are folded stacks we built ourselves from a trusted pipeline, so HashDoS resistance
//! (what std's SipHash pays for) buys nothing here while costing a large share of the fold
//! time; a word-at-a-time multiply-rotate hash is several times faster on long keys.

use std::hash::Hasher;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// Word-at-a-time multiply/rotate hasher (the scheme rustc uses internally).
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            let mut word = [0u8; 8];
            word[..tail.len()].copy_from_slice(tail);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The SwissTable uses the top 7 bits as a tag; the multiply already mixes low input
        // bits upwards, a final fold spreads the high bits back down for the bucket index.
        self.hash ^ (self.hash >> 29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, BuildHasherDefault};

    #[test]
    fn distinct_keys_hash_differently() {
        let b = BuildHasherDefault::<FxHasher>::default();
        let a = b.hash_one(b"java;main;foo".as_slice());
        let c = b.hash_one(b"java;main;fop".as_slice());
        let d = b.hash_one(b"java;main;foo\0".as_slice());
        assert_ne!(a, c);
        assert_ne!(a, d);
    }
}
