//! The decoded block sections queries read, kept under a memory budget.
//!
//! Owns the one trade of the lazy layout: decoding a section costs time (a day of a busy
//! service is hundreds of milliseconds), keeping it costs memory. Recently used sections stay
//! decoded until the budget ([`crate::StoreOptions::cache_bytes`]) is spent, then the least
//! recently used go. A section larger than the whole budget is decoded for the query that
//! needs it and dropped after. Sizes are [`TenantHead::approx_bytes`] estimates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::StoreError;
use crate::block::Section;
use crate::head::TenantHead;
use crate::objects::Objects;

/// A decoded section and what it costs.
#[derive(Debug)]
struct Entry {
    head: Arc<TenantHead>,
    bytes: usize,
    used: u64,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<u64, Entry>,
    bytes: usize,
    clock: u64,
    hits: u64,
    misses: u64,
}

/// Decoded sections by section id, least recently used evicted first.
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

    /// The decoded head of `section`, from the cache or read now. Two queries missing the
    /// same section at once may both decode it; the second result replaces the first.
    pub(crate) fn get(
        &self,
        objects: &Objects,
        section: &Section,
    ) -> Result<Arc<TenantHead>, StoreError> {
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.clock += 1;
            let now = st.clock;
            if let Some(e) = st.entries.get_mut(&section.id) {
                e.used = now;
                let head = e.head.clone();
                st.hits += 1;
                return Ok(head);
            }
            st.misses += 1;
        }
        // Decoded outside the lock: other queries keep using the cache meanwhile.
        let head = Arc::new(section.load(objects)?);
        self.keep(section, head.clone());
        Ok(head)
    }

    /// Caches `head` as the decoded `section` (a flush hands over the head it just wrote).
    pub(crate) fn insert(&self, section: &Section, head: TenantHead) {
        self.keep(section, Arc::new(head));
    }

    /// Adds an entry and evicts the least recently used beyond the budget; a head larger
    /// than the whole budget is not kept.
    fn keep(&self, section: &Section, head: Arc<TenantHead>) {
        let bytes = head.approx_bytes();
        if bytes <= self.budget {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.clock += 1;
            let used = st.clock;
            if let Some(old) = st.entries.insert(section.id, Entry { head, bytes, used }) {
                st.bytes -= old.bytes;
            }
            st.bytes += bytes;
            while st.bytes > self.budget {
                let Some((&victim, _)) = st.entries.iter().min_by_key(|(_, e)| e.used) else {
                    break;
                };
                if let Some(e) = st.entries.remove(&victim) {
                    st.bytes -= e.bytes;
                }
            }
        }
    }

    /// Forgets `section` (its block was deleted or compacted away).
    pub(crate) fn forget(&self, section: &Section) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = st.entries.remove(&section.id) {
            st.bytes -= e.bytes;
        }
    }

    /// `(sections held, their estimated bytes, hits, misses)`.
    pub(crate) fn stats(&self) -> (usize, usize, u64, u64) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.entries.len(), st.bytes, st.hits, st.misses)
    }
}
