//! Low-level SVG output: a flushing byte buffer with XML escaping and fast,
//! allocation-free number formatting (integers, thousands separators and
//! fixed-point decimals that round exactly like `format!("{:.N}")`).

use std::io::{self, Write};

const FLUSH_AT: usize = 1 << 16;

/// Buffered writer tailored to the SVG emitter.
pub(crate) struct Out<W: Write> {
    pub(crate) buf: Vec<u8>,
    w: W,
    pretty: bool,
    itoa: itoa::Buffer,
}

impl<W: Write> Out<W> {
    pub(crate) fn new(w: W, pretty: bool) -> Self {
        Out {
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            w,
            pretty,
            itoa: itoa::Buffer::new(),
        }
    }

    /// Hands the buffer to the writer once it is large; called between elements.
    pub(crate) fn maybe_flush(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.w.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> io::Result<()> {
        self.w.write_all(&self.buf)?;
        self.buf.clear();
        self.w.flush()
    }

    /// Line break plus indentation, only in pretty mode.
    #[inline]
    pub(crate) fn nl(&mut self, level: usize) {
        if self.pretty {
            self.buf.push(b'\n');
            self.buf.resize(self.buf.len() + 4 * level, b' ');
        }
    }

    #[inline]
    pub(crate) fn raw(&mut self, s: &str) {
        self.buf.extend_from_slice(s.as_bytes());
    }

    #[inline]
    pub(crate) fn uint(&mut self, v: u64) {
        let s = self.itoa.format(v);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Integer with `,` every three digits (`1,315`).
    pub(crate) fn grouped(&mut self, v: u64) {
        let s = self.itoa.format(v).as_bytes();
        for (i, &d) in s.iter().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                self.buf.push(b',');
            }
            self.buf.push(d);
        }
    }

    /// XML-escaped text or attribute value. Characters XML 1.0 forbids become U+FFFD, so the
    /// document stays well-formed whatever the frame names contain.
    pub(crate) fn esc(&mut self, s: &str) {
        let bytes = s.as_bytes();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let rep: &[u8] = match b {
                b'&' => b"&amp;",
                b'<' => b"&lt;",
                b'>' => b"&gt;",
                b'\'' => b"&apos;",
                b'"' => b"&quot;",
                b'\t' | b'\n' | b'\r' => continue,
                0..=0x1f => "\u{fffd}".as_bytes(),
                _ => continue,
            };
            self.buf.extend_from_slice(&bytes[start..i]);
            self.buf.extend_from_slice(rep);
            start = i + 1;
        }
        self.buf.extend_from_slice(&bytes[start..]);
    }

    /// Fixed-point decimal with `prec` digits, rounding exactly as `{:.prec$}` does.
    pub(crate) fn fixed(&mut self, v: f64, prec: usize) {
        if !push_fixed_fast(&mut self.buf, v, prec) {
            write!(&mut self.buf, "{v:.prec$}").expect("writing to a Vec cannot fail");
        }
    }

    /// Like [`Out::fixed`] but with an explicit `+` for positive values.
    pub(crate) fn fixed_signed(&mut self, v: f64, prec: usize) {
        if v > 0.0 {
            self.buf.push(b'+');
        }
        self.fixed(v, prec);
    }
}

const POW10: [f64; 5] = [1.0, 10.0, 100.0, 1000.0, 10000.0];

/// Formats without the general float machinery when the rounding decision is unambiguous.
/// `v * 10^prec` carries a relative error of at most one ulp; below 1e9 that is far below the
/// 1e-6 margin kept around the halfway point, so the rounded digit is the same as the exact
/// decimal rounding. Anything else (ties, huge or odd values) returns false for the slow path.
fn push_fixed_fast(buf: &mut Vec<u8>, v: f64, prec: usize) -> bool {
    if prec >= POW10.len() || !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
        return false;
    }
    let scaled = v.abs() * POW10[prec];
    if scaled >= 1e9 {
        return false;
    }
    let floor = scaled.floor();
    let frac = scaled - floor;
    if (frac - 0.5).abs() < 1e-6 {
        return false;
    }
    let n = floor as u64 + u64::from(frac > 0.5);
    if v < 0.0 {
        buf.push(b'-');
    }
    let scale = POW10[prec] as u64;
    let mut ib = itoa::Buffer::new();
    buf.extend_from_slice(ib.format(n / scale).as_bytes());
    if prec > 0 {
        buf.push(b'.');
        let frac_digits = ib.format(n % scale).as_bytes();
        buf.resize(buf.len() + prec - frac_digits.len(), b'0');
        buf.extend_from_slice(frac_digits);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_matches_std_formatting() {
        let mut state = 0x9e3779b97f4a7c15u64;
        for i in 0..200_000u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let total = (state >> 40) % 100_000 + 1;
            let part = (state >> 8) % (total + 1);
            let v = if i % 3 == 0 {
                part as f64 * (100.0 / total as f64)
            } else {
                (100 * part) as f64 / total as f64 * if i % 2 == 0 { 1.0 } else { -1.0 }
            };
            for prec in [2usize, 4] {
                let mut out = Out::new(Vec::new(), false);
                out.fixed(v, prec);
                assert_eq!(
                    String::from_utf8(out.buf).unwrap(),
                    format!("{v:.prec$}"),
                    "{v}"
                );
            }
        }
    }

    #[test]
    fn grouping_and_escaping() {
        let mut out = Out::new(Vec::new(), false);
        out.grouped(1_234_567);
        out.raw(" ");
        out.grouped(999);
        out.raw(" ");
        out.esc("a<&>'\"\u{1}b");
        assert_eq!(
            String::from_utf8(out.buf).unwrap(),
            "1,234,567 999 a&lt;&amp;&gt;&apos;&quot;\u{fffd}b"
        );
    }
}
