//! Fast non-cryptographic hashing for the stack-count map: a two-lane folded-multiply hash
//! for whole stacks, and a pass-through hasher for keys that carry that hash precomputed.
//!
//! Keys are folded stacks we built ourselves from a trusted pipeline, so HashDoS resistance
//! (what std's SipHash pays for) buys nothing here while costing a large share of the fold
//! time. Keys can be long (C++ and Rust symbols, deep stacks), so the hash runs two
//! independent multiply chains (16 bytes each per step) rather than one serial chain.

use std::hash::Hasher;

/// 64×64→128-bit multiply, high and low halves folded together (the wyhash/foldhash mixer).
#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

const K0: u64 = 0x2d35_8dcc_aa6c_78a5;
const K1: u64 = 0x8bb8_4b93_962e_acc9;
const K2: u64 = 0x4b33_a62e_d433_d4a3;
const K3: u64 = 0x4d5a_2da5_1de1_aa47;

#[inline]
fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline]
fn half(bytes: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Hashes a whole byte string (a folded stack) to 64 well-mixed bits: both the low bits (the
/// table index) and the top bits (the SwissTable tag) depend on every input byte.
pub(crate) fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut a = K0 ^ bytes.len() as u64;
    let mut b = K1;
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        // Two independent chains: their multiplies overlap in the pipeline.
        a = fold_mul(word(block, 0) ^ a, word(block, 8) ^ K2);
        b = fold_mul(word(block, 16) ^ b, word(block, 24) ^ K3);
    }
    let tail = blocks.remainder();
    // The tail (< 32 bytes) is read as (possibly overlapping) words, without copying it: the
    // length mixed into `a` keeps tails that read the same words apart.
    let n = tail.len();
    if n > 16 {
        a = fold_mul(word(tail, 0) ^ a, word(tail, 8) ^ K2);
        b = fold_mul(word(tail, n - 16) ^ b, word(tail, n - 8) ^ K3);
    } else if n >= 8 {
        a = fold_mul(word(tail, 0) ^ a, word(tail, n - 8) ^ K2);
    } else if n >= 4 {
        let lo = u64::from(half(tail, 0));
        let hi = u64::from(half(tail, n - 4));
        a = fold_mul(lo ^ a, hi ^ K2);
    } else if n > 0 {
        let bytes = u64::from(tail[0]) | u64::from(tail[n / 2]) << 8 | u64::from(tail[n - 1]) << 16;
        a = fold_mul(bytes ^ a, K2);
    }
    fold_mul(a ^ K1, b ^ K0)
}

/// A hasher for keys whose `Hash` impl writes one precomputed, already mixed `u64`: it passes
/// that value through instead of hashing it again.
#[derive(Default, Clone, Copy)]
pub(crate) struct PrehashedHasher {
    hash: u64,
}

impl Hasher for PrehashedHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Not used by our keys; stay correct for anything else.
        self.hash = hash_bytes(bytes) ^ self.hash.rotate_left(17);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.hash = i;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_stacks_hash_differently() {
        assert_ne!(hash_bytes(b"java;main;foo"), hash_bytes(b"java;main;fop"));
        assert_ne!(hash_bytes(b"java;main;foo"), hash_bytes(b"java;main;foo\0"));
    }

    #[test]
    fn stack_hash_depends_on_every_byte_and_the_length() {
        let base: Vec<u8> = (0..100u8).collect();
        let h = hash_bytes(&base);
        for i in 0..base.len() {
            let mut changed = base.clone();
            changed[i] ^= 1;
            assert_ne!(hash_bytes(&changed), h, "byte {i}");
        }
        for len in 0..base.len() {
            assert_ne!(hash_bytes(&base[..len]), h, "prefix {len}");
        }
        let mut zero_padded = base.clone();
        zero_padded.push(0);
        assert_ne!(hash_bytes(&zero_padded), h);
        assert_ne!(hash_bytes(b""), hash_bytes(b"\0"));
    }
}
