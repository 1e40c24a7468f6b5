//! Frame-name tidying: the small, pure string rules that turn a symbol as `perf script` printed
//! it into the frame name that `stackcollapse-perf.pl` (and inferno) would emit.
//!
//! Everything here works on `&str` but only ever inspects ASCII bytes, so multi-byte UTF-8
//! characters pass through untouched and no index can land inside a character.

/// Length of a legacy Rust symbol hash suffix: `h` followed by 16 hex digits.
const RUST_HASH_LEN: usize = 17;

/// What one pass over a raw symbol found; lets the later steps skip their own searches.
/// Every flag is an over-approximation for any substring of the scanned symbol.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SymbolScan {
    /// Contains `'` or `"`.
    pub(crate) quotes: bool,
    /// Contains `-` (a possible `->` Java inlining separator).
    pub(crate) dash: bool,
    /// Contains `(` (a possible argument list).
    pub(crate) paren: bool,
    /// Contains `;`.
    pub(crate) semicolon: bool,
}

impl SymbolScan {
    /// No flag set: for text known to contain none of the characters.
    pub(crate) const NONE: SymbolScan = SymbolScan {
        quotes: false,
        dash: false,
        paren: false,
        semicolon: false,
    };

    /// Flags that make every later step do its full search (for text we did not scan).
    pub(crate) const ALL: SymbolScan = SymbolScan {
        quotes: true,
        dash: true,
        paren: true,
        semicolon: true,
    };
}

const F_QUOTE: u8 = 2;
const F_DASH: u8 = 4;
const F_PAREN: u8 = 8;
const F_SEMI: u8 = 16;
static SCAN_FLAGS: [u8; 256] = byte_table(&[
    (b"'\"", F_QUOTE),
    (b"-", F_DASH),
    (b"(", F_PAREN),
    (b";", F_SEMI),
]);

/// A 256-entry lookup table built at compile time: each `(bytes, value)` gives `value` to
/// every byte of `bytes`; every other byte maps to 0. Both tables of this module
/// ([`SCAN_FLAGS`], [`CLASS`]) are written with it.
const fn byte_table(classes: &[(&[u8], u8)]) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < classes.len() {
        let (bytes, value) = classes[i];
        let mut j = 0;
        while j < bytes.len() {
            t[bytes[j] as usize] = value;
            j += 1;
        }
        i += 1;
    }
    t
}

/// Scans a symbol once for every character a later tidy step cares about.
pub(crate) fn scan_symbol(symbol: &str) -> SymbolScan {
    let bytes = symbol.as_bytes();
    // 16 bytes per step, each lane compared with the five characters and OR-ed into its own
    // accumulator: plain compares (unlike table lookups) let the compiler use vector
    // instructions, 16 lanes at once.
    let mut lanes = [0u8; 16];
    let mut blocks = bytes.chunks_exact(16);
    for block in &mut blocks {
        scan_block(&mut lanes, block);
    }
    let tail = blocks.remainder();
    let mut flags = 0u8;
    if !tail.is_empty() {
        match bytes.len().checked_sub(16) {
            // The last 16 bytes, overlapping what was scanned already (OR-ing a byte's flags
            // twice changes nothing): one more vector step instead of a byte loop.
            Some(last) => scan_block(&mut lanes, &bytes[last..]),
            None => {
                for &b in tail {
                    flags |= SCAN_FLAGS[b as usize];
                }
            }
        }
    }
    flags |= lanes.iter().fold(0u8, |acc, &lane| acc | lane);
    SymbolScan {
        quotes: flags & F_QUOTE != 0,
        dash: flags & F_DASH != 0,
        paren: flags & F_PAREN != 0,
        semicolon: flags & F_SEMI != 0,
    }
}

/// ORs the flags of each byte of `block` (16 bytes) into its lane.
#[inline]
fn scan_block(lanes: &mut [u8; 16], block: &[u8]) {
    for (lane, &b) in lanes.iter_mut().zip(block) {
        let quote = u8::from(b == b'\'') | u8::from(b == b'"');
        *lane |= (quote * F_QUOTE)
            | (u8::from(b == b'-') * F_DASH)
            | (u8::from(b == b'(') * F_PAREN)
            | (u8::from(b == b';') * F_SEMI);
    }
}

/// Strips a trailing `+0x<hex>` symbol offset (an empty hex tail counts, as in the reference).
///
/// The reference looks at the last `+` only; an offset `+0x<hex>` at the very end contains no
/// other `+`, so scanning back over the hex digits and checking for `+0x` finds exactly that
/// `+` without a pass over the whole symbol.
pub(crate) fn strip_offset(func: &str) -> &str {
    let bytes = func.as_bytes();
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    let x = bytes.len() - digits;
    if x >= 3 && &bytes[x - 3..x] == b"+0x" {
        return &func[..x - 3];
    }
    func
}

