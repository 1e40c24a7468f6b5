//! `perf script`-compatible text, written one way for both sources: a timeline of samples
//! ([`write_samples`], the perf_collector's dumps: time and CPU in each header) and the
//! aggregated stacks of a recording ([`write_recording`], `ember record -o x.perf`: each
//! stack's block repeated once per sample). Blocks are a header line, one tab-indented frame
//! per line leaf first (inlined callees as frames of their own), and a blank line: what
//! `stackcollapse-perf.pl`, inferno and `ember collapse` fold; the block layout itself is
//! `ember_formats::perf_script::write_block`, which writes profiles as perf script too.

use crate::recording::Recording;
use crate::resolve::Resolver;
use crate::symbolize::Symbolizer;
use crate::timeline::{Frame, Sample, push_frames};
use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::{self, Write};

/// Where and when a sample was taken, for its header line.
type Header<'a> = ember_formats::perf_script::Header<'a>;

/// Writes one sample block through the one perf-script block writer (ember-formats', which
/// also writes profiles as perf script).
fn write_block(out: &mut impl Write, header: Header<'_>, frames: &[Frame]) -> io::Result<()> {
    ember_formats::perf_script::write_block(
        out,
        header,
        frames
            .iter()
            .map(|f| ember_formats::perf_script::FrameLine {
                address: f.address,
                function: &f.function,
                offset: f.offset,
                module: &f.module,
            }),
    )
}

/// Writes a timeline's `samples` as `perf script` text, in the order given.
pub fn write_samples<'a>(
    samples: impl IntoIterator<Item = &'a Sample>,
    mut out: impl Write,
) -> io::Result<()> {
    for s in samples {
        let header = Header {
            comm: &s.comm,
            pid: s.pid,
            tid: s.tid,
            at: Some((s.cpu, s.time_ns)),
        };
        write_block(&mut out, header, &s.frames)?;
    }
    Ok(())
}

/// The gzip'd `perf script` text of a timeline's `samples`.
pub fn samples_gzip<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> io::Result<Vec<u8>> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    write_samples(samples, &mut gz)?;
    gz.finish()
}

/// Writes the on-CPU stacks of `rec` as `perf script` text, symbolized with `sym`: one block
/// per sample (a stack seen N times is written N times), stacks ordered by pid, tid and
/// frames so that the output is deterministic.
pub fn write_recording(
    rec: &Recording,
    sym: &mut Symbolizer,
    mut out: impl Write,
) -> io::Result<()> {
    let mut resolver = Resolver::new(rec, sym);
    let mut keys: Vec<_> = rec.stacks().iter().collect();
    keys.sort_by(|a, b| {
        (a.0.pid, a.0.tid)
            .cmp(&(b.0.pid, b.0.tid))
            .then_with(|| crate::pprof::frames_cmp(&a.0.frames, &b.0.frames))
    });
    let mut block = Vec::new();
    let mut frames = Vec::new();
    for (key, value) in keys {
        block.clear();
        frames.clear();
        for raw in &key.frames {
            push_frames(raw, &resolver.resolve(raw), &mut frames);
        }
        let header = Header {
            comm: &key.thread_name,
            pid: key.pid,
            tid: key.tid,
            at: None,
        };
        write_block(&mut block, header, &frames)?;
        for _ in 0..value.count {
            out.write_all(&block)?;
        }
    }
    out.flush()
}
