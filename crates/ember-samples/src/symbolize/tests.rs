use super::binary::Nearest;
use super::*;

/// The mapping of this process that holds `addr`, from `/proc/self/maps`.
struct OwnMap {
    path: Arc<str>,
    start: u64,
    pgoff: u64,
}

fn own_mapping(addr: u64) -> OwnMap {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let mut cols = line.split_whitespace();
        let (Some(range), Some(_perms), Some(off)) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        let path = cols.nth(2).unwrap_or("");
        let (lo, hi) = range.split_once('-').unwrap();
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).unwrap(),
            u64::from_str_radix(hi, 16).unwrap(),
        );
        if (lo..hi).contains(&addr) {
            return OwnMap {
                path: Arc::from(path),
                start: lo,
                pgoff: u64::from_str_radix(off, 16).unwrap(),
            };
        }
    }
    panic!("{addr:#x} is in no mapping");
}

#[test]
fn demangles_rust_and_cpp() {
    assert_eq!(
        demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
        "core::ptr::drop_in_place"
    );
    assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
    assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    assert_eq!(demangle("main"), "main");
    assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
}

#[test]
fn kallsyms_lookup() {
    let k = Kallsyms::parse(
        "ffffffff81000000 T _stext\nffffffff81000100 t do_thing\nffffffff81000200 D data\nbad line\n",
    );
    assert_eq!(&*k.lookup(0xffffffff81000150).unwrap().name, "do_thing");
    assert_eq!(&*k.lookup(0xffffffff81000000).unwrap().name, "_stext");
    assert!(k.lookup(0xffffffff80000000).is_none());
}

#[test]
fn perf_map_lookup() {
    let m = PerfMap::parse("7f0000001000 20 LazyCompile:foo\n7f0000002000 10 bar baz\nzz\n");
    assert_eq!(&*m.lookup(0x7f000000101f).unwrap().name, "LazyCompile:foo");
    assert!(m.lookup(0x7f0000001020).is_none());
    assert_eq!(&*m.lookup(0x7f0000002000).unwrap().name, "bar baz");
}

#[test]
fn own_binary_symbolizes_a_known_function() {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let pid = std::process::id();
    let here = own_binary_symbolizes_a_known_function as *const () as u64;
    let map = own_mapping(here);
    let mut s = Symbolizer::new();
    let bin = s.binary(&map.path, pid).unwrap();
    let sym = bin.lookup_offset(here - map.start + map.pgoff).unwrap();
    assert!(
        sym.name.ends_with("own_binary_symbolizes_a_known_function"),
        "{} in {}",
        sym.name,
        exe.display()
    );
    assert!(!bin.build_id.is_empty());
}

#[test]
fn unreadable_binary_warns_once() {
    let mut s = Symbolizer::new();
    let p: Arc<str> = Arc::from("/nonexistent/lib.so");
    assert!(s.binary(&p, 1).is_none());
    assert!(s.binary(&p, 1).is_none());
    assert_eq!(s.warnings.len(), 1);
    // JIT code's anonymous mappings are not files: no binary, and nothing to warn about.
    for anon in ["//anon", "/memfd:jit (deleted)"] {
        assert!(s.binary(&Arc::from(anon), 1).is_none());
    }
    assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
}

/// File offsets spread over a binary's executable segments: every
/// 97th byte plus a few past the end, so hits, gaps and misses occur.
fn probe_offsets(b: &Binary) -> Vec<u64> {
    let mut out = Vec::new();
    for &(off, size, _) in &b.segments {
        out.extend((off..off + size).step_by(97));
        out.push(off + size + 0x20000);
    }
    out.push(u64::MAX - 1);
    out
}