/// True when the symbol still ends in a legacy Rust hash (`::h0123456789abcdef` style tail).
pub(crate) fn has_rust_hash(symbol: &str) -> bool {
    let bytes = symbol.as_bytes();
    bytes.len() >= RUST_HASH_LEN && {
        let tail = &bytes[bytes.len() - RUST_HASH_LEN..];
        tail[0] == b'h' && tail[1..].iter().all(u8::is_ascii_hexdigit)
    }
}

/// Re-demangles a Rust symbol that `perf` only half demangled (legacy mangling: `..` for `::`,
/// `$LT$`-style escapes and a trailing hash), writing the result into `out`.
///
/// Returns `false` (leaving `out` untouched) when the symbol carries no trailing Rust hash, in
/// which case it is already in its final form. The escape table follows the legacy Rust
/// mangling scheme; an unknown `$` escape ends decoding and the remainder is kept verbatim.
pub(crate) fn redemangle_rust(symbol: &str, out: &mut String) -> bool {
    if !has_rust_hash(symbol) {
        return false;
    }
    out.clear();
    let mut rest = &symbol[..symbol.len() - RUST_HASH_LEN];
    rest = rest.strip_suffix("::").unwrap_or(rest);
    if rest.starts_with("_$") {
        rest = &rest[1..];
    }
    const ESCAPES: &[(&str, &str)] = &[
        ("$SP$", "@"),
        ("$BP$", "*"),
        ("$RF$", "&"),
        ("$LT$", "<"),
        ("$GT$", ">"),
        ("$LP$", "("),
        ("$RP$", ")"),
        ("$C$", ","),
        ("$u7e$", "~"),
        ("$u20$", " "),
        ("$u27$", "'"),
        ("$u3d$", "="),
        ("$u5b$", "["),
        ("$u5d$", "]"),
        ("$u7b$", "{"),
        ("$u7d$", "}"),
        ("$u3b$", ";"),
        ("$u2b$", "+"),
        ("$u21$", "!"),
        ("$u22$", "\""),
    ];
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            if let Some(after2) = after.strip_prefix('.') {
                out.push_str("::");
                rest = after2;
            } else {
                out.push('.');
                rest = after;
            }
        } else if rest.starts_with('$') {
            match ESCAPES.iter().find(|(pat, _)| rest.starts_with(pat)) {
                Some((pat, replacement)) => {
                    out.push_str(replacement);
                    rest = &rest[pat.len()..];
                }
                None => {
                    out.push_str(rest);
                    break;
                }
            }
        } else {
            let end = rest
                .bytes()
                .position(|b| b == b'$' || b == b'.')
                .unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    true
}

/// Appends `func` to `out` the way the generic tidy rule wants it: `;` becomes `:` (it is the
/// folded-format frame separator) and a top-level argument list is cut off.
///
/// An opening parenthesis is kept (not treated as an argument list) when it sits inside
/// `<>`, `{}` or `[]` (templates, C++ lambdas), directly follows a `.` (Go methods such as
/// `net/http.(*Client).Do`), or starts `(anonymous namespace)`.
///
/// With `java` set (the process is a JVM), the Java tidy rule follows: a result of the form
/// `Lpkg/Class...` loses its leading `L`.
pub(crate) fn push_tidy_generic(out: &mut Vec<u8>, func: &str, hints: &SymbolScan, java: bool) {
    let bytes = func.as_bytes();
    // Without any `(` there is no argument list to cut, and brackets do not matter.
    let cut = if hints.paren {
        argument_list_start(bytes)
    } else {
        bytes.len()
    };
    let kept = &bytes[..cut];
    let skip = usize::from(java && kept.first() == Some(&b'L') && kept.contains(&b'/'));
    let start = out.len();
    out.extend_from_slice(&kept[skip..]);
    if !hints.semicolon {
        return;
    }
    // Branch-free (`;` and `:` differ in the lowest bit only), so the compiler vectorises it.
    for b in &mut out[start..] {
        *b ^= u8::from(*b == b';');
    }
}

/// Byte classes for [`argument_list_start`]; 0 means "not interesting".
const OPEN: u8 = 1;
const CLOSE: u8 = 2;
const PAREN: u8 = 3;
const DOT: u8 = 4;
static CLASS: [u8; 256] =
    byte_table(&[(b"<{[", OPEN), (b">}])", CLOSE), (b"(", PAREN), (b".", DOT)]);

/// Index of the `(` that starts a top-level argument list, or `bytes.len()` if there is none.
fn argument_list_start(bytes: &[u8]) -> usize {
    let mut depth: i64 = 0;
    let mut after_dot = usize::MAX;
    for (idx, &b) in bytes.iter().enumerate() {
        match CLASS[b as usize] {
            0 => {}
            OPEN => depth += 1,
            CLOSE => depth -= 1,
            PAREN => {
                if depth == 0
                    && after_dot != idx
                    && !bytes[idx..].starts_with(b"(anonymous namespace)")
                {
                    return idx;
                }
                depth += 1;
            }
            _ => after_dot = idx + 1,
        }
    }
    bytes.len()
}

