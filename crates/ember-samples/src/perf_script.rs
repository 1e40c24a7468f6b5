//! `perf script`-compatible text for the perf_collector dumps: one block per
//! sample in time order (header line, one tab-indented frame per line, leaf
//! first, blank line), which `stackcollapse-perf.pl`, inferno and
//! `ember collapse` fold.

use crate::events::Sample;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::{self, Write};

/// Writes `samples` as `perf script` text.
pub fn write_perf_script<'a>(
    samples: impl IntoIterator<Item = &'a Sample>,
    mut out: impl Write,
) -> io::Result<()> {
    for s in samples {
        // perf prints the comm verbatim; an empty one would shift the
        // columns parsers rely on.
        let comm: &str = if s.comm.is_empty() {
            "[unknown]"
        } else {
            &s.comm
        };
        let secs = s.time_ns / 1_000_000_000;
        let micros = (s.time_ns % 1_000_000_000) / 1_000;
        writeln!(
            out,
            "{comm} {}/{} [{:03}] {secs}.{micros:06}: cpu-clock: ",
            s.pid, s.tid, s.cpu
        )?;
        for f in &s.frames {
            let module: &str = if f.module.is_empty() {
                "[unknown]"
            } else {
                &f.module
            };
            match (f.function.is_empty(), f.offset) {
                (false, Some(off)) => writeln!(
                    out,
                    "\t{:16x} {}+{off:#x} ({module})",
                    f.address, f.function
                )?,
                (false, None) => writeln!(out, "\t{:16x} {} ({module})", f.address, f.function)?,
                (true, _) => writeln!(out, "\t{:16x} [unknown] ({module})", f.address)?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The gzip'd `perf script` text of `samples`.
pub fn perf_script_gzip<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    write_perf_script(samples, &mut gz)?;
    gz.finish()
}
