//! The head's largest lookup tables, made for ingest's access pattern: the stack tree's
//! children and the frame-name tree's by `(parent, id)`, and stack leaves, locations and
//! label sets by 128-bit fingerprint. Their slots are [`Words`], in huge pages when large.
//!
//! Each is open addressing with linear probing over plain slots. Why not a `HashMap`: a
//! profile looks up hundreds of stacks and, for new stacks, children in tables of
//! hundreds of thousands of entries, a cache miss each, and a `HashMap` lookup's branches
//! depend on the slots it loads, so the misses of independent lookups came one after the
//! other. Here the slot of a key is known before it is read (`touch`), so a caller first
//! reads the slots of a whole batch of lookups (their misses overlap, nothing waits on
//! them), then looks the keys up in cache. Both tables grow at 3/4 full, where a probe for
//! a missing key reads ~8 slots, one or two cache lines.

use super::words::Words;

/// The stack tree's child table: node id by `(parent node, location)`, open addressing
/// with linear probing over `[parent, location, node]` slots (12 bytes: the size of a
/// `HashMap` entry without its control byte). The frame-name tree's children by `(parent
/// frame, name)` are one too: it is as large, and so worth huge pages as much.
///
/// Why not a `HashMap`: a walk of new stacks looks up hundreds of children per profile in
/// a table of millions, a cache miss each, and each lookup's branches depend on the
/// loaded slot, so the misses of independent lookups came one after the other. Here the
/// slot of a key is known before it is read ([`NodeTable::touch`]), so the walk first
/// reads the slots of all its next steps, letting their misses overlap, then looks them
/// up in cache.
#[derive(Debug, Default)]
pub(crate) struct NodeTable {
    /// `[parent, location, node]` slots; a slot with [`FREE`] as parent and location is
    /// free. Empty or a power of two slots long.
    slots: Words,
    /// Entries held.
    len: usize,
    /// The node of the key that marks free slots, should it ever be used.
    free_key: Option<u32>,
}

/// Parent and location of a free slot.
const FREE: u32 = u32::MAX;

/// Words of a [`NodeTable`] slot.
const NODE: usize = 3;

/// Words of a [`StackTable`] slot: the key's four, low first, and the node.
const STACK: usize = 5;

impl NodeTable {
    /// The first slot to probe for a key (`slots` not empty): the high bits of a
    /// multiplicative hash, which depend on every bit of the key.
    #[inline(always)]
    fn home(&self, parent: u32, location: u32) -> usize {
        let key = u64::from(parent) << 32 | u64::from(location);
        let n = self.capacity();
        let bits = n.trailing_zeros().max(1);
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize & (n - 1)
    }

