//! Fast lookups used on hot paths: id → table position, and a cheap hasher
//! for maps keyed by small integers or short integer slices.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher in the style of rustc's FxHash. The keys we hash are
/// interned ids we produced ourselves, so HashDoS resistance buys nothing and
/// SipHash would dominate merge time.
#[derive(Default, Clone, Copy)]
pub(crate) struct FastHasher(u64);

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// HashMap with [`FastHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// Maps an entity id (mapping, function or location) to its position in the
/// profile's table. Most producers number ids 1..=n in table order, which we
/// detect and serve without hashing.
#[derive(Debug)]
pub(crate) enum IdIndex {
    /// `id == position + 1` for every entry.
    Dense(usize),
    /// Arbitrary ids.
    Sparse(FastMap<u64, usize>),
}

impl IdIndex {
    /// Builds the index, or returns the position of the first zero or
    /// duplicate id as `Err((position, id, is_duplicate))`.
    pub(crate) fn build(
        ids: impl ExactSizeIterator<Item = u64>,
    ) -> Result<Self, (usize, u64, bool)> {
        let n = ids.len();
        let mut map: Option<FastMap<u64, usize>> = None;
        for (pos, id) in ids.enumerate() {
            if id == 0 {
                return Err((pos, 0, false));
            }
            if let Some(m) = map.as_mut() {
                if m.insert(id, pos).is_some() {
                    return Err((pos, id, true));
                }
            } else if id != pos as u64 + 1 {
                // Leaving the dense fast path: record everything seen so far.
                let mut m = FastMap::with_capacity_and_hasher(n, Default::default());
                for p in 0..pos {
                    m.insert(p as u64 + 1, p);
                }
                if m.insert(id, pos).is_some() {
                    return Err((pos, id, true));
                }
                map = Some(m);
            }
        }
        Ok(match map {
            Some(m) => IdIndex::Sparse(m),
            None => IdIndex::Dense(n),
        })
    }

    /// Position of `id`, if it exists.
    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<usize> {
        match self {
            IdIndex::Dense(n) => {
                if id >= 1 && id <= *n as u64 {
                    Some(id as usize - 1)
                } else {
                    None
                }
            }
            IdIndex::Sparse(m) => m.get(&id).copied(),
        }
    }
}

impl IdIndex {
    /// Like [`IdIndex::build`] but never fails: zero ids are unreachable and
    /// the first of duplicate ids wins. Used by operations that accept
    /// profiles which were never validated and must not panic on them.
    pub(crate) fn lenient(ids: impl ExactSizeIterator<Item = u64> + Clone) -> Self {
        match IdIndex::build(ids.clone()) {
            Ok(index) => index,
            Err(_) => {
                let mut m = FastMap::with_capacity_and_hasher(ids.len(), Default::default());
                for (pos, id) in ids.enumerate() {
                    if id != 0 {
                        m.entry(id).or_insert(pos);
                    }
                }
                IdIndex::Sparse(m)
            }
        }
    }
}
