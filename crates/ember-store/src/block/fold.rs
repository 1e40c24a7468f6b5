//! Sums per frame in frame order without sorting, for what a block writes beside each
//! section: the rollup (per series, [`crate::rollup`]) and the time chunks (per profile,
//! [`crate::chunks`]) both list `(frame, summed value)` in ascending frame order.
//!
//! Why not sort: a profile's entries are its stack nodes, and several nodes share a frame
//! (the same functions at other addresses, other sample label sets), so mapping them to
//! frames gives repeats in no order. Sorting those `(frame, value)` pairs, per profile for
//! the chunks and per series for the rollup, was about a fifth of a flush's CPU (the block
//! writer's largest single cost after zstd). Summing into a slot per frame and marking the
//! slot in a bit set instead, then reading the set bits in order, costs two array accesses
//! per entry and one summary word per 4,096 frames.

use crate::TenantHead;
use crate::encoding::{put_str, put_varint};

/// Bits read back in ascending order, with a summary bit per word of them so that reading a
/// sparse set skips its empty words 64 at a time: a profile's frames lie all over the head's
/// frame ids (old stacks near the root have low ids, new ones high), some 700 set among
/// 200,000 on a busy flush.
#[derive(Debug, Default)]
struct Bits {
    words: Vec<u64>,
    /// Bit `w` set: `words[w]` may be non-zero.
    summary: Vec<u64>,
}

impl Bits {
    fn reserve_slots(&mut self, n: usize) {
        let words = n.div_ceil(64);
        if self.words.len() < words {
            self.words.resize(words, 0);
            self.summary.resize(words.div_ceil(64), 0);
        }
    }

    /// Sets bit `s`; returns whether it was clear.
    #[inline]
    fn set(&mut self, s: usize) -> bool {
        let w = s >> 6;
        let bit = 1u64 << (s & 63);
        let word = &mut self.words[w];
        if *word & bit != 0 {
            return false;
        }
        *word |= bit;
        self.summary[w >> 6] |= 1u64 << (w & 63);
        true
    }

    /// Calls `f` with every set bit in ascending order, and clears them all.
    #[inline]
    fn drain(&mut self, mut f: impl FnMut(usize)) {
        for (i, summary) in self.summary.iter_mut().enumerate() {
            let mut words = std::mem::take(summary);
            while words != 0 {
                let w = (i << 6) | words.trailing_zeros() as usize;
                words &= words - 1;
                let mut bits = std::mem::take(&mut self.words[w]);
                while bits != 0 {
                    f((w << 6) | bits.trailing_zeros() as usize);
                    bits &= bits - 1;
                }
            }
        }
    }
}

/// Values summed per slot (a frame id), handed back in slot order.
#[derive(Debug, Default)]
pub(crate) struct SlotSums {
    /// Sum per slot; zero outside the slots touched since the last drain.
    sums: Vec<i64>,
    /// The slots touched since the last drain.
    touched: Bits,
}

impl SlotSums {
    /// Makes room for slots `0..n` (what is summed so far stays).
    pub(crate) fn reserve_slots(&mut self, n: usize) {
        if self.sums.len() < n {
            self.sums.resize(n, 0);
        }
        self.touched.reserve_slots(n);
    }

    /// Adds `v` to slot `slot` (saturating); `slot` must be below what
    /// [`SlotSums::reserve_slots`] made room for.
    #[inline]
    pub(crate) fn add(&mut self, slot: u32, v: i64) {
        let s = slot as usize;
        let e = &mut self.sums[s];
        *e = e.saturating_add(v);
        self.touched.set(s);
    }

    /// Calls `f(slot, sum)` for every slot touched since the last drain whose sum is not
    /// zero (a raw read drops zero sums too), in ascending slot order, and empties every slot.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(u32, i64)) {
        let sums = &mut self.sums;
        self.touched.drain(|s| {
            let v = std::mem::take(&mut sums[s]);
            if v != 0 {
                f(s as u32, v);
            }
        });
    }
}

/// A set of slots (frame ids) read back in ascending order.
#[derive(Debug, Default)]
pub(crate) struct SlotSet {
    bits: Bits,
}

