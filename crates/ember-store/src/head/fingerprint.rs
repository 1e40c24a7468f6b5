//! 128-bit keyed fingerprints of symbols and stacks, so ingest can recognise a stack it has
//! seen before from the profile's own bytes, without interning its strings, functions and
//! locations first.
//!
//! Two independent 64-bit lanes, each a chain of folded multiplications (the 128-bit product
//! of the state and a key, its halves XORed) over 64-bit words, with keys drawn at random
//! for every head. Why not SipHash: a stack of 20 frames is 40 words, hashed for every
//! distinct stack of every profile, and SipHash's cost per word was a visible share of
//! ingest; why not a faster unkeyed hash: the fingerprint stands for the content (a hit is
//! never checked frame by frame), so a client must not be able to compute two inputs with
//! one fingerprint, and with secret per-process keys it cannot. A collision between honest
//! inputs needs both lanes to collide: about 2^-128 per pair.

use std::hash::BuildHasher;

/// The random keys of one head's fingerprints.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FingerprintKeys {
    /// Lane A's start state and multiplier.
    a: (u64, u64),
    /// Lane B's start state and multiplier.
    b: (u64, u64),
}

impl FingerprintKeys {
    /// Fresh keys from the standard library's per-process random source.
    pub(crate) fn random() -> Self {
        let s = std::hash::RandomState::new();
        // An odd multiplier with its high bit set keeps every folded product full width.
        let key = |i: u64| s.hash_one(i);
        let mult = |i: u64| key(i) | 1 | (1 << 63);
        FingerprintKeys {
            a: (key(1), mult(2)),
            b: (key(3), mult(4)),
        }
    }

    /// A fingerprint with nothing fed yet, under these keys.
    pub(crate) fn start(&self) -> Fingerprint {
        Fingerprint {
            a: self.a.0,
            b: self.b.0,
            ma: self.a.1,
            mb: self.b.1,
        }
    }
}

/// A fingerprint being computed: feed words, byte strings and other fingerprints in a fixed
/// order, then [`Fingerprint::finish`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fingerprint {
    a: u64,
    b: u64,
    ma: u64,
    mb: u64,
}

/// The 128-bit product of `x` and `m`, its two halves XORed.
#[inline(always)]
fn fold(x: u64, m: u64) -> u64 {
    let p = u128::from(x) * u128::from(m);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Fingerprint {
    /// Feeds one word to both lanes.
    #[inline(always)]
    pub(crate) fn word(&mut self, w: u64) {
        self.a = fold(self.a ^ w, self.ma);
        self.b = fold(self.b ^ w.rotate_left(32), self.mb);
    }

    /// Feeds another fingerprint: its low half to lane A, its high half to lane B, so two
    /// sequences of fingerprints differing anywhere differ in both lanes.
    #[inline(always)]
    pub(crate) fn print(&mut self, f: u128) {
        self.a = fold(self.a ^ f as u64, self.ma);
        self.b = fold(self.b ^ (f >> 64) as u64, self.mb);
    }

    /// Feeds a byte string, its length first: the words fed then tell where each string
    /// ends, so no two sequences of strings feed the same words (`"ab", "c"` and `"a", "bc"`
    /// differ, and so do strings whose bytes spell another's length). A length is below
    /// 2^63, so a caller may feed `u64::MAX` where a string could be as a marker of its own.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.word(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(w));
        }
    }

    /// The 128-bit fingerprint: each lane folded once more, so its last word is mixed too.
    #[inline(always)]
    pub(crate) fn finish(&self) -> u128 {
        let a = fold(self.a ^ 0x9e37_79b9_7f4a_7c15, self.ma);
        let b = fold(self.b ^ 0x6a09_e667_f3bc_c909, self.mb);
        (u128::from(b) << 64) | u128::from(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of_bytes(k: &FingerprintKeys, parts: &[&[u8]]) -> u128 {
        let mut f = k.start();
        for p in parts {
            f.bytes(p);
        }
        f.finish()
    }

    #[test]
    fn equal_inputs_agree_and_field_boundaries_count() {
        let k = FingerprintKeys::random();
        assert_eq!(of_bytes(&k, &[b"main.go"]), of_bytes(&k, &[b"main.go"]));
        assert_ne!(of_bytes(&k, &[b"ab", b"c"]), of_bytes(&k, &[b"a", b"bc"]));
        assert_ne!(of_bytes(&k, &[b""]), of_bytes(&k, &[b"\0"]));
        assert_ne!(of_bytes(&k, &[b"x"]), of_bytes(&k, &[b"x", b""]));
        // Other keys, other fingerprints.
        let other = FingerprintKeys::random();
        assert_ne!(of_bytes(&k, &[b"main.go"]), of_bytes(&other, &[b"main.go"]));
    }

    #[test]
    fn no_collisions_among_many_similar_inputs_in_either_half() {
        // Sequences that differ in one small word, the shape of stacks of nearby
        // location fingerprints: every fingerprint and every half of one is distinct.
        let k = FingerprintKeys::random();
        let mut whole = std::collections::HashSet::new();
        let mut low = std::collections::HashSet::new();
        let mut high = std::collections::HashSet::new();
        for i in 0..200_000u64 {
            let mut f = k.start();
            f.word(i % 1000);
            f.word(i / 1000);
            f.print(u128::from(i));
            let p = f.finish();
            assert!(whole.insert(p));
            assert!(low.insert(p as u64));
            assert!(high.insert((p >> 64) as u64));
        }
        // Order matters.
        let (mut x, mut y) = (k.start(), k.start());
        x.word(1);
        x.word(2);
        y.word(2);
        y.word(1);
        assert_ne!(x.finish(), y.finish());
    }
}