    /// Slots held.
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.slots.len() / NODE
    }

    /// Reads the home slot of `(parent, location)` and returns part of it, for a caller to
    /// fold into a value it keeps (`std::hint::black_box`), so that the slot is in cache
    /// when it is looked up.
    #[inline(always)]
    pub(crate) fn touch(&self, parent: u32, location: u32) -> u32 {
        match self.slots.is_empty() {
            true => 0,
            false => self.slots.word::<NODE>(self.home(parent, location), 2),
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
        let mask = self.capacity() - 1;
        let mut i = self.home(parent, location);
        loop {
            let [p, l, node] = self.slots.slot::<NODE>(i);
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
        if (self.len + 1) * 4 > self.capacity() * 3 {
            self.grow();
        }
        self.place([parent, location, node]);
        self.len += 1;
    }

    fn place(&mut self, slot: [u32; NODE]) {
        let mask = self.capacity() - 1;
        let mut i = self.home(slot[0], slot[1]);
        loop {
            let [p, l, _] = self.slots.slot::<NODE>(i);
            if p == FREE && l == FREE {
                break;
            }
            i = (i + 1) & mask;
        }
        self.slots.set_slot::<NODE>(i, slot);
    }

    fn grow(&mut self) {
        let size = (self.capacity() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, Words::new(size * NODE, FREE));
        for i in 0..old.len() / NODE {
            let slot = old.slot::<NODE>(i);
            if slot[0] != FREE || slot[1] != FREE {
                self.place(slot);
            }
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.bytes_held()
    }
}

/// A node (or other id) by 128-bit keyed fingerprint: `[key, low word first; node]` slots
/// of five words; a slot whose key is 0 is free. The head keeps stack leaves by stack
/// fingerprint in one, and location and label-set ids by content fingerprint in two more.
#[derive(Debug, Default)]
pub(crate) struct StackTable {
    /// Empty or a power of two slots long.
    slots: Words,
    /// Entries held.
    len: usize,
    /// The node of the fingerprint 0 (which marks free slots), should one ever be made.
    zero_key: Option<u32>,
}

/// The key's words, low first.
#[inline(always)]
fn key_words(key: u128) -> [u32; 4] {
    [
        key as u32,
        (key >> 32) as u32,
        (key >> 64) as u32,
        (key >> 96) as u32,
    ]
}

impl StackTable {
    /// The first slot to probe for `key` (`slots` not empty): its low bits, which are as
    /// random as the fingerprint's keys.
    #[inline(always)]
    fn home(&self, key: u128) -> usize {
        (key as u64 as usize) & (self.capacity() - 1)
    }

    /// Slots held.
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.slots.len() / STACK
    }

    /// Reads the home slot of `key` and returns part of it (see [`NodeTable::touch`]).
    #[inline(always)]
    pub(crate) fn touch(&self, key: u128) -> u32 {
        match self.slots.is_empty() {
            true => 0,
            false => self.slots.word::<STACK>(self.home(key), 4),
        }
    }

    /// The node of fingerprint `key`, if known.
    #[inline]
    pub(crate) fn get(&self, key: u128) -> Option<u32> {
        if key == 0 {
            return self.zero_key;
        }
        if self.slots.is_empty() {
            return None;
        }
        let want = key_words(key);
        let mask = self.capacity() - 1;
        let mut i = self.home(key);
        loop {
            let [a, b, c, d, node] = self.slots.slot::<STACK>(i);
            if [a, b, c, d] == want {
                return Some(node);
            }
            if [a, b, c, d] == [0; 4] {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// Sets the node of `key` (replacing a known one).
    pub(crate) fn insert(&mut self, key: u128, node: u32) {
        if key == 0 {
            self.zero_key = Some(node);
            return;
        }
        if (self.len + 1) * 4 > self.capacity() * 3 {
            self.grow();
        }
        if self.place(key, node) {
            self.len += 1;
        }
    }

    /// Puts `(key, node)` at its key's place; returns whether the key is new.
    fn place(&mut self, key: u128, node: u32) -> bool {
        let [a, b, c, d] = key_words(key);
        let mask = self.capacity() - 1;
        let mut i = self.home(key);
        loop {
            let [sa, sb, sc, sd, _] = self.slots.slot::<STACK>(i);
            let free = [sa, sb, sc, sd] == [0; 4];
            if free || [sa, sb, sc, sd] == [a, b, c, d] {
                self.slots.set_slot::<STACK>(i, [a, b, c, d, node]);
                return free;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let size = (self.capacity() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, Words::new(size * STACK, 0));
        for i in 0..old.len() / STACK {
            let [a, b, c, d, node] = old.slot::<STACK>(i);
            if [a, b, c, d] != [0; 4] {
                let key =
                    u128::from(a) | u128::from(b) << 32 | u128::from(c) << 64 | u128::from(d) << 96;
                self.place(key, node);
            }
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.bytes_held()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts `node_keys` and `stack_keys` (each with its position as node), sets one
    /// known stack key again, and checks every key against a `HashMap` of the same.
    fn agree_with_a_map(node_keys: &[(u32, u32)], stack_keys: &[u128]) -> (NodeTable, StackTable) {
        let mut nodes = NodeTable::default();
        let mut stacks = StackTable::default();
        let mut want_nodes = std::collections::HashMap::new();
        let mut want_stacks = std::collections::HashMap::new();
        for (n, &(p, l)) in node_keys.iter().enumerate() {
            assert_eq!(nodes.get(p, l), None);
            nodes.insert(p, l, n as u32);
            want_nodes.insert((p, l), n as u32);
        }
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
        (nodes, stacks)
    }

    #[test]
    fn the_tables_agree_with_a_map_through_growth_and_odd_keys() {
        // Keys that collide in their low bits, the free-slot markers, and enough of them
        // to grow the tables several times.
        let mut node_keys: Vec<(u32, u32)> = (0..5000u32).map(|i| (i / 7, i % 7 * 1024)).collect();
        node_keys.push((u32::MAX, u32::MAX));
        node_keys.push((u32::MAX, 0));
        node_keys.push((0, u32::MAX));
        let mut stack_keys: Vec<u128> = (0..5000u128).map(|i| i << 64 | (i % 3) << 20).collect();
        stack_keys.push(0);
        stack_keys.push(u128::MAX);
        let (nodes, stacks) = agree_with_a_map(&node_keys, &stack_keys);
        assert_eq!(nodes.get(3, 5), None);
        assert_eq!(stacks.get(5 << 64 | 1), None);
        assert_eq!(stacks.get(12345 << 64), None);
        assert!(nodes.bytes() >= 5000 * 12 && stacks.bytes() >= 5000 * 20);
        assert!(!nodes.slots.is_mapped() && !stacks.slots.is_mapped());
    }

    #[test]
    fn tables_in_huge_page_mappings_agree_with_a_map() {
        // Past `HUGE_FROM` bytes the slots move into a mapping: keys differing in every
        // word of a fingerprint, and ones differing only in one high word.
        let node_keys: Vec<(u32, u32)> = (0..150_000u32).map(|i| (i / 3, i % 3 * 77)).collect();
        let mut stack_keys: Vec<u128> = (1..150_000u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
            .collect();
        stack_keys.extend((1..100u128).map(|i| i << 96 | 5));
        let (nodes, stacks) = agree_with_a_map(&node_keys, &stack_keys);
        assert!(nodes.slots.is_mapped() && stacks.slots.is_mapped());
        assert_eq!(nodes.get(1, 1), None);
        assert_eq!(stacks.get(7 << 96 | 6), None);
        assert_eq!(stacks.get(7 << 96 | 5), Some(149_999 + 6));
    }
}
