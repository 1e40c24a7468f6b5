//! The head's two largest lookup tables, made for ingest's access pattern: the stack
//! tree's children by `(parent, location)` and stack leaves by 128-bit fingerprint.
//!
//! Each is open addressing with linear probing over plain slots. Why not a `HashMap`: a
//! profile looks up hundreds of stacks and, for new stacks, children in tables of
//! hundreds of thousands of entries, a cache miss each, and a `HashMap` lookup's branches
//! depend on the slots it loads, so the misses of independent lookups came one after the
//! other. Here the slot of a key is known before it is read (`touch`), so a caller first
//! reads the slots of a whole batch of lookups (their misses overlap, nothing waits on
//! them), then looks the keys up in cache. Both tables grow at 3/4 full, where a probe for
//! a missing key reads ~8 slots, one or two cache lines.

/// The stack tree's child table: node id by `(parent node, location)`, open addressing
/// with linear probing over `[parent, location, node]` slots (12 bytes: the size of a
/// `HashMap` entry without its control byte).
///
/// Why not a `HashMap`: a walk of new stacks looks up hundreds of children per profile in
/// a table of millions, a cache miss each, and each lookup's branches depend on the
/// loaded slot, so the misses of independent lookups came one after the other. Here the
/// slot of a key is known before it is read ([`NodeTable::touch`]), so the walk first
/// reads the slots of all its next steps, letting their misses overlap, then looks them
/// up in cache.
#[derive(Debug, Default)]
pub(crate) struct NodeTable {
    /// `[parent, location, node]`; a slot with [`FREE`] as parent and location is free.
    /// Empty or a power of two long.
    slots: Vec<[u32; 3]>,
    /// Entries held.
    len: usize,
    /// The node of the key that marks free slots, should it ever be used.
    free_key: Option<u32>,
}

/// Parent and location of a free slot.
const FREE: u32 = u32::MAX;

impl NodeTable {
    /// The first slot to probe for a key (`slots` not empty): the high bits of a
    /// multiplicative hash, which depend on every bit of the key.
    #[inline(always)]
    fn home(&self, parent: u32, location: u32) -> usize {
        let key = u64::from(parent) << 32 | u64::from(location);
        let bits = self.slots.len().trailing_zeros().max(1);
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize & (self.slots.len() - 1)
    }

    /// Reads the home slot of `(parent, location)` and returns part of it, for a caller to
    /// fold into a value it keeps (`std::hint::black_box`), so that the slot is in cache
    /// when it is looked up.
    #[inline(always)]
    pub(crate) fn touch(&self, parent: u32, location: u32) -> u32 {
        match self.slots.is_empty() {
            true => 0,
            false => self.slots[self.home(parent, location)][2],
        }
    }

    /// The node of `(parent, location)`, if any.
    #[inline]
    pub(crate) fn get(&self, parent: u32, location: u32) -> Option<u32> {
        if parent == FREE && location == FREE {
            return self.free_key;
        }
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(parent, location);
        loop {
            let [p, l, node] = self.slots[i];
            if p == parent && l == location {
                return Some(node);
            }
            if p == FREE && l == FREE {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `(parent, location) → node`; the key must not be in the table.
    pub(crate) fn insert(&mut self, parent: u32, location: u32, node: u32) {
        if parent == FREE && location == FREE {
            self.free_key = Some(node);
            return;
        }
        // At most 3/4 full: a probe for a missing key then reads ~8 slots, two lines.
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        self.place([parent, location, node]);
        self.len += 1;
    }

    fn place(&mut self, slot: [u32; 3]) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(slot[0], slot[1]);
        while self.slots[i][0] != FREE || self.slots[i][1] != FREE {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, vec![[FREE, FREE, 0]; size]);
        for slot in old {
            if slot[0] != FREE || slot[1] != FREE {
                self.place(slot);
            }
        }
    }

    /// Heap bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<[u32; 3]>()
    }
}

/// Leaf node by stack fingerprint: `(low half, high half, node)` slots; a slot whose key
/// is 0 is free.
#[derive(Debug, Default)]
pub(crate) struct StackTable {
    /// Empty or a power of two long.
    slots: Vec<(u64, u64, u32)>,
    /// Entries held.
    len: usize,
    /// The node of the fingerprint 0 (which marks free slots), should one ever be made.
    zero_key: Option<u32>,
}

impl StackTable {
    /// The first slot to probe for `key` (`slots` not empty): its low bits, which are as
    /// random as the fingerprint's keys.
    #[inline(always)]
    fn home(&self, key: u128) -> usize {
        (key as u64 as usize) & (self.slots.len() - 1)
    }

