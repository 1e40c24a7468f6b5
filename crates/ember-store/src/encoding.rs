//! The byte-level encoding of blocks, their index and encoded heads: LEB128 varints,
//! zigzag-signed varints, length-prefixed strings and a bounds-checked reader, so corrupt
//! bytes are errors and never panics or huge allocations.

/// Appends `v` as an LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded (small magnitudes of either sign stay short).
pub(crate) fn put_signed(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends a length-prefixed UTF-8 string.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Greatest common divisor (0 with 0 gives 0).
pub(crate) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The inverse of an odd `odd` modulo 2^64: for a multiple `x` of `odd`, `x * inverse`
/// (wrapping) is `x / odd`. Both sides of the block format divide by a gcd this way (the
/// writer its values, the node-limited merge its packed totals): a hardware division per
/// value cost more than the rest of their work.
pub(crate) fn odd_inverse(odd: u64) -> u64 {
    // Newton's iteration: `odd` is its own inverse modulo 8 (3 bits), and each step
    // doubles the bits that are right: 6, 12, 24, 48, 96.
    let mut inverse = odd;
    for _ in 0..5 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(inverse)));
    }
    inverse
}

/// Division by a fixed divisor of the numbers it divides, by a multiplication: a
/// profile's values are divided by their gcd before they are written, and two 64-bit
/// divisions per value (the test in [`gcd_of`], then the quotient) were a large part of
/// encoding a head. For odd `d`, `n` is a multiple of `d` exactly when `n` times the inverse
/// of `d` modulo 2^64 is at most `u64::MAX / d`, and that product is then `n / d`; an even
/// divisor shifts its factors of two out first.
#[derive(Debug, Clone, Copy)]
struct ExactDivisor {
    /// Factors of two of the divisor.
    shift: u32,
    /// Inverse of its odd part modulo 2^64.
    inverse: u64,
    /// `u64::MAX` divided by its odd part.
    limit: u64,
}

impl ExactDivisor {
    /// A divisor `d` (at least 1).
    fn new(d: u64) -> ExactDivisor {
        let d = d.max(1);
        let shift = d.trailing_zeros();
        let odd = d >> shift;
        ExactDivisor {
            shift,
            inverse: odd_inverse(odd),
            limit: u64::MAX / odd,
        }
    }

    /// `n / d` when `d` divides `n`, else `None`.
    #[inline]
    fn quotient(&self, n: u64) -> Option<u64> {
        let low = n & ((1u64 << self.shift) - 1);
        let q = (n >> self.shift).wrapping_mul(self.inverse);
        (low == 0 && q <= self.limit).then_some(q)
    }
}

/// The greatest common divisor of the magnitudes of `values`, at least 1: what blocks
/// divide a profile's values by before writing them (CPU values are multiples of the
/// sampling period). Stops at 1, and asks for a full [`gcd`] only when a value is not a
/// multiple of the divisor so far, which an [`ExactDivisor`] tells without a division.
pub(crate) fn gcd_of(values: impl IntoIterator<Item = i64>) -> i64 {
    let mut g = 0u64;
    let mut divisor = ExactDivisor::new(1);
    for v in values {
        let a = v.unsigned_abs();
        if g == 0 {
            g = a;
            divisor = ExactDivisor::new(a);
        } else if divisor.quotient(a).is_none() {
            g = gcd(g, a);
            if g == 1 {
                break;
            }
            divisor = ExactDivisor::new(g);
        }
    }
    // Only i64::MIN alone gives a gcd past i64::MAX; 1 keeps that exact too.
    i64::try_from(g).unwrap_or(1).max(1)
}

/// Appends each of `values` divided by `g` (a divisor of every one, from [`gcd_of`]),
/// zigzag-encoded; by a multiplication ([`ExactDivisor`]), and none when `g` is 1.
pub(crate) fn put_divided(out: &mut Vec<u8>, values: impl IntoIterator<Item = i64>, g: i64) {
    if g <= 1 {
        values.into_iter().for_each(|v| put_signed(out, v));
        return;
    }
    let divisor = ExactDivisor::new(g.unsigned_abs());
    for v in values {
        // `g` divides `v` (the caller's promise); were it not, the plain division keeps
        // the bytes what they always were.
        let q = match divisor.quotient(v.unsigned_abs()) {
            Some(q) if v < 0 => (q as i64).wrapping_neg(),
            Some(q) => q as i64,
            None => v / g,
        };
        put_signed(out, q);
    }
}

