//! The ingest side's lookups into a tenant's head that are tuned for speed: symbol strings
//! by the bytes a profile sends, and whole stacks by a keyed fingerprint, new ones walked
//! into the stack tree together.

use super::TenantHead;

impl TenantHead {
    /// [`TenantHead::intern`] for a string of a symbol (a function's name or file, a
    /// mapping's file or build id) given as the profile's bytes: the id of the string those
    /// bytes read as (invalid UTF-8 repaired with U+FFFD, as everywhere), found in a table
    /// of symbol strings only.
    pub(crate) fn intern_symbol(&mut self, raw: &[u8]) -> u32 {
        if let Some(&id) = self.symbol_ids.get(raw) {
            return id;
        }
        let id = self.intern(&String::from_utf8_lossy(raw));
        self.symbol_ids.insert(raw.into(), id);
        id
    }

    /// The leaf node of the stack `locations` (interned location ids, leaf first), created
    /// if new; see [`TenantHead::stacks`].
    pub fn stack(&mut self, locations: &[u32]) -> u32 {
        self.stacks([locations]).first().copied().unwrap_or(0)
    }

    /// [`TenantHead::stack`] of each of `stacks`, in order. A stack seen before is found by
    /// its 128-bit keyed fingerprint alone (see the `fingerprint` module); checking each hit frame
    /// by frame (a cache miss per frame in a tree of millions of nodes) cost more than the
    /// rest of the stack's ingest.
    pub fn stacks<'s>(&mut self, stacks: impl IntoIterator<Item = &'s [u32]>) -> Vec<u32> {
        let keys = self.fingerprint_keys;
        let keyed: Vec<(u128, &[u32])> = stacks
            .into_iter()
            .map(|s| {
                let mut f = keys.start();
                // Not a fingerprint of content (see `stack_key_of_content`): a domain word
                // keeps the two kinds of key apart.
                f.word(u64::MAX);
                for &l in s {
                    f.word(u64::from(l));
                }
                (f.finish(), s)
            })
            .collect();
        let mut leaves = self.known_stacks(keyed.iter().map(|k| k.0));
        let new: Vec<(u128, &[u32])> = keyed
            .iter()
            .zip(&leaves)
            .filter(|(_, leaf)| leaf.is_none())
            .map(|(k, _)| *k)
            .collect();
        let mut made = self.walk_stacks(&new).into_iter();
        for leaf in leaves.iter_mut().filter(|l| l.is_none()) {
            *leaf = made.next();
        }
        leaves.into_iter().map(|l| l.unwrap_or(0)).collect()
    }

    /// The location interned for the content fingerprint `print` (see
    /// [`TenantHead::remember_location`]), if any.
    pub(crate) fn location_by_print(&self, print: u128) -> Option<u32> {
        self.location_prints.get(&print).copied()
    }

    /// Remembers that the location whose content fingerprint (under this head's keys) is
    /// `print` was interned as `id`.
    pub(crate) fn remember_location(&mut self, print: u128, id: u32) {
        self.location_prints.insert(print, id);
    }

    /// The sample label set remembered for the raw-label fingerprint `print` (see
    /// [`TenantHead::remember_label_set`]), if any.
    pub(crate) fn label_set_by_print(&self, print: u128) -> Option<u32> {
        self.label_set_prints.get(&print).copied()
    }

    /// Remembers that a sample whose labels, as the profile sent them, have the keyed
    /// fingerprint `print` is in label set `set`.
    pub(crate) fn remember_label_set(&mut self, print: u128, set: u32) {
        self.label_set_prints.insert(print, set);
    }

    /// The keys of this head's stack fingerprints.
    pub(crate) fn fingerprints(&self) -> super::fingerprint::FingerprintKeys {
        self.fingerprint_keys
    }

    /// The leaf node of each stack key already known, in order (None for new ones). The
    /// lookups do not depend on each other, so their cache misses in a table of millions
    /// of stacks overlap instead of coming one after the other.
    pub(crate) fn known_stacks(&self, keys: impl IntoIterator<Item = u128>) -> Vec<Option<u32>> {
        keys.into_iter().map(|k| self.stack_leaves.get(k)).collect()
    }

    /// [`TenantHead::known_stacks`] into `leaves` (cleared first), `u32::MAX` for a new
    /// stack: no allocation per profile. The keys go in chunks: each chunk's slots are
    /// read first, so their cache misses overlap, then looked up.
    pub(crate) fn known_stacks_into(
        &self,
        keys: impl Iterator<Item = u128> + Clone,
        leaves: &mut Vec<u32>,
    ) {
        const CHUNK: usize = 32;
        leaves.clear();
        let mut keys = keys.peekable();
        while keys.peek().is_some() {
            let chunk = keys.clone().take(CHUNK);
            std::hint::black_box(chunk.fold(0u32, |t, k| t ^ self.stack_leaves.touch(k)));
            leaves.extend(
                keys.by_ref()
                    .take(CHUNK)
                    .map(|k| self.stack_leaves.get(k).unwrap_or(u32::MAX)),
            );
        }
    }

    /// Walks each new stack `(key, interned locations leaf first)` into the stack tree and
    /// remembers its leaf under its key; returns the leaves in order.
    pub(crate) fn walk_stacks(&mut self, stacks: &[(u128, &[u32])]) -> Vec<u32> {
        let n = stacks.len();
        let mut leaves = vec![0u32; n];
        // The stacks are walked from the root together, one frame of each per pass: the
        // steps of one walk wait on each other (a child's key holds its parent), those of
        // different walks do not, so their misses in the (large) node table overlap.
        //
        // New stacks mostly share their callers (a deploy renames a function: every stack
        // through it is new). Sorted root first, a stack shares the longest such prefix
        // with the one before it, and takes that one's nodes for it instead of looking
        // each frame up again in the node table.
        let root_first = |i: usize| stacks[i].1.iter().rev();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by(|&a, &b| root_first(a).cmp(root_first(b)));
        // shared[j]: frames the j-th stack in that order shares, root first, with the one
        // before it.
        let shared: Vec<usize> = (0..n)
            .map(|j| match j.checked_sub(1) {
                Some(prev) => root_first(order[prev])
                    .zip(root_first(order[j]))
                    .take_while(|(a, b)| a == b)
                    .count(),
                None => 0,
            })
            .collect();
        // The node each walk (by sorted position) is at.
        let mut at = vec![0u32; n];
        let mut walks: Vec<usize> = (0..n).collect();
        let mut depth = 0;
        while !walks.is_empty() {
            // The slots of this depth's lookups first: reads that nothing waits on, so
            // their misses overlap (see `NodeTable`).
            let mut touched = 0u32;
            for &j in &walks {
                let locations = stacks[order[j]].1;
                if let Some(frame) = locations.len().checked_sub(depth + 1)
                    && shared[j] <= depth
                {
                    touched ^= self.node_ids.touch(at[j], locations[frame]);
                }
            }
            std::hint::black_box(touched);
            walks.retain(|&j| {
                let (key, locations) = stacks[order[j]];
                match locations.len().checked_sub(depth + 1) {
                    Some(frame) => {
                        // The walk before (j - 1) is at least this deep and has taken this
                        // step already in this pass.
                        at[j] = if shared[j] > depth {
                            at[j - 1]
                        } else {
                            self.child(at[j], locations[frame])
                        };
                        true
                    }
                    None => {
                        leaves[order[j]] = at[j];
                        self.stack_leaves.insert(key, at[j]);
                        false
                    }
                }
            });
            depth += 1;
        }
        leaves
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FunctionSym, LocationSym};
    use super::*;

    /// A head with one function per name and one location per function; returns the
    /// locations' ids.
    fn head_with(names: &[&str]) -> (TenantHead, Vec<u32>) {
        let mut h = TenantHead::new();
        let file = h.intern("main.go");
        let locations = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let name = h.intern(n);
                let f = h.function(FunctionSym {
                    name,
                    system_name: name,
                    filename: file,
                    start_line: 1,
                });
                h.location(LocationSym {
                    mapping: 0,
                    address: 0x1000 + i as u64,
                    lines: Box::new([(f, 10 + i as i64)]),
                    is_folded: false,
                })
            })
            .collect();
        (h, locations)
    }

    #[test]
    fn stacks_walked_together_are_the_stacks_walked_one_by_one() {
        let names = ["main", "serve", "handle", "parse", "write", "gc"];
        let (mut together, l) = head_with(&names);
        let (mut one_by_one, _) = head_with(&names);
        // Leaf first. Shared roots, one stack inside another, the same stack twice in one
        // batch, different depths, an empty stack.
        let batch: Vec<Vec<u32>> = vec![
            vec![l[3], l[2], l[1], l[0]],
            vec![l[4], l[2], l[1], l[0]],
            vec![l[1], l[0]],
            vec![l[3], l[2], l[1], l[0]],
            vec![l[5]],
            vec![],
            vec![l[0], l[0], l[0], l[4], l[2], l[1], l[0]],
        ];
        let leaves = together.stacks(batch.iter().map(|s| &s[..]));
        let singles: Vec<u32> = batch.iter().map(|s| one_by_one.stack(s)).collect();
        assert_eq!(leaves.len(), batch.len());
        assert_eq!(leaves[0], leaves[3], "one stack, one leaf");
        assert_eq!(leaves[5], 0, "the empty stack is the root");
        for (i, stack) in batch.iter().enumerate() {
            assert_eq!(together.stack_locations(leaves[i]), *stack, "stack {i}");
            assert_eq!(one_by_one.stack_locations(singles[i]), *stack, "stack {i}");
            assert_eq!(together.path(leaves[i]), one_by_one.path(singles[i]));
        }
        // Same nodes, only perhaps numbered in another order.
        assert_eq!(together.node_count(), one_by_one.node_count());
        assert_eq!(together.frame_count(), one_by_one.frame_count());
        // Known now: found by hash, nothing new made.
        let nodes = together.node_count();
        assert_eq!(together.stacks(batch.iter().map(|s| &s[..])), leaves);
        assert_eq!(together.node_count(), nodes);
    }

    #[test]
    fn many_stacks_sharing_callers_walk_to_the_nodes_of_walks_from_the_root() {
        // Stacks over a few locations, so many share callers with each other (the prefix
        // one walk takes from the one before it in root-first order), repeat exactly, or
        // are another's callers; some batches meet stacks of earlier batches.
        let names: Vec<String> = (0..6).map(|i| format!("f{i}")).collect();
        let names: Vec<&str> = names.iter().map(|s| &s[..]).collect();
        let (mut together, l) = head_with(&names);
        let (mut one_by_one, _) = head_with(&names);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20 {
            let batch: Vec<Vec<u32>> = (0..60)
                .map(|_| {
                    let depth = (next() % 9) as usize;
                    (0..depth).map(|_| l[(next() % 3) as usize]).collect()
                })
                .collect();
            let leaves = together.stacks(batch.iter().map(|s| &s[..]));
            for (stack, leaf) in batch.iter().zip(&leaves) {
                let single = one_by_one.stack(stack);
                assert_eq!(together.stack_locations(*leaf), *stack);
                assert_eq!(together.path(*leaf), one_by_one.path(single));
            }
            assert_eq!(together.node_count(), one_by_one.node_count());
            assert_eq!(together.frame_count(), one_by_one.frame_count());
        }
    }

    #[test]
    fn symbol_strings_have_the_string_tables_ids() {
        let mut h = TenantHead::new();
        let main = h.intern("main");
        assert_eq!(h.intern_symbol(b"main"), main, "interned before as a label");
        let serve = h.intern_symbol(b"serve");
        assert_eq!(h.intern("serve"), serve, "interned first as a symbol");
        assert_eq!(h.intern_symbol(b"serve"), serve, "found again");
        // Invalid UTF-8 reads as its repaired text, as `ProfileView::string` gives it.
        let bad = h.intern_symbol(b"ma\xffin");
        assert_eq!(h.string(bad), "ma\u{fffd}in");
        assert_eq!(h.intern("ma\u{fffd}in"), bad);
        assert_eq!(h.intern_symbol("ma\u{fffd}in".as_bytes()), bad);
        assert_eq!(h.intern_symbol(b""), 0, "string 0 is the empty string");
    }
}
