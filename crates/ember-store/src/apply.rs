//! Applying a decoded profile to a tenant's head: finding each sample's stack by its
//! fingerprint, interning the mappings, functions and locations of new stacks and walking
//! them into the shared stack tree once, finding each sample's label set through the
//! head's memo of raw labels, summing every sample type in one pass, and storing one
//! profile per sample type. The same code runs for live ingest, log replay and flush, so
//! the head is built identically either way.

use ember_pprof::{DecodeLimits, ProfileView};

use crate::ingest::IngestRecord;
use crate::{Labels, StoredProfile, TenantHead, series_labels};

pub(crate) mod spare;
mod symbols;

use symbols::ProfileSymbols;

/// Decodes a logged profile (gzip'd or raw) and runs `f` on it; the error says why it could
/// not be decoded.
pub(crate) fn with_view<T>(
    bytes: &[u8],
    f: impl FnOnce(&ProfileView<'_>) -> T,
) -> Result<T, ember_pprof::PprofError> {
    let raw = ember_pprof::decompress(bytes, &DecodeLimits::default())?;
    let view = spare::parse(&raw, u64::MAX)?;
    let out = f(&view);
    spare::give_back(view);
    Ok(out)
}

/// Adds one logged record's profile to `head` (replay, flush): one series per sample type.
pub(crate) fn apply_record(
    head: &mut TenantHead,
    record: &IngestRecord,
    profile: &ProfileView<'_>,
) -> usize {
    let series = series_labels(&record.label_list(), profile);
    apply_to(
        head,
        record.time_nanos,
        record.received_nanos,
        profile,
        series,
    )
}

/// Adds a profile to `head` under `label_sets` (one per sample type), at `time_nanos` if
/// set, else at the profile's own time, else at `received_nanos`. Returns the number of
/// series written to.
///
/// The stacks, label sets and sums are worked out once for all sample types
/// ([`stacks_of`]); each type then keeps its own non-zero entries.
pub(crate) fn apply_to(
    head: &mut TenantHead,
    time_nanos: i64,
    received_nanos: i64,
    profile: &ProfileView<'_>,
    label_sets: Vec<Labels>,
) -> usize {
    let time = profile_time(time_nanos, profile.time_nanos, received_nanos);
    let n = label_sets.len();
    with_scratch(|scratch| {
        stacks_of(head, profile, scratch);
        let Scratch { keys, sums, .. } = scratch;
        let n_types = profile.sample_type.len();
        for (t, labels) in label_sets.into_iter().enumerate().take(n_types) {
            let kept = || {
                keys.iter()
                    .zip(sums.chunks_exact(n_types))
                    .filter(move |(_, v)| v[t] != 0)
            };
            let count = kept().count();
            let mut nodes = Vec::with_capacity(count);
            let mut values = Vec::with_capacity(count);
            let mut labelled = false;
            for (&key, v) in kept() {
                nodes.push((key >> 32) as u32);
                values.push(v[t]);
                labelled |= key as u32 != 0;
            }
            let sets = if labelled {
                kept().map(|(&key, _)| key as u32).collect()
            } else {
                Vec::new()
            };
            head.insert_with_period(
                labels,
                StoredProfile {
                    time_nanos: time,
                    nodes,
                    values,
                    sets,
                },
                profile.period,
            );
        }
    });
    n
}

/// The time a profile is stored at: the ingest's override if set, else the profile's own
/// time, else when it was received (ingest checks this time against its window).
pub(crate) fn profile_time(override_nanos: i64, own_nanos: i64, received_nanos: i64) -> i64 {
    if override_nanos != 0 {
        override_nanos
    } else if own_nanos != 0 {
        own_nanos
    } else {
        received_nanos
    }
}

/// What applying a profile needs besides the head, kept from one profile to the next so
/// that a profile allocates none of it (per thread: ingest threads, replay and flush each
/// have theirs).
#[derive(Default)]
struct Scratch {
    /// The profile's symbol tables ([`ProfileSymbols`]).
    symbols: symbols::SymbolTables,
    /// Stack key and position of each sample with a value: the fingerprint of its
    /// locations' content.
    stacks: Vec<(u128, u32)>,
    /// Leaf node of each of `stacks` ([`NO_STACK`] while unknown).
    leaves: Vec<u32>,
    /// Interned locations of the new stacks, concatenated, and each new stack's key and
    /// range there.
    flat: Vec<u32>,
    ranges: Vec<(u128, std::ops::Range<usize>)>,
    /// `(leaf node << 32 | label set, sample position)` of every sample with a stack.
    rows: Vec<(u64, u32)>,
    /// The profile's entries: `leaf node << 32 | label set`, ascending and distinct, and
    /// their sums, one per sample type each (row-major).
    keys: Vec<u64>,
    sums: Vec<i64>,
    /// Label set pairs being built.
    pairs: Vec<(u32, u32)>,
}

/// A stack not found (yet).
const NO_STACK: u32 = u32::MAX;

/// Scratch larger than this (in bytes of capacity) after an unusually large profile is
/// dropped rather than kept for the thread's life.
const MAX_SCRATCH_BYTES: usize = 4 << 20;

impl Scratch {
    fn capacity_bytes(&self) -> usize {
        self.symbols.capacity_bytes()
            + self.stacks.capacity() * 32
            + (self.leaves.capacity() + self.flat.capacity()) * 4
            + self.ranges.capacity() * 32
            + self.rows.capacity() * 16
            + self.keys.capacity() * 8
            + self.sums.capacity() * 8
            + self.pairs.capacity() * 8
    }
}

thread_local! {
    static SCRATCH: std::cell::Cell<Option<Box<Scratch>>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with this thread's scratch (taken out while it runs, so a nested call would
/// get a fresh one rather than a borrowed one).
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    let mut scratch = SCRATCH.with(|s| s.take()).unwrap_or_default();
    let out = f(&mut scratch);
    if scratch.capacity_bytes() <= MAX_SCRATCH_BYTES {
        SCRATCH.with(|s| s.set(Some(scratch)));
    }
    out
}

/// Finds or makes the stack node of every distinct stack of the profile and the label set
/// of every sample, and sums values per leaf node and label set into `scratch.keys` and
/// `scratch.sums` (one sum per sample type; sums may be zero).
///
/// A stack is looked up by the fingerprint of its locations' content, computed from the
/// profile's own bytes while its location ids are read; only the stacks the head does not
/// know yet have their locations interned (with their functions, mappings and strings) and
/// walked into the tree. In a steady fleet nearly every stack is known, so a profile costs
/// hashing, not interning.
fn stacks_of(head: &mut TenantHead, profile: &ProfileView<'_>, scratch: &mut Scratch) {
    let tables = std::mem::take(&mut scratch.symbols);
    let mut symbols = ProfileSymbols::new(head, profile, tables);
    let n_types = profile.sample_type.len();
    let Scratch {
        stacks,
        leaves,
        flat,
        ranges,
        rows,
        keys,
        sums,
        pairs,
        ..
    } = scratch;
    // Each sample's stack key, computed as its location ids are read, then looked up in
    // the head. Samples often repeat a stack (Go profiles split samples by labels, e.g.
    // span ids), but finding the repeats first in a per-profile table cost more than the
    // lookups it saved: a table written at random misses the cache on nearly every entry
    // (the head's tables evict it between profiles), while these columns are written in
    // order and the lookups into the head do not wait on each other.
    stacks.clear();
    for (i, sample) in profile.sample.iter().enumerate() {
        let (ids, values) = profile.sample_data(sample);
        if values.iter().all(|v| *v == 0) {
            continue;
        }
        stacks.push((symbols.stack_key(ids), i as u32));
    }
    head.known_stacks_into(stacks.iter().map(|s| s.0), leaves);
    // The new stacks: their locations interned, then walked into the tree together (a
    // new stack of several samples is walked once per sample; the walks after the first
    // take the first one's nodes, see `walk_stacks`).
    flat.clear();
    ranges.clear();
    for (&(key, i), leaf) in stacks.iter().zip(leaves.iter()) {
        if *leaf == NO_STACK {
            let (ids, _) = profile.sample_data(&profile.sample[i as usize]);
            let start = flat.len();
            for id in ids {
                if let Some(at) = profile.location_position(*id) {
                    flat.push(symbols.location(head, at));
                }
            }
            ranges.push((key, start..flat.len()));
        }
    }
    if !ranges.is_empty() {
        let new: Vec<(u128, &[u32])> = ranges.iter().map(|(k, r)| (*k, &flat[r.clone()])).collect();
        let mut made = head.walk_stacks(&new).into_iter();
        for leaf in leaves.iter_mut().filter(|l| **l == NO_STACK) {
            *leaf = made.next().unwrap_or(0);
        }
    }
    // Label sets: by the fingerprint of the sample's labels as the profile sends them
    // (string table indexes differ from profile to profile, the bytes do not), remembered
    // by the head; a sample with the same labels as the one before takes its set.
    let mut last: (&[ember_pprof::Label], u32) = (&[], 0);
    rows.clear();
    for (&(_, i), &node) in stacks.iter().zip(leaves.iter()) {
        let sample = &profile.sample[i as usize];
        let raw_labels = profile
            .sample_labels
            .get(sample.label.clone())
            .unwrap_or(&[]);
        let set = if raw_labels.is_empty() {
            0
        } else if raw_labels == last.0 {
            last.1
        } else {
            let print = symbols.labels_print(raw_labels);
            let set = match head.label_set_by_print(print) {
                Some(set) => set,
                None => {
                    pairs.clear();
                    for l in raw_labels {
                        let value = if l.str != 0 {
                            symbols.string(head, l.str)
                        } else {
                            // A numeric label (Go heap profiles' `bytes`) is kept as its
                            // decimal text.
                            head.intern(&l.num.to_string())
                        };
                        pairs.push((symbols.string(head, l.key), value));
                    }
                    let set = head.label_set(pairs);
                    head.remember_label_set(print, set);
                    set
                }
            };
            last = (raw_labels, set);
            set
        };
        rows.push((u64::from(node) << 32 | u64::from(set), i));
    }
    // Samples with the same stack and labels add up: sorted by (node, set) and then sample
    // position, so the sums add in sample order (saturating, as the flush and reads do).
    rows.sort_unstable();
    keys.clear();
    sums.clear();
    for &(key, i) in rows.iter() {
        if keys.last() != Some(&key) {
            keys.push(key);
            sums.resize(sums.len() + n_types, 0);
        }
        let (_, values) = profile.sample_data(&profile.sample[i as usize]);
        let at = sums.len() - n_types;
        for (sum, v) in sums[at..].iter_mut().zip(values) {
            *sum = sum.saturating_add(*v);
        }
    }
    scratch.symbols = symbols.into_tables();
}

#[cfg(test)]
mod tests;
