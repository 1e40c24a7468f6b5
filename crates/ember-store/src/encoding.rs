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
