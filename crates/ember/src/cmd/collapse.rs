//! `ember collapse`: `perf script` output → folded stacks (`stackcollapse-perf.pl` compatible).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context;
use ember_collapse::{CollapseOptions, fold_stacks};

use super::progress::Counting;

/// Fold `perf script` output into folded stacks (like stackcollapse-perf.pl).
#[derive(clap::Args)]
#[command(
    long_about = "Fold `perf script` output into folded stacks (one `root;...;leaf count` line \
                  per distinct stack, sorted by byte order), compatible with Brendan Gregg's \
                  stackcollapse-perf.pl and inferno-collapse-perf.\n\n\
                  Each sample counts its event period when perf printed one (e.g. \
                  `  10101010 cycles:`), otherwise 1. Only samples of the first event type seen \
                  are kept unless --event-filter is given. Input may be plain text or gzip \
                  (detected by its magic bytes). Malformed lines are skipped and reported on \
                  stderr once per kind, with the line number of the first one."
)]
pub struct Args {
    /// perf script output to read (plain or gzip-compressed). Reads stdin when absent or `-`.
    #[arg(value_name = "FILE")]
    input: Option<PathBuf>,

    /// Append the PID to the process name frame: `comm-PID` (`?` when perf printed only a TID).
    /// Default: off.
    #[arg(long)]
    pid: bool,

    /// Append PID and TID to the process name frame: `comm-PID/TID`. Implies --pid.
    /// Default: off.
    #[arg(long)]
    tid: bool,

    /// Annotate kernel frames with `_[k]` (modules like `[kernel.kallsyms]`, `*.ko`, `vmlinux*`).
    /// Default: off.
    #[arg(long)]
    kernel: bool,

    /// Annotate JIT frames with `_[j]` (modules `/tmp/perf-PID.map` and `jitted-*.so`).
    /// Default: off.
    #[arg(long)]
    jit: bool,

    /// Same as --kernel --jit. Default: off.
    #[arg(long)]
    all: bool,

    /// For frames perf could not symbolize, show the address: `[unknown <pc>]` or
    /// `[module <pc>]` instead of `[unknown]` / `[module]`. Default: off.
    #[arg(long)]
    addrs: bool,

    /// Accepted for stackcollapse-perf.pl compatibility but currently has NO effect: expanding
    /// inlined frames needs Ember's own symbolizer (part of the sampler, which comes later);
    /// it does not shell out to addr2line. Java `a->b` inlining is always expanded (`_[i]`).
    /// Default: off.
    #[arg(long)]
    inline: bool,

    /// Keep only samples of this event type (as printed by perf, e.g. `cycles`, `cpu-clock`).
    /// Default: the first event type in the input.
    #[arg(long, value_name = "EVENT")]
    event_filter: Option<String>,

    /// When a frame's symbol equals FRAME, drop every frame above it (towards the root) and the
    /// process name, so the stack starts at FRAME. Repeatable. Default: none.
    #[arg(long, value_name = "FRAME")]
    skip_after: Vec<String>,

    /// Number of worker threads; 0 = one per available core. Output is identical for any
    /// value.
    #[arg(short = 'j', long = "threads", value_name = "N", default_value_t = 0)]
    threads: usize,

    /// Abort when the input (after gzip decompression) exceeds this many bytes. Input is
    /// streamed with bounded memory, so a decompression bomb only costs time. Default: no limit.
    #[arg(long, value_name = "BYTES")]
    max_input_bytes: Option<u64>,

    /// Write the folded stacks here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `ember collapse`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.inline {
        eprintln!(
            "ember collapse: note: --inline has no effect yet (it needs the sampler's symbolizer)"
        );
    }
    let options = CollapseOptions {
        include_pid: args.pid,
        include_tid: args.tid,
        annotate_kernel: args.kernel || args.all,
        annotate_jit: args.jit || args.all,
        include_addrs: args.addrs,
        event_filter: args.event_filter,
        skip_after: args.skip_after,
        threads: args.threads,
        max_input_bytes: args.max_input_bytes,
        ..CollapseOptions::default()
    };

    // A large input shows how far it got on a terminal (counted as it is read; compressed
    // bytes for a gzip'd file).
    let collapsed = match args.input.as_deref() {
        Some(path) if path.as_os_str() != "-" => {
            let file =
                File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            let size = file.metadata().ok().map(|m| m.len());
            let input = Counting::new(file, "collapsing", size, path.display().to_string());
            fold_stacks(input, &options)
                .with_context(|| format!("collapsing {}", path.display()))?
        }
        _ => {
            let input = Counting::new(io::stdin().lock(), "collapsing", None, "stdin".into());
            fold_stacks(input, &options).context("collapsing stdin")?
        }
    };

    for warning in collapsed.warnings() {
        eprintln!("ember collapse: warning: {warning}");
    }

    match args.output {
        Some(path) => {
            let file =
                File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
            collapsed
                .write_folded(BufWriter::with_capacity(1 << 16, file))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        None => {
            let stdout = io::stdout().lock();
            let mut out = BufWriter::with_capacity(1 << 16, stdout);
            match collapsed.write_folded(&mut out).and_then(|()| out.flush()) {
                Ok(()) => {}
                // A closed pipe (e.g. `| head`) is not an error worth reporting.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
                Err(e) => return Err(e).context("writing to stdout"),
            }
        }
    }
    // The process ends right after this: freeing every stack one by one (100,000s of small
    // allocations on a large profile) would only cost time the OS reclaims for free at exit.
    std::mem::forget(collapsed);
    Ok(())
}