impl SlotSet {
    /// Makes room for slots `0..n`.
    pub(crate) fn reserve_slots(&mut self, n: usize) {
        self.bits.reserve_slots(n);
    }

    /// Adds `slot`; returns whether it was new.
    #[inline]
    pub(crate) fn insert(&mut self, slot: u32) -> bool {
        self.bits.set(slot as usize)
    }

    /// Calls `f` with every slot of the set in ascending order, and empties it.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(u32)) {
        self.bits.drain(|s| f(s as u32));
    }
}

/// Writes the frame table of a rollup or a time chunk: its names (`names` restarted), then
/// per kept frame (`kept`, head frame ids in head order, parents first) the distance back
/// to its parent in `new_id`'s numbering (root 0, kept frames 1..), then each frame's local
/// name id. One writer for both, so they stay readable by the same frame-table reader.
pub(crate) fn put_frames(
    out: &mut Vec<u8>,
    head: &TenantHead,
    kept: &[u32],
    new_id: &[u32],
    names: &mut LocalNames,
) {
    names.start();
    let frame_names: Vec<u32> = kept.iter().map(|f| names.id(head.frame_name(*f))).collect();
    put_varint(out, names.list.len() as u64);
    for n in &names.list {
        // String 0 is the head's "" (`TenantHead::new` interns it first).
        put_str(out, head.string(*n));
    }
    put_varint(out, kept.len() as u64);
    for (i, f) in kept.iter().enumerate() {
        let parent = new_id[head.frame_parent(*f) as usize];
        put_varint(out, u64::from(i as u32 + 1 - parent));
    }
    for n in &frame_names {
        put_varint(out, u64::from(*n));
    }
}

/// Local ids of interned strings (frame names) in the order first asked for: the names
/// table of a rollup or a chunk. A dense table by string id rather than a hash map: a
/// block's rollup asks for a name per frame, some hundred thousand on a busy flush.
#[derive(Debug, Default)]
pub(crate) struct LocalNames {
    /// Per string id, its local id plus one (0: not yet asked for).
    local: Vec<u32>,
    /// String ids by local id; local 0 is string 0 (the empty name).
    pub(crate) list: Vec<u32>,
}

impl LocalNames {
    /// Starts a new table holding the empty name (string 0) as local 0.
    pub(crate) fn start(&mut self) {
        for &n in &self.list {
            self.local[n as usize] = 0;
        }
        self.list.clear();
        self.id(0);
    }

    /// The local id of string `name`, given the next one when asked for the first time.
    pub(crate) fn id(&mut self, name: u32) -> u32 {
        let n = name as usize;
        if n >= self.local.len() {
            self.local.resize(n + 1, 0);
        }
        match self.local[n] {
            0 => {
                self.list.push(name);
                self.local[n] = self.list.len() as u32;
                self.list.len() as u32 - 1
            }
            id => id - 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_come_back_in_slot_order_without_zeros() {
        let mut s = SlotSums::default();
        s.reserve_slots(300);
        for (slot, v) in [
            (200, 5),
            (3, 1),
            (200, 7),
            (64, -2),
            (64, 2),
            (130, i64::MAX),
        ] {
            s.add(slot, v);
        }
        s.add(130, 1);
        let mut got = Vec::new();
        s.drain(|slot, v| got.push((slot, v)));
        assert_eq!(got, vec![(3, 1), (130, i64::MAX), (200, 12)]);
        s.drain(|_, _| panic!("emptied"));
        s.add(299, 4);
        let mut got = Vec::new();
        s.drain(|slot, v| got.push((slot, v)));
        assert_eq!(got, vec![(299, 4)]);

        let mut set = SlotSet::default();
        set.reserve_slots(300);
        assert!(set.insert(250) && set.insert(0) && !set.insert(250));
        let mut got = Vec::new();
        set.drain(|s| got.push(s));
        assert_eq!(got, vec![0, 250]);
        set.drain(|_| panic!("emptied"));

        let mut names = LocalNames::default();
        names.start();
        assert_eq!(
            (names.id(9), names.id(4), names.id(9), names.id(0)),
            (1, 2, 1, 0)
        );
        assert_eq!(names.list, vec![0, 9, 4]);
        names.start();
        assert_eq!((names.id(4), names.list.clone()), (1, vec![0, 4]));
    }
}
