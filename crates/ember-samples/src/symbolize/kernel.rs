//! Kernel symbols from `/proc/kallsyms`.

use super::Symbol;
use super::binary::{Nearest, make_symbol};
use super::table::SymTable;
use std::ops::ControlFlow;

/// kallsyms has no sizes: a kernel symbol covers at most 1 MiB.
const KERNEL_UNSIZED_LIMIT: u64 = 0x100000;

/// A text symbol line of kallsyms: `addr type name [module]`.
struct KallsymsLine<'a> {
    addr: u64,
    name: &'a [u8],
    /// The symbol belongs to a module (or BPF, ftrace): `[name]` follows.
    module: bool,
}

impl<'a> KallsymsLine<'a> {
    /// The line when it is a text symbol (`t`, `T`, `w`, `W`) with a
    /// non-zero address.
    fn parse(line: &'a [u8]) -> Option<KallsymsLine<'a>> {
        let mut parts = line
            .split(|b| b.is_ascii_whitespace())
            .filter(|p| !p.is_empty());
        let (addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
        if !matches!(kind, b"t" | b"T" | b"w" | b"W") {
            return None;
        }
        let addr = u64::from_str_radix(std::str::from_utf8(addr).ok()?, 16).ok()?;
        (addr != 0).then_some(KallsymsLine {
            addr,
            name,
            module: parts.next().is_some(),
        })
    }
}

/// Kernel symbols from `/proc/kallsyms`.
#[derive(Debug, Default)]
pub struct Kallsyms {
    pub(super) symbols: SymTable,
}

impl Kallsyms {
    /// Parses kallsyms text (`addr type name [module]`), keeping text symbols.
    pub fn parse(text: &str) -> Kallsyms {
        Self::read(text.as_bytes())
    }

    /// Like [`Kallsyms::parse`], line by line from a reader; unreadable or
    /// non-UTF-8 lines are skipped.
    pub fn read(mut input: impl std::io::BufRead) -> Kallsyms {
        let mut table = SymTable::default();
        for_each_line(&mut input, |line| {
            if let Some(KallsymsLine { addr, name, .. }) = KallsymsLine::parse(line)
                && let Ok(name) = std::str::from_utf8(name)
            {
                table.push_owned(addr, 0, name);
            }
            ControlFlow::Continue(())
        });
        table.finish();
        Kallsyms { symbols: table }
    }

    /// Resolves sorted, distinct kernel addresses in one streaming pass
    /// over kallsyms text, keeping no table: only the names that answer a
    /// query are copied. Returns `None` when the text has no usable
    /// addresses (e.g. `kptr_restrict`).
    ///
    /// Reading stops early once the (address-ordered) core kernel symbols
    /// pass the highest query: modules, BPF programs and trampolines sit
    /// outside the kernel image, so they cannot be nearer to an address
    /// inside it than the image's own symbols.
    pub fn resolve_sorted(
        mut input: impl std::io::BufRead,
        queries: &[u64],
    ) -> Option<Vec<Option<Symbol>>> {
        let mut near = Nearest::new(queries.to_vec());
        let mut names: Vec<Vec<u8>> = vec![Vec::new(); queries.len()];
        let (lowest, highest) = (queries.first().copied()?, queries.last().copied()?);
        let mut first: Option<u64> = None;
        let mut previous = 0u64;
        let mut in_order = true;
        for_each_line(&mut input, |line| {
            let Some(parsed) = KallsymsLine::parse(line) else {
                return ControlFlow::Continue(());
            };
            let first = *first.get_or_insert(parsed.addr);
            in_order &= !parsed.module && parsed.addr >= previous;
            previous = parsed.addr;
            if in_order && parsed.addr > highest && lowest >= first {
                return ControlFlow::Break(());
            }
            if let Some(slot) = near.offer(parsed.addr, 0, 0) {
                names[slot].clear();
                names[slot].extend_from_slice(parsed.name);
            }
            ControlFlow::Continue(())
        });
        first?;
        Some(
            near.finish(KERNEL_UNSIZED_LIMIT)
                .into_iter()
                .map(|hit| {
                    let (sym, slot) = hit?;
                    let name = std::str::from_utf8(&names[slot]).ok()?;
                    Some(make_symbol(name, sym.start, false))
                })
                .collect(),
        )
    }

    /// True when the table holds no usable addresses (e.g. `kptr_restrict`).
    pub fn is_empty(&self) -> bool {
        self.symbols.syms.is_empty()
    }

    /// The kernel function containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<Symbol> {
        self.symbols.symbol(addr, KERNEL_UNSIZED_LIMIT, false)
    }
}

/// Calls `f` with each line of `input` (its `\n` included) until the input ends, a read fails
/// (kallsyms is read as far as it can be) or `f` breaks; one buffer serves every line.
fn for_each_line(input: &mut impl std::io::BufRead, mut f: impl FnMut(&[u8]) -> ControlFlow<()>) {
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if f(&line).is_break() {
            return;
        }
    }
}
