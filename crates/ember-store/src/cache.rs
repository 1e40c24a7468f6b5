//! The decoded block sections queries read, kept under a memory budget.
//!
//! Owns the one trade of the lazy layout: decoding a section costs time (a day of a busy
//! service is hundreds of milliseconds), keeping it costs memory. Recently used sections stay
//! decoded until the budget ([`crate::StoreOptions::cache_bytes`]) is spent, then the least
//! recently used go. A section larger than the whole budget is decoded for the query that
//! needs it and dropped after. Sizes are [`TenantHead::approx_bytes`] estimates. Section
//! rollups ([`crate::rollup`]) and time chunks ([`crate::chunks`]) are cached the same way,
//! beside the heads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::StoreError;
use crate::block::Section;
use crate::chunks::Chunk;
use crate::head::TenantHead;
use crate::objects::Objects;
use crate::rollup::Rollup;

/// A decoded section or rollup.
#[derive(Debug, Clone)]
enum Decoded {
    Head(Arc<TenantHead>),
    Rollup(Arc<Rollup>),
    Chunk(Arc<Chunk>),
}

/// A decoded section or rollup and what it costs.
#[derive(Debug)]
struct Entry {
    value: Decoded,
    bytes: usize,
    used: u64,
    /// Used again since it was read: held in the protected share of the budget.
    protected: bool,
}

/// Cache key: a section's id and which of its parts (see [`HEAD`], [`ROLLUP`], [`chunk`]).
type Key = (u64, u32);

/// The part of a section's key of its decoded head.
const HEAD: u32 = 0;
/// The part of a section's key of its rollup.
const ROLLUP: u32 = 1;

/// The part of a section's key of its chunk at position `i`.
fn chunk(i: usize) -> u32 {
    2u32.saturating_add(u32::try_from(i).unwrap_or(u32::MAX - 2))
}

fn key(section: &Section, rollup: bool) -> Key {
    (section.id, if rollup { ROLLUP } else { HEAD })
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<Key, Entry>,
    bytes: usize,
    /// Bytes of the protected entries.
    protected: usize,
    clock: u64,
    hits: u64,
    misses: u64,
}

/// Decoded sections and rollups by section id, least recently used evicted first.
#[derive(Debug)]
pub(crate) struct BlockCache {
    budget: usize,
    state: Mutex<State>,
}

impl BlockCache {
    /// A cache holding at most `budget` bytes of decoded sections.
    pub(crate) fn new(budget: usize) -> Self {
        BlockCache {
            budget,
            state: Mutex::new(State::default()),
        }
    }

