//! JIT symbol maps (`/tmp/perf-PID.map`).

use super::Symbol;
use super::table::SymTable;

/// A JIT symbol map (`/tmp/perf-PID.map`: `START SIZE name` in hex).
#[derive(Debug, Default)]
pub struct PerfMap {
    symbols: SymTable,
}

impl PerfMap {
    /// Parses perf-map text; malformed lines are skipped.
    pub fn parse(text: &str) -> PerfMap {
        let mut table = SymTable::default();
        for line in text.lines() {
            let mut parts = line.splitn(3, ' ');
            let (Some(start), Some(size), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let parse = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let (Some(start), Some(size)) = (parse(start), parse(size)) else {
                continue;
            };
            table.push_owned(start, size.max(1), name.trim_end());
        }
        table.finish();
        PerfMap { symbols: table }
    }

    /// The JIT function containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<Symbol> {
        self.symbols.symbol(addr, 1, false)
    }
}