/// Cursor over encoded bytes; every read checks bounds so corrupt blocks are errors.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `b`.
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reader { b, pos: 0 }
    }

    /// Bytes read so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Whether every byte was read.
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.b.len()
    }

    /// The next LEB128 varint.
    pub(crate) fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    /// The next varint, if it fits a `u32`.
    pub(crate) fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.varint()?).ok()
    }

    /// The next zigzag-encoded varint.
    pub(crate) fn signed(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// The next varint as a count of items that follow.
    pub(crate) fn count(&mut self) -> Option<usize> {
        // A count can never exceed the bytes left, which bounds allocations on corrupt input.
        let n = usize::try_from(self.varint()?).ok()?;
        (n <= self.b.len().saturating_sub(self.pos)).then_some(n)
    }

    /// The next length-prefixed UTF-8 string.
    pub(crate) fn str(&mut self) -> Option<&'a str> {
        let n = self.count()?;
        let s = std::str::from_utf8(self.b.get(self.pos..self.pos + n)?).ok()?;
        self.pos += n;
        Some(s)
    }

    /// `n` values read with `f`, one after another.
    pub(crate) fn column<T>(
        &mut self,
        n: usize,
        mut f: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(f(self)?);
        }
        Some(v)
    }

    /// A label set: a count, then name and value strings.
    pub(crate) fn labels(&mut self) -> Option<crate::Labels> {
        let n = self.count()?;
        let mut labels = crate::Labels::with_capacity(n);
        for _ in 0..n {
            labels.push((self.str()?.to_string(), self.str()?.to_string()));
        }
        Some(labels)
    }

    /// `n` values written by [`put_deltas`].
    pub(crate) fn deltas(&mut self, n: usize) -> Option<Vec<i64>> {
        let mut prev = 0i64;
        self.column(n, |r| {
            prev = prev.wrapping_add(r.signed()?);
            Some(prev)
        })
    }
}

/// Appends a label set (see [`Reader::labels`]).
pub(crate) fn put_labels(out: &mut Vec<u8>, labels: &crate::Labels) {
    put_varint(out, labels.len() as u64);
    for (n, v) in labels {
        put_str(out, n);
        put_str(out, v);
    }
}

/// Appends each value as its difference from the one before (times, addresses: small
/// steps encode short).
pub(crate) fn put_deltas(out: &mut Vec<u8>, values: impl IntoIterator<Item = i64>) {
    let mut prev = 0i64;
    for v in values {
        put_signed(out, v.wrapping_sub(prev));
        prev = v;
    }
}

/// `rounds` copies of `bytes`, each with one to four bytes overwritten at seeded random
/// places: corrupt input for the decoders' tests.
#[cfg(test)]
pub(crate) fn flipped(
    bytes: &[u8],
    mut seed: u64,
    rounds: usize,
) -> impl Iterator<Item = Vec<u8>> + '_ {
    (0..rounds).map(move |_| {
        let mut b = bytes.to_vec();
        for _ in 0..1 + seed % 4 {
            // xorshift64
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % b.len();
            b[at] = (seed >> 32) as u8;
        }
        b
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcd_of_is_the_gcd_of_every_value() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..5_000 {
            let unit = [1, 2, 10, 10_000_000, 1 << 40][next(5) as usize];
            let values: Vec<i64> = (0..next(12))
                .map(|_| match next(10) {
                    0 => 0,
                    1 => -(unit * next(100) as i64),
                    2 => next(1_000) as i64,
                    _ => unit * next(1_000) as i64,
                })
                .collect();
            let expected = values.iter().fold(0u64, |g, v| gcd(g, v.unsigned_abs()));
            let expected = i64::try_from(expected).unwrap_or(1).max(1);
            assert_eq!(gcd_of(values.iter().copied()), expected, "{values:?}");
        }
        for values in [vec![i64::MIN], vec![i64::MIN, 0], vec![i64::MIN, 6], vec![]] {
            let expected = values.iter().fold(0u64, |g, v| gcd(g, v.unsigned_abs()));
            let expected = i64::try_from(expected).unwrap_or(1).max(1);
            assert_eq!(gcd_of(values.iter().copied()), expected, "{values:?}");
        }
        // Exact division by multiplication against the division instruction.
        for d in [
            1u64,
            2,
            3,
            10,
            12,
            7 << 20,
            10_000_000,
            (1 << 63) - 25,
            1 << 62,
        ] {
            let div = ExactDivisor::new(d);
            let mut ns = vec![0u64, 1, d, 2 * d, d.wrapping_mul(12345), u64::MAX, d + 1];
            for _ in 0..200 {
                ns.push(d.wrapping_mul(next(1 << 20)));
                ns.push(next(u64::MAX));
            }
            for n in ns {
                let want = (n % d == 0).then(|| n / d);
                assert_eq!(div.quotient(n), want, "{n} / {d}");
            }
        }
        let mut out = Vec::new();
        put_divided(&mut out, [30, -60], 30);
        put_divided(&mut out, [i64::MIN, 1 << 62], 1 << 62);
        put_divided(&mut out, [7], 1);
        let mut r = Reader::new(&out);
        assert_eq!((r.signed(), r.signed()), (Some(1), Some(-2)));
        assert_eq!((r.signed(), r.signed()), (Some(-2), Some(1)));
        assert_eq!(r.signed(), Some(7));
    }
}