    /// The cached value under `key`, counting a hit or a miss.
    fn lookup(&self, key: Key) -> Option<Decoded> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.clock += 1;
        let now = st.clock;
        if let Some(e) = st.entries.get_mut(&key) {
            e.used = now;
            let value = e.value.clone();
            let promoted = !std::mem::replace(&mut e.protected, true);
            let bytes = e.bytes;
            st.hits += 1;
            if promoted {
                st.protected += bytes;
                self.demote(&mut st, key);
            }
            return Some(value);
        }
        st.misses += 1;
        None
    }

    /// The decoded head of `section`, from the cache or read now. Two queries missing the
    /// same section at once may both decode it; the second result replaces the first.
    pub(crate) fn get(
        &self,
        objects: &Objects,
        section: &Section,
    ) -> Result<Arc<TenantHead>, StoreError> {
        if let Some(Decoded::Head(head)) = self.lookup(key(section, false)) {
            return Ok(head);
        }
        // Decoded outside the lock: other queries keep using the cache meanwhile.
        let head = Arc::new(section.load(objects)?);
        self.keep(key(section, false), Decoded::Head(head.clone()));
        Ok(head)
    }

    /// The decoded rollup of `section` (`None` when its block has none), from the cache or
    /// read now.
    pub(crate) fn rollup(
        &self,
        objects: &Objects,
        section: &Section,
    ) -> Result<Option<Arc<Rollup>>, StoreError> {
        if section.rollup.is_none() {
            return Ok(None);
        }
        if let Some(Decoded::Rollup(r)) = self.lookup(key(section, true)) {
            return Ok(Some(r));
        }
        let Some(r) = section.load_rollup(objects)? else {
            return Ok(None);
        };
        let r = Arc::new(r);
        self.keep(key(section, true), Decoded::Rollup(r.clone()));
        Ok(Some(r))
    }

    /// The chunks at positions `wanted` (ascending) of `section`'s chunks, in order, from
    /// the cache or read now (adjacent missing ones in one ranged read).
    pub(crate) fn chunks(
        &self,
        objects: &Objects,
        section: &Section,
        wanted: &[usize],
    ) -> Result<Vec<Arc<Chunk>>, StoreError> {
        let mut got: Vec<Option<Arc<Chunk>>> = wanted
            .iter()
            .map(|i| match self.lookup((section.id, chunk(*i))) {
                Some(Decoded::Chunk(c)) => Some(c),
                _ => None,
            })
            .collect();
        let missing: Vec<usize> = wanted
            .iter()
            .zip(&got)
            .filter(|(_, g)| g.is_none())
            .map(|(i, _)| *i)
            .collect();
        section.load_chunks(objects, &missing, |i, c| {
            let c = Arc::new(c);
            self.keep((section.id, chunk(i)), Decoded::Chunk(c.clone()));
            if let Ok(p) = wanted.binary_search(&i) {
                got[p] = Some(c);
            }
        })?;
        Ok(got.into_iter().flatten().collect())
    }

    /// Caches `head` as the decoded `section` (a flush hands over the head it just wrote).
    pub(crate) fn insert(&self, section: &Section, head: TenantHead) {
        self.keep(key(section, false), Decoded::Head(Arc::new(head)));
    }

    /// Keeps the protected entries within 4/5 of the budget: the least recently used of them
    /// (never `keep`, the one just promoted) go back to probation.
    fn demote(&self, st: &mut State, keep: Key) {
        while st.protected > self.budget / 5 * 4 {
            let victim = st
                .entries
                .iter()
                .filter(|(k, e)| e.protected && **k != keep)
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k);
            let Some(e) = victim.and_then(|v| st.entries.get_mut(&v)) else {
                break;
            };
            e.protected = false;
            st.protected -= e.bytes;
        }
    }

    /// Adds an entry on probation and evicts beyond the budget; a value larger than the
    /// whole budget is not kept.
    ///
    /// The policy resists scans: a week's flame graph reads a dozen rollups that together
    /// exceed the budget, in the same order each time, and under plain LRU each read evicts
    /// the one the next query needs first, so repeated queries never hit. Here an entry read
    /// a second time is protected (up to 4/5 of the budget, least recently used first out);
    /// entries read once are evicted most recent first, so a repeated scan finds the
    /// earlier part of its sections still cached, and they become protected.
    fn keep(&self, key: Key, value: Decoded) {
        let bytes = match &value {
            Decoded::Head(h) => h.approx_bytes(),
            Decoded::Rollup(r) => r.approx_bytes(),
            Decoded::Chunk(c) => c.approx_bytes(),
        };
        if bytes > self.budget {
            return;
        }
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.clock += 1;
        let used = st.clock;
        let entry = Entry {
            value,
            bytes,
            used,
            protected: false,
        };
        if let Some(old) = st.entries.insert(key, entry) {
            st.bytes -= old.bytes;
            if old.protected {
                st.protected -= old.bytes;
            }
        }
        st.bytes += bytes;
        while st.bytes > self.budget {
            let on_probation = st
                .entries
                .iter()
                .filter(|(k, e)| !e.protected && **k != key)
                .max_by_key(|(_, e)| e.used);
            let victim = match on_probation {
                Some((k, _)) => *k,
                None => match st
                    .entries
                    .iter()
                    .filter(|(k, _)| **k != key)
                    .min_by_key(|(_, e)| e.used)
                {
                    Some((k, _)) => *k,
                    None => break,
                },
            };
            if let Some(e) = st.entries.remove(&victim) {
                st.bytes -= e.bytes;
                if e.protected {
                    st.protected -= e.bytes;
                }
            }
        }
    }

    /// Whether the cache holds `section`'s rollup as read more than once (protected: it is
    /// likely still there when the same query reads it again).
    pub(crate) fn holds_protected_rollup(&self, section: &Section) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.entries
            .get(&key(section, true))
            .is_some_and(|e| e.protected)
    }

    /// The budget in bytes.
    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// Forgets `section` (its block was deleted or compacted away).
    pub(crate) fn forget(&self, section: &Section) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let gone: Vec<Key> = st
            .entries
            .keys()
            .filter(|k| k.0 == section.id)
            .copied()
            .collect();
        for k in gone {
            if let Some(e) = st.entries.remove(&k) {
                st.bytes -= e.bytes;
                if e.protected {
                    st.protected -= e.bytes;
                }
            }
        }
    }

    /// `(sections and rollups held, their estimated bytes, hits, misses)`.
    pub(crate) fn stats(&self) -> (usize, usize, u64, u64) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.entries.len(), st.bytes, st.hits, st.misses)
    }
}
