//! Fast lookups used on hot paths: id → table position, and the map type for
//! keys of small integers, short integer slices and strings.

/// A `HashMap` with rustc's Fx hash. The keys we hash are interned ids and strings of the
/// profile being read, so HashDoS resistance buys nothing and SipHash would dominate merge
/// time.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

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
