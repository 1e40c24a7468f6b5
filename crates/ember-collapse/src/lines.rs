//! The `perf script` line grammar: splitting event (sample header) lines and stack (frame)
//! lines into their fields, with a word-at-a-time fast path for the common frame layout.

use crate::tidy;

/// Splits an event line into `(comm, pid, tid, index after the TID word)`.
///
/// The TID is the first all-digit word (optionally `PID/TID`) that is followed by a space and
/// is not the first word; everything before it is the command name, which may contain spaces.
/// Without a PID the PID is reported as `?`.
pub(crate) fn event_line_parts(line: &str) -> Option<(&str, &str, &str, usize)> {
    let bytes = line.as_bytes();
    // Word by word (words end at a space): the first word is never the TID, and an empty word
    // (two spaces in a row) is not a candidate either.
    let mut word_start: Option<usize> = None;
    for idx in memchr::memchr_iter(b' ', bytes) {
        if let Some(start) = word_start {
            let word = &bytes[start..idx];
            if !word.is_empty() && word.iter().all(|&b| b.is_ascii_digit() || b == b'/') {
                let (pid, tid) = match memchr::memrchr(b'/', word) {
                    Some(s) => (&line[start..start + s], &line[start + s + 1..idx]),
                    None => ("?", &line[start..idx]),
                };
                let comm = tidy::trim(&line[..start - 1]);
                return Some((comm, pid, tid, idx + 1));
            }
        }
        word_start = Some(idx + 1);
    }
    None
}

/// Splits a stack line into `(pc, symbol, module)`; the module must be in parentheses.
/// A missing symbol (two spaces before the module) is reported as a single space, matching
/// what the reference implementation emits.
pub(crate) fn stack_line_parts(line: &str) -> Option<(&str, &str, &str)> {
    let (line, sp) = match pc_fast_path(line.as_bytes()) {
        Some((start, end)) => (&line[start..], end - start),
        None => {
            let line = tidy::trim_start(line);
            (line, line.bytes().position(|b| b == b' ')?)
        }
    };
    let pc = tidy::trim_end(&line[..sp]);
    let rest = &line[sp + 1..];
    // The module is at the end of a line that can be hundreds of bytes long (C++ and Rust
    // symbols): a vectorised reverse search pays off here.
    let last = memchr::memrchr(b' ', rest.as_bytes())?;
    let module = &rest[last + 1..];
    if module.len() < 2 || !module.starts_with('(') || !module.ends_with(')') {
        return None;
    }
    let module = &module[1..module.len() - 1];
    let func = match tidy::trim(&rest[..last]) {
        "" => " ",
        s => s,
    };
    Some((pc, func, module))
}

/// Every byte of a word set to `b`.
const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// The 8 bytes at `at` as a little-endian word (the first byte is the lowest), if present.
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk = bytes.get(at..)?.first_chunk::<8>()?;
    Some(u64::from_le_bytes(*chunk))
}

/// Index within `word` of its first byte equal to `b`, or 8.
fn first_byte_eq(word: u64, b: u8) -> usize {
    let x = word ^ splat(b);
    // High bit set in each zero byte of `x`; a borrow can only flag bytes after a real zero
    // byte, so the lowest flag is exact.
    let zeros = x.wrapping_sub(splat(1)) & !x & splat(0x80);
    (zeros.trailing_zeros() / 8) as usize
}

/// Index within `word` of its first byte not equal to `b`, or 8.
fn first_byte_ne(word: u64, b: u8) -> usize {
    ((word ^ splat(b)).trailing_zeros() / 8) as usize
}

