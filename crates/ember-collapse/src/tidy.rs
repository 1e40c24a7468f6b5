//! Frame-name tidying: the small, pure string rules that turn a symbol as `perf script` printed
//! it into the frame name that `stackcollapse-perf.pl` (and inferno) would emit.
//!
//! Everything here works on `&str` but only ever inspects ASCII bytes, so multi-byte UTF-8
//! characters pass through untouched and no index can land inside a character.

/// Length of a legacy Rust symbol hash suffix: `h` followed by 16 hex digits.
const RUST_HASH_LEN: usize = 17;

/// Strips a trailing `+0x<hex>` symbol offset (an empty hex tail counts, as in the reference).
pub(crate) fn strip_offset(func: &str) -> &str {
    let bytes = func.as_bytes();
    // Only the last `+` can start a strippable offset: any earlier `+0x` would have this later
    // `+` in its tail, and `+` is not a hex digit.
    if let Some(plus) = memchr::memrchr(b'+', bytes) {
        let tail = &bytes[plus + 1..];
        if tail.starts_with(b"0x") && tail[2..].iter().all(u8::is_ascii_hexdigit) {
            return &func[..plus];
        }
    }
    func
}

/// True when the symbol still ends in a legacy Rust hash (`::h0123456789abcdef` style tail).
fn has_rust_hash(symbol: &str) -> bool {
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
pub(crate) fn push_tidy_generic(out: &mut Vec<u8>, func: &str) {
    let bytes = func.as_bytes();
    let mut depth: i64 = 0;
    let mut after_dot: Option<usize> = None;
    let mut cut = bytes.len();
    for (idx, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'{' | b'[' => depth += 1,
            b'>' | b'}' | b']' | b')' => depth -= 1,
            b'(' => {
                if depth == 0
                    && after_dot != Some(idx)
                    && !bytes[idx..].starts_with(b"(anonymous namespace)")
                {
                    cut = idx;
                    break;
                }
                depth += 1;
            }
            b'.' => after_dot = Some(idx + 1),
            _ => {}
        }
    }
    let start = out.len();
    out.extend_from_slice(&bytes[..cut]);
    for b in &mut out[start..] {
        if *b == b';' {
            *b = b':';
        }
    }
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

/// True when `module` is a JIT symbol source: a perf map file (`/tmp/perf-<pid>.map`) or a
/// jitdump-generated `jitted-*.so`.
pub(crate) fn is_jit(module: &str) -> bool {
    (module.starts_with("/tmp/perf-") && module.ends_with(".map"))
        || (module.contains("/jitted-") && module.ends_with(".so"))
}

/// Returns `func` without `'` and `"` (as `stackcollapse-perf.pl` prints names), borrowing
/// when there is nothing to remove.
pub(crate) fn strip_quotes<'a>(func: &'a str, scratch: &'a mut String) -> &'a str {
    if !func.bytes().any(|b| b == b'\'' || b == b'"') {
        return func;
    }
    scratch.clear();
    scratch.extend(func.chars().filter(|&c| c != '\'' && c != '"'));
    scratch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tidy(s: &str) -> String {
        let mut out = Vec::new();
        push_tidy_generic(&mut out, s);
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
    }

    #[test]
    fn offsets_are_stripped_only_when_hex() {
        assert_eq!(strip_offset("foo+0x1f"), "foo");
        assert_eq!(strip_offset("foo+0x"), "foo");
        assert_eq!(strip_offset("foo+0xzz"), "foo+0xzz");
        assert_eq!(strip_offset("a+0x1+b"), "a+0x1+b");
        assert_eq!(strip_offset("+"), "+");
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
