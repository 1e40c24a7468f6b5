//! The storage of the head's open-addressing tables ([`super::tables`]): a fixed number of
//! `u32` words, in transparent huge pages once the table is large.
//!
//! Why huge pages: walking a profile's new stacks into the tree looks up and inserts
//! hundreds of keys a profile at random places of tables of several megabytes (children,
//! frame names, stacks, location and label fingerprints). With 4 KiB pages each such access
//! is a TLB miss besides the cache miss, and the page walk's own reads miss too. A 2 MiB
//! page covers 512 times as much. The machine's transparent huge pages are in `madvise`
//! mode (the kernel's default on many distributions), so a table asks for them itself
//! (`MADV_HUGEPAGE`) rather than the whole process (jemalloc's `thp:always` costs tens of
//! MiB of resident memory in partly used pages; a table's pages are all written when it is
//! filled, so asking costs it nothing).
//!
//! The words are kept as bytes: an anonymous mapping is bytes, and reading words out of
//! them with `from_ne_bytes` needs no `unsafe` (it compiles to plain loads).

/// Tables at least this large (bytes) are mapped and asked to be in huge pages; smaller ones
/// stay on the heap, where a huge page would mostly be empty.
pub(crate) const HUGE_FROM: usize = 2 << 20;

/// `len` words, each initially the same value.
#[derive(Debug, Default)]
pub(crate) struct Words {
    store: Store,
    /// Words held.
    len: usize,
}

#[derive(Debug, Default)]
enum Store {
    #[default]
    Empty,
    Heap(Vec<u8>),
    /// An anonymous mapping one huge page longer than needed, and where in it the words
    /// start: at a huge page boundary, so that every 2 MiB of the words can be one page.
    Mapped(memmap2::MmapMut, usize),
}

impl Words {
    /// `len` words of `fill`.
    pub(crate) fn new(len: usize, fill: u32) -> Self {
        let bytes = len * 4;
        let store = if bytes >= HUGE_FROM {
            match map_huge(bytes, fill) {
                Some((map, start)) => Store::Mapped(map, start),
                None => Store::Heap(heap(bytes, fill)),
            }
        } else if bytes > 0 {
            Store::Heap(heap(bytes, fill))
        } else {
            Store::Empty
        };
        Words { store, len }
    }

    /// Number of words.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the table holds no word.
    #[inline(always)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        match &self.store {
            Store::Empty => &[],
            Store::Heap(v) => v,
            Store::Mapped(m, start) => &m[*start..*start + self.len * 4],
        }
    }

    #[inline(always)]
    fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        match &mut self.store {
            Store::Empty => &mut [],
            Store::Heap(v) => v,
            Store::Mapped(m, start) => &mut m[*start..*start + len * 4],
        }
    }

    /// The `N` words of slot `i` (words `N * i..N * (i + 1)`).
    #[inline(always)]
    pub(crate) fn slot<const N: usize>(&self, i: usize) -> [u32; N] {
        let b = &self.bytes()[i * N * 4..(i + 1) * N * 4];
        std::array::from_fn(|k| {
            let w = &b[4 * k..4 * k + 4];
            u32::from_ne_bytes([w[0], w[1], w[2], w[3]])
        })
    }

    /// Word `k` of slot `i` of `N` words.
    #[inline(always)]
    pub(crate) fn word<const N: usize>(&self, i: usize, k: usize) -> u32 {
        let at = (i * N + k) * 4;
        let b = &self.bytes()[at..at + 4];
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Writes slot `i` of `N` words.
    #[inline(always)]
    pub(crate) fn set_slot<const N: usize>(&mut self, i: usize, slot: [u32; N]) {
        let b = &mut self.bytes_mut()[i * N * 4..(i + 1) * N * 4];
        for (k, w) in slot.iter().enumerate() {
            b[4 * k..4 * k + 4].copy_from_slice(&w.to_ne_bytes());
        }
    }

    /// Resident bytes once every word is written (what the table costs).
    pub(crate) fn bytes_held(&self) -> usize {
        self.len * 4
    }

    /// Whether the words are in a mapping that asked for huge pages (for tests).
    #[cfg(test)]
    pub(crate) fn is_mapped(&self) -> bool {
        matches!(self.store, Store::Mapped(..))
    }
}

fn heap(bytes: usize, fill: u32) -> Vec<u8> {
    if fill == 0 {
        vec![0; bytes]
    } else {
        fill.to_ne_bytes().repeat(bytes / 4)
    }
}

/// An anonymous mapping of `bytes` at a huge page boundary, advised to be in huge pages and
/// filled with `fill`; None when the kernel refuses the mapping (the caller uses the heap).
/// The advice failing (a kernel without transparent huge pages) leaves ordinary pages.
fn map_huge(bytes: usize, fill: u32) -> Option<(memmap2::MmapMut, usize)> {
    // Room for the start to move to a boundary, and for the last huge page whole (a table
    // of 12 * 2^k bytes ends inside one): a page only partly inside the mapping would be
    // left in 4 KiB pages.
    let mut map = memmap2::MmapMut::map_anon(bytes.next_multiple_of(HUGE_FROM) + HUGE_FROM).ok()?;
    let start = (HUGE_FROM - map.as_ptr() as usize % HUGE_FROM) % HUGE_FROM;
    #[cfg(target_os = "linux")]
    let _ = map.advise_range(memmap2::Advice::HugePage, start, bytes);
    // A fresh mapping reads as zeros: only another fill is written (every page then).
    if fill != 0 {
        let pattern = fill.to_ne_bytes();
        for w in map[start..start + bytes].chunks_exact_mut(4) {
            w.copy_from_slice(&pattern);
        }
    }
    Some((map, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_and_heap_words_read_back_what_was_written() {
        for len in [0, 6, 3 * 1000, HUGE_FROM / 4 + 3 * 7] {
            let mut w = Words::new(len, u32::MAX);
            assert_eq!(w.len(), len);
            assert_eq!(w.is_mapped(), len * 4 >= HUGE_FROM);
            let slots = len / 3;
            for i in 0..slots {
                assert_eq!(w.slot::<3>(i), [u32::MAX; 3]);
            }
            for i in (0..slots).step_by(7) {
                w.set_slot::<3>(i, [i as u32, 1, u32::MAX - 1]);
            }
            for i in 0..slots {
                let want = if i % 7 == 0 {
                    [i as u32, 1, u32::MAX - 1]
                } else {
                    [u32::MAX; 3]
                };
                assert_eq!(w.slot::<3>(i), want);
                assert_eq!(w.word::<3>(i, 2), want[2]);
            }
            let zeros = Words::new(len, 0);
            assert!((0..len / 5).all(|i| zeros.slot::<5>(i) == [0; 5]));
        }
    }
}
