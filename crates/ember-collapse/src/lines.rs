//! The `perf script` line grammar: splitting event (sample header) lines and stack (frame)
//! lines into their fields, with a word-at-a-time fast path for the common frame layout.

use crate::tidy;

/// Perl's `\s` on bytes: the separators `stackcollapse-perf.pl`'s regexes accept between fields.
/// Producers differ in which they write: Linux `perf script` pads with spaces, Android
/// simpleperf's `report_sample.py` separates with tabs.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Splits an event line into `(comm, pid, tid, index after the TID word)`, the way
/// `stackcollapse-perf.pl` reads it with `^(\S.+?)\s+(\d+)\/*(\d+)*\s+`.
///
/// The command name starts at the first non-space (the script wants two bytes; one is enough
/// here) and ends at the first run of whitespace (spaces or tabs) that is followed by a
/// `PID/TID` or `TID` word and more whitespace, so a thread name may itself contain spaces
/// and numbers (`DOM Worker 12` ends at `DOM Worker`, as in the script). Without a PID (or with a TID of `0`, which Perl reads
/// as false) the PID is reported as `?` and the first number is the TID.
pub(crate) fn event_line_parts(line: &str) -> Option<(&str, &str, &str, usize)> {
    let bytes = line.as_bytes();
    // Leading whitespace is skipped (the Perl script would not read the line at all): perf
    // right-aligns the name in 16 columns when it prints samples without a call graph, and
    // inferno folds those single-line samples.
    let start = bytes.iter().position(|&b| !is_space(b))?;
    let digits_from = |mut at: usize| {
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        at
    };
    // `.+?` is lazy: the first whitespace run after the name's first byte that the rest
    // matches after wins. (The regex wants two bytes before it and so drops the samples of a
    // one-letter thread; they are read here.) Whitespace and digits are disjoint, so a run
    // that fails fails from any of its bytes.
    let mut at = start + 1;
    while at < bytes.len() {
        if !is_space(bytes[at]) {
            at += 1;
            continue;
        }
        let mut run_end = at;
        while bytes.get(run_end).is_some_and(|&b| is_space(b)) {
            run_end += 1;
        }
        let first_end = digits_from(run_end);
        if first_end > run_end {
            let mut slashes_end = first_end;
            while bytes.get(slashes_end) == Some(&b'/') {
                slashes_end += 1;
            }
            let second_end = digits_from(slashes_end);
            if bytes.get(second_end).is_some_and(|&b| is_space(b)) {
                let first = &line[run_end..first_end];
                let second = &line[slashes_end..second_end];
                let (pid, tid) = if second.is_empty() || second == "0" {
                    ("?", first)
                } else {
                    (first, second)
                };
                return Some((&line[start..at], pid, tid, second_end + 1));
            }
        }
        at = run_end;
    }
    None
}