#[test]
fn batch_lookups_match_single_lookups_on_real_binaries() {
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    let mut libc = None;
    for line in std::fs::read_to_string("/proc/self/maps").unwrap().lines() {
        if let Some(path) = line.split_whitespace().nth(5)
            && path.contains("libc.so")
        {
            libc = Some(PathBuf::from(path));
        }
    }
    for path in std::iter::once(exe).chain(libc) {
        let mut single = Binary::load(&path).unwrap();
        let mut batch = Binary::load(&path).unwrap();
        let offsets = probe_offsets(&single);
        assert!(offsets.len() > 1000, "{}", path.display());
        batch.prepare(&offsets, false);
        assert!(batch.symbols.is_none(), "the batch builds no table");
        let mut hits = 0;
        for &o in &offsets {
            let want = single.lookup_offset(o);
            hits += usize::from(want.is_some());
            assert_eq!(batch.lookup_offset(o), want, "{} +{o:#x}", path.display());
        }
        assert!(hits > offsets.len() / 4, "{}: {hits} hits", path.display());
        // The answers came from the batch, one computation per offset.
        assert_eq!(batch.lookups, single.lookups);
    }
}

#[test]
fn streaming_kallsyms_matches_the_table() {
    let text = std::fs::read("/proc/kallsyms").unwrap();
    let table = Kallsyms::read(&text[..]);
    if table.is_empty() {
        // kptr_restrict hides addresses: both must say so.
        assert!(Kallsyms::resolve_sorted(&text[..], &[1, 2]).is_none());
        return;
    }
    let addrs: Vec<u64> = table.symbols.syms.iter().map(|s| s.start).collect();
    let (lo, hi) = (addrs[0], addrs[addrs.len() - 1]);
    // Symbol starts, addresses just inside and between them, beyond
    // both ends, and an upper bound well inside the core kernel so the
    // early stop is exercised.
    let mut queries: Vec<u64> = addrs
        .iter()
        .step_by(37)
        .flat_map(|&a| [a, a + 1, a.wrapping_sub(1)])
        .chain([lo - 1, hi + 5, hi + 0x200000, 1])
        .collect();
    queries.sort_unstable();
    queries.dedup();
    for qs in [&queries[..], &queries[..queries.len() / 3]] {
        let got = Kallsyms::resolve_sorted(&text[..], qs).unwrap();
        for (&q, got) in qs.iter().zip(got) {
            assert_eq!(got, table.lookup(q), "{q:#x}");
        }
    }
}

#[test]
fn nearest_prefers_the_larger_symbol_on_equal_starts_and_limits_unsized_ones() {
    let mut n = Nearest::new(vec![10, 19, 30, 200]);
    // Arrival order does not matter.
    n.offer(20, 0, 3);
    n.offer(10, 4, 1);
    n.offer(10, 8, 2);
    n.offer(10, 2, 9);
    n.offer(500, 1, 7);
    let got: Vec<Option<u32>> = n
        .finish(50)
        .into_iter()
        .map(|h| h.map(|(s, _)| s.name))
        .collect();
    assert_eq!(got, [Some(2), None, Some(3), None]);
}

#[test]
fn the_vdso_is_symbolized_from_this_process_copy() {
    use object::{Object, ObjectSymbol};
    let image = vdso_image().expect("this kernel maps a vDSO");
    let file = object::File::parse(image.bytes()).unwrap();
    let start = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok("__vdso_clock_gettime"))
        .expect("the x86_64 vDSO exports __vdso_clock_gettime")
        .address();
    let mut s = Symbolizer::new();
    let path: Arc<str> = Arc::from(VDSO_PATH);
    let bin = s.binary(&path, std::process::id()).expect("[vdso] loads");
    assert!(!bin.build_id.is_empty());
    // The vDSO is one segment at file offset 0 and address 0: offsets are addresses. Two
    // lookups, so the second reads the table after its pages were handed back (an anonymous
    // copy must keep them).
    for offset in [start + 0x10, start + 0x20] {
        let sym = bin
            .lookup_offset(offset)
            .expect("inside __vdso_clock_gettime");
        assert!(sym.name.contains("clock_gettime"), "{}", sym.name);
    }
}
