//! The table of folded stacks: keys stored with their hash, the per-thread map, and the
//! sharded map the worker threads merge into.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Mutex;

use crate::fxhash::PrehashedHasher;

/// A folded stack (always valid UTF-8) stored with its hash.
///
/// The hash is computed once per sample and then reused for the shard choice, the table
/// lookup, every rehash and the final merge; equality checks the hash before touching the
/// (long) bytes, so a full comparison only happens on a real hit.
pub(crate) struct StackKey {
    hash: u64,
    bytes: Box<[u8]>,
}

impl StackKey {
    /// The stack's bytes.
    pub(crate) fn into_bytes(self) -> Box<[u8]> {
        self.bytes
    }
}

/// The view of a key that lookups use, so a probe can be a borrowed `(hash, &[u8])` without
/// allocating a `StackKey`.
pub(crate) trait StackLookup {
    fn stack_hash(&self) -> u64;
    fn stack_bytes(&self) -> &[u8];
}

impl StackLookup for StackKey {
    fn stack_hash(&self) -> u64 {
        self.hash
    }
    fn stack_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl StackLookup for (u64, &[u8]) {
    fn stack_hash(&self) -> u64 {
        self.0
    }
    fn stack_bytes(&self) -> &[u8] {
        self.1
    }
}

impl<'a> Borrow<dyn StackLookup + 'a> for StackKey {
    fn borrow(&self) -> &(dyn StackLookup + 'a) {
        self
    }
}

impl Hash for dyn StackLookup + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.stack_hash());
    }
}

impl PartialEq for dyn StackLookup + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.stack_hash() == other.stack_hash() && self.stack_bytes() == other.stack_bytes()
    }
}

impl Eq for dyn StackLookup + '_ {}

// `StackKey`'s own Hash/Eq must agree with the borrowed view's (the `Borrow` contract).
impl Hash for StackKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl PartialEq for StackKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.bytes == other.bytes
    }
}

impl Eq for StackKey {}

/// Stack counts keyed by the folded stack bytes and their precomputed hash.
pub(crate) type StackMap = HashMap<StackKey, u64, BuildHasherDefault<PrehashedHasher>>;

/// Where finished samples go.
pub(crate) trait Sink {
    /// Adds `weight` to the count of `stack`, whose [`hash_bytes`] is `hash`.
    fn add(&mut self, hash: u64, stack: &[u8], weight: u64);
}

/// Adds `weight` to `stack` in `map`, allocating only for a new stack.
pub(crate) fn add_to(map: &mut StackMap, hash: u64, stack: &[u8], weight: u64) {
    let probe: &dyn StackLookup = &(hash, stack);
    match map.get_mut(probe) {
        Some(count) => *count = count.saturating_add(weight),
        None => {
            map.insert(
                StackKey {
                    hash,
                    bytes: stack.into(),
                },
                weight,
            );
        }
    }
}

impl Sink for StackMap {
    fn add(&mut self, hash: u64, stack: &[u8], weight: u64) {
        add_to(self, hash, stack, weight);
    }
}

/// Number of independently locked parts of a [`SharedMap`]; plenty to keep a handful of
/// threads from ever waiting on each other.
const SHARDS: usize = 64;

/// A stack map shared by all worker threads, so a stack seen by several threads is stored
/// once (per-thread maps would multiply memory by the thread count on repetitive input).
pub(crate) struct SharedMap {
    shards: Vec<Mutex<StackMap>>,
}

impl SharedMap {
    pub(crate) fn new() -> Self {
        SharedMap {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(StackMap::default()))
                .collect(),
        }
    }

    fn shard(&self, hash: u64) -> &Mutex<StackMap> {
        // Middle bits: the map inside uses the low bits for buckets and the top ones as tags.
        &self.shards[(hash >> 32) as usize % SHARDS]
    }

    /// Adds every entry of `map`.
    pub(crate) fn absorb(&self, map: StackMap) {
        for (stack, weight) in map {
            let mut shard = self
                .shard(stack.hash)
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let slot = shard.entry(stack).or_insert(0);
            *slot = slot.saturating_add(weight);
        }
    }

    /// All entries, shard by shard.
    pub(crate) fn into_maps(self) -> impl Iterator<Item = StackMap> {
        self.shards
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Sink for &SharedMap {
    fn add(&mut self, hash: u64, stack: &[u8], weight: u64) {
        let mut shard = self.shard(hash).lock().unwrap_or_else(|e| e.into_inner());
        add_to(&mut shard, hash, stack, weight);
    }
}