/// True when `module` names kernel code: `[kernel.kallsyms]`-style names, `.ko` modules or a
/// (possibly versioned) `vmlinux` image — but never `[unknown]`.
pub(crate) fn is_kernel(module: &str) -> bool {
    (module.starts_with('[') || module.ends_with(".ko") || is_vmlinux(module))
        && module != "[unknown]"
}

/// True when `module` ends in a `vmlinux` file name, optionally followed by a version made of
/// ASCII letters, digits, `-`, `.` and `_`.
fn is_vmlinux(module: &str) -> bool {
    match module.rfind("vmlinux") {
        Some(at) => module.as_bytes()[at..]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')),
        None => false,
    }
}

/// Finds the first `->` (Java inlining separator) in `s`.
pub(crate) fn find_arrow(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'-', &bytes[from..]) {
        let at = from + i;
        if bytes.get(at + 1) == Some(&b'>') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The ASCII bytes `str::trim` removes (Unicode `White_Space`). `u8::is_ascii_whitespace`
/// leaves out the vertical tab (0x0b), so it would not trim what `str::trim` trims.
fn is_ascii_white_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// `str::trim_start` with an ASCII fast path (the common case for perf output).
pub(crate) fn trim_start(s: &str) -> &str {
    // Most strings have nothing to trim: one byte settles that.
    if s.as_bytes().first().is_some_and(u8::is_ascii_graphic) {
        return s;
    }
    let skip = s
        .bytes()
        .position(|b| !is_ascii_white_space(b))
        .unwrap_or(s.len());
    let rest = &s[skip..];
    if rest.as_bytes().first().is_some_and(|b| !b.is_ascii()) {
        rest.trim_start()
    } else {
        rest
    }
}

/// `str::trim_end` with an ASCII fast path.
pub(crate) fn trim_end(s: &str) -> &str {
    if s.as_bytes().last().is_some_and(u8::is_ascii_graphic) {
        return s;
    }
    let keep = s
        .bytes()
        .rposition(|b| !is_ascii_white_space(b))
        .map_or(0, |i| i + 1);
    let rest = &s[..keep];
    if rest.as_bytes().last().is_some_and(|b| !b.is_ascii()) {
        rest.trim_end()
    } else {
        rest
    }
}

/// `str::trim` with an ASCII fast path.
pub(crate) fn trim(s: &str) -> &str {
    trim_end(trim_start(s))
}

/// True when `module` is a JIT symbol source: a perf map file (`/tmp/perf-<pid>.map`) or a
/// jitdump-generated `jitted-*.so`.
pub(crate) fn is_jit(module: &str) -> bool {
    (module.starts_with("/tmp/perf-") && module.ends_with(".map"))
        || (module.contains("/jitted-") && module.ends_with(".so"))
}

/// Returns `func` without `'` and `"` (as `stackcollapse-perf.pl` prints names), borrowing
/// when there is nothing to remove.
pub(crate) fn strip_quotes<'a>(func: &'a str, scratch: &'a mut String) -> &'a str {
    scratch.clear();
    scratch.extend(func.chars().filter(|&c| c != '\'' && c != '"'));
    scratch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tidy(s: &str) -> String {
        let mut out = Vec::new();
        push_tidy_generic(&mut out, s, &SymbolScan::ALL, false);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn generic_tidy_keeps_go_methods_templates_and_namespaces() {
        assert_eq!(
            tidy("go/build.(*importReader).readByte"),
            "go/build.(*importReader).readByte"
        );
        assert_eq!(tidy("foo<Vec::<usize>>(Vec<usize>)"), "foo<Vec::<usize>>");
        assert_eq!(tidy(".run()V"), ".run");
        assert_eq!(
            tidy("std::function<void (int, int)>::operator(int, int)"),
            "std::function<void (int, int)>::operator"
        );
        assert_eq!(
            tidy("{lambda(int, int)#2}::operator()"),
            "{lambda(int, int)#2}::operator"
        );
        assert_eq!(
            tidy("(anonymous namespace)::myBar()"),
            "(anonymous namespace)::myBar"
        );
        assert_eq!(tidy("Lfoo;.bar(I)V"), "Lfoo:.bar");
        assert_eq!(tidy("ünïcode;(x)"), "ünïcode:");
        let mut out = Vec::new();
        push_tidy_generic(
            &mut out,
            "Ljava/lang/Thread;.run()V",
            &SymbolScan::ALL,
            true,
        );
        assert_eq!(out, b"java/lang/Thread:.run");
        out.clear();
        push_tidy_generic(
            &mut out,
            "Lfoo;.bar(Ljava/lang/String;)V",
            &SymbolScan::ALL,
            true,
        );
        assert_eq!(out, b"Lfoo:.bar");
    }

    #[test]
    fn offsets_are_stripped_only_when_hex() {
        let strip = strip_offset;
        assert_eq!(strip("foo+0x1f"), "foo");
        assert_eq!(strip("foo+0x"), "foo");
        assert_eq!(strip("foo+0xzz"), "foo+0xzz");
        assert_eq!(strip("a+0x1+b"), "a+0x1+b");
        assert_eq!(strip("+"), "+");
        assert_eq!(strip("+0x"), "");
        assert_eq!(strip("a+0x+0x0"), "a+0x");
        assert_eq!(strip("a+0xab0x1"), "a+0xab0x1");
        let scan = scan_symbol("a'b-c(d;e");
        assert!(scan.quotes && scan.dash && scan.paren && scan.semicolon);
        let scan = scan_symbol("plain::name");
        assert!(!scan.quotes && !scan.dash && !scan.paren && !scan.semicolon);
        let unknown = scan_symbol("[unknown]");
        let none = SymbolScan::NONE;
        assert_eq!(
            (
                unknown.quotes,
                unknown.dash,
                unknown.paren,
                unknown.semicolon
            ),
            (none.quotes, none.dash, none.paren, none.semicolon)
        );
        // Each character alone, at every position of symbols longer than one block.
        for len in [1usize, 15, 16, 17, 40, 70] {
            for at in 0..len {
                for (c, flag) in [
                    ('\'', F_QUOTE),
                    ('"', F_QUOTE),
                    ('-', F_DASH),
                    ('(', F_PAREN),
                    (';', F_SEMI),
                ] {
                    let mut symbol = "x".repeat(len);
                    symbol.replace_range(at..at + 1, &c.to_string());
                    let scan = scan_symbol(&symbol);
                    let got = (u8::from(scan.quotes) * F_QUOTE)
                        | (u8::from(scan.dash) * F_DASH)
                        | (u8::from(scan.paren) * F_PAREN)
                        | (u8::from(scan.semicolon) * F_SEMI);
                    assert_eq!(got, flag, "{symbol:?}");
                }
            }
        }
    }

    #[test]
    fn rust_symbols_are_redemangled() {
        let mut out = String::new();
        assert!(redemangle_rust(
            "_$LT$std..fs..ReadDir$u20$as$u20$core..iter..Iterator$GT$::next::hc14f1750ca79129b",
            &mut out
        ));
        assert_eq!(out, "<std::fs::ReadDir as core::iter::Iterator>::next");
        assert!(redemangle_rust(
            "rg::search::_$u7b$$u7b$closure$u7d$$u7d$::h6e849b55a66fcd85",
            &mut out
        ));
        assert_eq!(out, "rg::search::_{{closure}}");
        assert!(!redemangle_rust("std::fs::File::open", &mut out));
        assert!(!redemangle_rust(
            "_ZN3std2rt19lang_start_internal17h540c897fe52ba9c5E",
            &mut out
        ));
        // Unknown escapes keep the remainder verbatim instead of failing.
        assert!(redemangle_rust("a$zz$b::h0123456789abcdef", &mut out));
        assert_eq!(out, "a$zz$b");
    }

    #[test]
    fn ascii_fast_trims_agree_with_std() {
        for s in [
            "",
            " ",
            "\t a b \r",
            "\u{3000}x\u{3000}",
            " \u{85}",
            "a\u{a0} ",
            "\u{2003}",
            "\x0b\x0cz\x0c",
            "x",
            "ab c",
            "a\u{3000}",
            "\u{3000}a",
            "\u{7f}",
            "\u{1f}x\u{1f}",
        ] {
            assert_eq!(trim_start(s), s.trim_start(), "{s:?}");
            assert_eq!(trim_end(s), s.trim_end(), "{s:?}");
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
        assert_eq!(find_arrow("a-b->c"), Some(3));
        assert_eq!(find_arrow("a->"), Some(1));
        assert_eq!(find_arrow("a-"), None);
    }

    #[test]
    fn kernel_and_jit_modules() {
        assert!(is_kernel("[kernel.kallsyms]"));
        assert!(is_kernel(
            "/usr/lib/debug/boot/vmlinux-5.4.14-cloudflare-2020.1.11"
        ));
        assert!(is_kernel("nf.ko"));
        assert!(!is_kernel("[unknown]"));
        assert!(!is_kernel("vmlinux-5.4 "));
        assert!(is_jit("/tmp/perf-123.map"));
        assert!(is_jit("/home/u/.debug/jit/x/jitted-1-2.so"));
        assert!(!is_jit("/usr/lib/libc.so"));
    }
}