/// `(start, end)` of the pc of a frame line in the shape `perf script` prints it: an optional
/// tab, spaces, then the pc up to the next space. Looks at 8 bytes at a time instead of one.
///
/// Returns `None` whenever the line is not in that shape (other leading whitespace, non-ASCII,
/// no space within reach), and the caller then takes the general path; when it returns a
/// range, it is exactly the one the general path (`trim_start`, then the first space) finds.
fn pc_fast_path(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut at = usize::from(bytes.first() == Some(&b'\t'));
    // Leading spaces (perf right-aligns the pc in 16 columns).
    loop {
        let n = first_byte_ne(word_at(bytes, at)?, b' ');
        at += n;
        if n < 8 {
            break;
        }
    }
    let start = at;
    // `at` is a non-space byte; any other whitespace or non-ASCII byte there would be
    // trimmed (or need Unicode rules): leave those lines to the general path.
    if matches!(bytes[start], b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) || !bytes[start].is_ascii() {
        return None;
    }
    loop {
        let n = first_byte_eq(word_at(bytes, at)?, b' ');
        at += n;
        if n < 8 {
            return Some((start, at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pc_fast_path_agrees_with_the_general_path() {
        let general = |line: &str| {
            let trimmed = tidy::trim_start(line);
            let start = line.len() - trimmed.len();
            trimmed
                .bytes()
                .position(|b| b == b' ')
                .map(|sp| (start, start + sp))
        };
        for line in [
            "\t ffffffff8103ce3b native_safe_halt+0x5 ([kernel.kallsyms])",
            "\t         8b10acf llvm::GlobalOptPass::run+0xeb3 (/lib/libLLVM.so)",
            "\t               0 [unknown] ([unknown])",
            "    7f0001 x (y)",
            "7f0001 x (y)",
            "\t\t  7f0001 x (y)",
            "\t \u{3000} 7f0001 x (y)",
            "\t \r7f0001 x (y)",
            "\t 7f0001\tx (y)",
            "\t                        12345678901234567890123456 x (y)",
            "\t 12345678",
            "\t 1234567 ",
            "",
            "\t",
            "        ",
            "         ",
        ] {
            if let Some(fast) = pc_fast_path(line.as_bytes()) {
                assert_eq!(Some(fast), general(line), "{line:?}");
            }
        }
        // The common shapes do take the fast path.
        assert_eq!(
            pc_fast_path(b"\t         8b10acf llvm::GlobalOptPass::run+0xeb3 (/lib/libLLVM.so)"),
            Some((10, 17))
        );
        assert_eq!(
            pc_fast_path(b"\t ffffffff8103ce3b native_safe_halt+0x5 ([kernel.kallsyms])"),
            Some((2, 18))
        );
        // It reads whole words, so a short tail after the pc leaves it to the general path.
        assert_eq!(pc_fast_path(b"\t ffffffff8103ce3b f (m)"), None);
        // Byte-level helpers.
        assert_eq!(first_byte_eq(u64::from_le_bytes(*b"ab cd ef"), b' '), 2);
        assert_eq!(first_byte_eq(u64::from_le_bytes(*b"abcdefgh"), b' '), 8);
        assert_eq!(first_byte_ne(u64::from_le_bytes(*b"   x    "), b' '), 3);
        assert_eq!(first_byte_ne(u64::from_le_bytes(*b"        "), b' '), 8);
        // A byte 0x21 right after a space must not be mistaken for a space (borrow case).
        assert_eq!(first_byte_eq(u64::from_le_bytes(*b"a \x21bcdef"), b' '), 1);
        assert_eq!(first_byte_eq(u64::from_le_bytes(*b"a\x21 bcdef"), b' '), 2);
    }

    #[test]
    fn event_lines() {
        assert_eq!(
            event_line_parts("java 25607 4794564.109216: cycles:"),
            Some(("java", "?", "25607", 11))
        );
        assert_eq!(
            event_line_parts("V8 WorkerThread 24636/25607 [000] 94564.109216: cycles:"),
            Some(("V8 WorkerThread", "24636", "25607", 28))
        );
        assert_eq!(event_line_parts("no digits here"), None);
        assert_eq!(event_line_parts("12 34 "), Some(("12", "?", "34", 6)));
        assert_eq!(event_line_parts(" 12 34 "), Some(("", "?", "12", 4)));
        assert_eq!(event_line_parts("a  1/2/3 x"), Some(("a", "1/2", "3", 9)));
        assert_eq!(event_line_parts("a / x"), Some(("a", "", "", 4)));
        assert_eq!(event_line_parts("a 1a/2 x 7"), None);
        assert_eq!(event_line_parts("\u{3000}1 2 "), Some(("1", "?", "2", 7)));
    }

    #[test]
    fn stack_lines() {
        assert_eq!(
            stack_line_parts("\t ffffffff8103ce3b native_safe_halt ([kernel.kallsyms])"),
            Some(("ffffffff8103ce3b", "native_safe_halt", "[kernel.kallsyms]"))
        );
        assert_eq!(
            stack_line_parts("7f1e2215d058  (/lib/libc.so)"),
            Some(("7f1e2215d058", " ", "/lib/libc.so"))
        );
        assert_eq!(stack_line_parts("7f1e (x)"), None);
        assert_eq!(stack_line_parts("7f1e foo ("), None);
    }
}
