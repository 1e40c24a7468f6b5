//! A part of a node-limited merge ([`super::heavy`]) packed between its two passes.
//!
//! Pass 2 of a node-limited merge reads every part again. A rollup let go after pass 1
//! (the cache cannot hold a week of them) used to be read and decoded again from its block;
//! instead pass 1 keeps what pass 2 needs of it (each frame's parent, shared name id and
//! total) packed in a few bytes a frame, within a share of the cache's budget.

use crate::encoding::{Reader, gcd, odd_inverse};

/// What pass 2 reads of a part, kept from pass 1 so the part is not read and decoded again:
/// per frame after the root, varints of its distance to its parent, its shared name id and
/// its total divided by `scale` (CPU time comes in multiples of the sampling period). About
/// 6 bytes a frame, where a decoded rollup holds 20 and more (frames, per-series entries,
/// names) and decoding it again was a third of a cold wide read's time.
pub(super) struct Packed {
    pub(super) root: i64,
    scale: Scale,
    pub(super) frames: usize,
    bytes: Vec<u8>,
}

/// An exact divisor of a part's totals, `2^shift * odd`, divided by without a division
/// (a hardware division per frame cost more than the varints saved).
#[derive(Clone, Copy)]
struct Scale {
    shift: u32,
    odd: u64,
    /// `odd`'s inverse modulo 2^64: for a multiple `x` of `odd`, `x * inverse` is `x / odd`.
    inverse: u64,
}

impl Scale {
    const ONE: Scale = Scale {
        shift: 0,
        odd: 1,
        inverse: 1,
    };

    /// The greatest common divisor of the first few non-zero `totals` (a guess checked by
    /// [`Scale::divide`] on each; 1 when there is none).
    fn guess(totals: &[i64]) -> Scale {
        let g = totals
            .iter()
            .filter(|t| **t > 0)
            .take(16)
            .fold(0u64, |g, t| gcd(g, t.unsigned_abs()));
        if g <= 1 {
            return Scale::ONE;
        }
        let shift = g.trailing_zeros();
        let odd = g >> shift;
        Scale {
            shift,
            odd,
            inverse: odd_inverse(odd),
        }
    }

    /// `x / scale` when the scale divides `x`.
    fn divide(self, x: u64) -> Option<u64> {
        if x & ((1u64 << self.shift) - 1) != 0 {
            return None;
        }
        let q = (x >> self.shift).wrapping_mul(self.inverse);
        (q <= u64::MAX / self.odd).then_some(q)
    }

    fn times(self, q: u64) -> i64 {
        let v = (u128::from(q) * u128::from(self.odd)) << self.shift;
        i64::try_from(v).unwrap_or(i64::MAX)
    }
}

impl Packed {
    /// Packs a part's frames, shared name ids and (non-negative) totals.
    pub(super) fn new(frames: &[(u32, u32)], names: &[u32], totals: &[i64]) -> Packed {
        let guess = Scale::guess(totals);
        Packed::with_scale(frames, names, totals, guess)
            .or_else(|| Packed::with_scale(frames, names, totals, Scale::ONE))
            .unwrap_or(Packed {
                root: 0,
                scale: Scale::ONE,
                frames: 1,
                bytes: Vec::new(),
            })
    }

    /// `None` when `scale` does not divide every total.
    fn with_scale(
        frames: &[(u32, u32)],
        names: &[u32],
        totals: &[i64],
        scale: Scale,
    ) -> Option<Packed> {
        let mut bytes = Vec::with_capacity(frames.len() * 6);
        let mut buf = [0u8; 30];
        for (f, &(parent, name)) in frames.iter().enumerate().skip(1) {
            let total = scale.divide(totals[f].unsigned_abs())?;
            // One capacity check a frame rather than one a byte.
            let mut n = varint_into(&mut buf, 0, u64::from(f as u32 - parent));
            n = varint_into(&mut buf, n, u64::from(names[name as usize]));
            n = varint_into(&mut buf, n, total);
            bytes.extend_from_slice(&buf[..n]);
        }
        bytes.shrink_to_fit();
        Some(Packed {
            root: totals.first().copied().unwrap_or(0),
            scale,
            frames: frames.len(),
            bytes,
        })
    }

    /// Heap bytes held.
    pub(super) fn held(&self) -> usize {
        self.bytes.capacity()
    }

    /// Calls `f(frame, parent, shared name, total)` for each frame after the root, in order.
    pub(super) fn for_each(&self, mut f: impl FnMut(usize, usize, u32, i64)) {
        let mut r = Reader::new(&self.bytes);
        for frame in 1..self.frames {
            // Written by `new` in this process: never short or out of range.
            let (Some(d), Some(name), Some(total)) = (r.varint(), r.u32(), r.varint()) else {
                return;
            };
            f(frame, frame - d as usize, name, self.scale.times(total));
        }
    }
}

/// Writes `v` as an LEB128 varint at `buf[at..]`; returns the end.
fn varint_into(buf: &mut [u8; 30], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        buf[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    buf[at] = v as u8;
    at + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_reads_back_exactly() {
        let frames = [(0, 0), (0, 1), (1, 2), (1, 3), (0, 2)];
        let names = [0, 7, 8, 9];
        for totals in [
            vec![
                90_000_000i64,
                60_000_000,
                20_000_000,
                40_000_000,
                30_000_000,
            ],
            vec![7, 5, 3, 2, 2],
            vec![0, 0, 0, 0, 0],
            vec![i64::MAX, i64::MAX - 1, 1 << 40, 3 << 40, 0],
            // The guess (gcd of the first 16) fails on a later total: packed unscaled.
            vec![6; 17].into_iter().chain([9]).collect(),
        ] {
            let frames: Vec<(u32, u32)> = (0..totals.len())
                .map(|i| frames[i % frames.len()])
                .collect();
            let p = Packed::new(&frames, &names, &totals);
            let mut seen = Vec::new();
            p.for_each(|f, parent, name, total| seen.push((f, parent, name, total)));
            let want: Vec<_> = (1..totals.len())
                .map(|f| {
                    (
                        f,
                        frames[f].0 as usize,
                        names[frames[f].1 as usize],
                        totals[f],
                    )
                })
                .collect();
            assert_eq!(seen, want);
            assert_eq!(p.root, totals[0]);
        }
    }
}