    /// Reads the home slot of `key` and returns part of it (see [`NodeTable::touch`]).
    #[inline(always)]
    pub(crate) fn touch(&self, key: u128) -> u32 {
        match self.slots.is_empty() {
            true => 0,
            false => self.slots[self.home(key)].2,
        }
    }

    /// The leaf of the stack with fingerprint `key`, if known.
    #[inline]
    pub(crate) fn get(&self, key: u128) -> Option<u32> {
        let (lo, hi) = (key as u64, (key >> 64) as u64);
        if key == 0 {
            return self.zero_key;
        }
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let (l, h, node) = self.slots[i];
            if l == lo && h == hi {
                return Some(node);
            }
            if l == 0 && h == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Sets the leaf of `key` (replacing a known one).
    pub(crate) fn insert(&mut self, key: u128, node: u32) {
        if key == 0 {
            self.zero_key = Some(node);
            return;
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        if self.place((key as u64, (key >> 64) as u64, node)) {
            self.len += 1;
        }
    }

    /// Puts `slot` at its key's place; returns whether the key is new.
    fn place(&mut self, slot: (u64, u64, u32)) -> bool {
        let mask = self.slots.len() - 1;
        let mut i = self.home(u128::from(slot.1) << 64 | u128::from(slot.0));
        loop {
            let (l, h, _) = self.slots[i];
            if l == 0 && h == 0 {
                self.slots[i] = slot;
                return true;
            }
            if l == slot.0 && h == slot.1 {
                self.slots[i].2 = slot.2;
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, vec![(0, 0, 0); size]);
        for slot in old {
            if slot.0 != 0 || slot.1 != 0 {
                self.place(slot);
            }
        }
    }

    /// Heap bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<(u64, u64, u32)>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tables_agree_with_a_map_through_growth_and_odd_keys() {
        let mut nodes = NodeTable::default();
        let mut stacks = StackTable::default();
        let mut want_nodes = std::collections::HashMap::new();
        let mut want_stacks = std::collections::HashMap::new();
        // Keys that collide in their low bits, the free-slot markers, and enough of them
        // to grow the tables several times.
        let mut node_keys: Vec<(u32, u32)> = (0..5000u32).map(|i| (i / 7, i % 7 * 1024)).collect();
        node_keys.push((u32::MAX, u32::MAX));
        node_keys.push((u32::MAX, 0));
        node_keys.push((0, u32::MAX));
        for (n, &(p, l)) in node_keys.iter().enumerate() {
            assert_eq!(nodes.get(p, l), None);
            nodes.insert(p, l, n as u32);
            want_nodes.insert((p, l), n as u32);
        }
        let mut stack_keys: Vec<u128> = (0..5000u128).map(|i| i << 64 | (i % 3) << 20).collect();
        stack_keys.push(0);
        stack_keys.push(u128::MAX);
        for (n, &k) in stack_keys.iter().enumerate() {
            stacks.insert(k, n as u32);
            want_stacks.insert(k, n as u32);
        }
        // Setting a known key replaces its node.
        stacks.insert(stack_keys[10], 77);
        want_stacks.insert(stack_keys[10], 77);
        for (&(p, l), &n) in &want_nodes {
            assert_eq!(nodes.get(p, l), Some(n));
            let _ = nodes.touch(p, l);
        }
        for (&k, &n) in &want_stacks {
            assert_eq!(stacks.get(k), Some(n));
            let _ = stacks.touch(k);
        }
        assert_eq!(nodes.get(3, 5), None);
        assert_eq!(stacks.get(5 << 64 | 1), None);
        assert_eq!(stacks.get(12345 << 64), None);
        assert!(nodes.bytes() >= 5000 * 12 && stacks.bytes() >= 5000 * 24);
    }
}