/// Splits a stack line into `(pc, symbol, module)` the way `stackcollapse-perf.pl` reads it
/// with `^\s*(\w+)\s*(.+) \((.*)\)`: the pc, whitespace (spaces or tabs), the symbol up to the
/// last ` (` that a `)` follows, and the module up to the last `)` — so modules may contain
/// spaces and parentheses (`[JIT app cache]`, `/memfd:doublemapper (deleted)`).
///
/// Differences from the regex, on lines no producer writes: the pc is everything up to the
/// first whitespace (not only `\w` bytes), and a line whose only space is the one before the
/// module (`7f1e (m)`) has no symbol rather than a pc cut short by one digit.
pub(crate) fn stack_line_parts(line: &str) -> Option<(&str, &str, &str)> {
    let bytes = line.as_bytes();
    let (pc_start, pc_end) = match pc_fast_path(bytes) {
        Some(range) => range,
        None => {
            let start = line.len() - tidy::trim_start(line).len();
            let len = bytes[start..].iter().position(|&b| is_space(b))?;
            (start, start + len)
        }
    };
    let mut sym_start = pc_end;
    while bytes.get(sym_start).is_some_and(|&b| is_space(b)) {
        sym_start += 1;
    }
    // The module is at the end of a line that can be hundreds of bytes long (C++ and Rust
    // symbols): vectorised reverse searches pay off here.
    let close = memchr::memrchr(b')', bytes)?;
    let mut open_end = close;
    let open = loop {
        let open = memchr::memrchr(b'(', &bytes[..open_end])?;
        if open > pc_end + 1 && bytes[open - 1] == b' ' {
            break open;
        }
        open_end = open;
    };
    let space = open - 1;
    // `(.+)` takes at least one byte: when the whitespace after the pc runs up to the module,
    // `\s*` gives its last byte back and the symbol is that one space.
    let func = &line[sym_start.min(space - 1)..space];
    Some((&line[pc_start..pc_end], func, &line[open + 1..close]))
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

/// Index within `word` of its first byte at or below `b' '` (spaces, tabs, control bytes), or 8.
fn first_byte_le_space(word: u64) -> usize {
    // High bit set in each byte below 0x21 (bytes of 0x80 and above are masked by `!word`);
    // as in `first_byte_eq`, a borrow only flags bytes after a real one.
    let low = word.wrapping_sub(splat(0x21)) & !word & splat(0x80);
    (low.trailing_zeros() / 8) as usize
}

/// Index within `word` of its first byte not equal to `b`, or 8.
fn first_byte_ne(word: u64, b: u8) -> usize {
    ((word ^ splat(b)).trailing_zeros() / 8) as usize
}

/// `(start, end)` of the pc of a frame line in the shape `perf script` prints it: an optional
/// tab, spaces, then the pc up to the next space or tab. Looks at 8 bytes at a time instead of one.
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
    // The pc ends at a space (perf) or a tab (simpleperf's first format): the first byte at
    // or below b' '; any other control byte there goes to the general path.
    loop {
        let n = first_byte_le_space(word_at(bytes, at)?);
        at += n;
        if n < 8 {
            return matches!(bytes[at], b' ' | b'\t').then_some((start, at));
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
                .position(is_space)
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
        assert_eq!(first_byte_le_space(u64::from_le_bytes(*b"ab cd ef")), 2);
        assert_eq!(first_byte_le_space(u64::from_le_bytes(*b"ab\tcd ef")), 2);
        assert_eq!(first_byte_le_space(u64::from_le_bytes(*b"abcdefgh")), 8);
        assert_eq!(
            first_byte_le_space(u64::from_le_bytes(*b"ab\xe2\x80\x83def")),
            8
        );
        assert_eq!(first_byte_ne(u64::from_le_bytes(*b"   x    "), b' '), 3);
        assert_eq!(first_byte_ne(u64::from_le_bytes(*b"        "), b' '), 8);
        // A byte 0x21 right after a space must not be mistaken for a space (borrow case).
        assert_eq!(first_byte_le_space(u64::from_le_bytes(*b"a \x21bcdef")), 1);
        assert_eq!(first_byte_le_space(u64::from_le_bytes(*b"a\x21 bcdef")), 2);
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
        // Tabs (simpleperf), padding, and numbers inside thread names, as the Perl regex reads
        // them: the first number between whitespace ends the name.
        assert_eq!(
            event_line_parts("RenderThread\t1234/1262 [001] 5.000001: 250000 cpu-clock:"),
            Some(("RenderThread", "1234", "1262", 23))
        );
        assert_eq!(
            event_line_parts("Jit thread pool\t1241 [003] 5.1:\t\t250000 cpu-clock:"),
            Some(("Jit thread pool", "?", "1241", 21))
        );
        assert_eq!(
            event_line_parts("DOM Worker 12    4100/4133    [011] 1.0: 1 cycles:"),
            Some(("DOM Worker", "?", "12", 14))
        );
        assert_eq!(
            event_line_parts("swapper       0/0       [000] 1.0: 1 cycles:"),
            Some(("swapper", "?", "0", 18))
        );
        assert_eq!(event_line_parts("no digits here"), None);
        assert_eq!(event_line_parts("12 34 "), Some(("12", "?", "34", 6)));
        // The name starts with a non-space byte; one is enough (Perl's `\S.+?` wants two).
        assert_eq!(event_line_parts(" 12 34 "), Some(("12", "?", "34", 7)));
        assert_eq!(event_line_parts("  \t "), None);
        assert_eq!(event_line_parts("a 1 x"), Some(("a", "?", "1", 4)));
        assert_eq!(event_line_parts("a \t1 x"), Some(("a", "?", "1", 5)));
        assert_eq!(event_line_parts("a 1x 2 y"), Some(("a 1x", "?", "2", 7)));
        assert_eq!(event_line_parts("ab  1/2/3 x"), None);
        assert_eq!(event_line_parts("ab 1// x 7 y"), Some(("ab", "?", "1", 7)));
        assert_eq!(event_line_parts("ab 1a/2 x 7"), None);
        assert_eq!(
            event_line_parts("\u{3000}1 2 "),
            Some(("\u{3000}1", "?", "2", 7))
        );
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
        // simpleperf's first format: the pc, a tab, the symbol.
        assert_eq!(
            stack_line_parts("      7a1b2c3d40\t__epoll_pwait (/apex/libc.so)"),
            Some(("7a1b2c3d40", "__epoll_pwait", "/apex/libc.so"))
        );
        // Modules with spaces and parentheses, and text after the module.
        assert_eq!(
            stack_line_parts("\t 7b0000b000 a.B.c ([JIT app cache])"),
            Some(("7b0000b000", "a.B.c", "[JIT app cache]"))
        );
        assert_eq!(
            stack_line_parts("\t 7f02 [unknown] (/memfd:doublemapper (deleted))"),
            Some(("7f02", "[unknown] (/memfd:doublemapper", "deleted)"))
        );
        assert_eq!(
            stack_line_parts("\t 7f02 f(int) (/a b) trailing"),
            Some(("7f02", "f(int)", "/a b"))
        );
        // Whitespace inside the symbol is kept, as the regex keeps it.
        assert_eq!(
            stack_line_parts("\t 7f02 f\t  (m)"),
            Some(("7f02", "f\t ", "m"))
        );
    }
}
