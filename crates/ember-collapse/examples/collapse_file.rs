//! Folds one `perf script` file to stdout with default options: a minimal driver for
//! profiling and timing the library without building the whole `ember` binary.
//!
//! Usage: `cargo run --release -p ember-collapse --example collapse_file -- FILE [THREADS]`

use std::io::{BufWriter, Write};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let path = args.next().ok_or("usage: collapse_file FILE [THREADS]")?;
    let threads = match args.next() {
        Some(t) => t.to_str().ok_or("THREADS must be a number")?.parse()?,
        None => 0,
    };
    let options = ember_collapse::CollapseOptions {
        threads,
        ..Default::default()
    };
    let collapsed = ember_collapse::fold_stacks(std::fs::File::open(path)?, &options)?;
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    collapsed.write_folded(&mut out)?;
    out.flush()?;
    Ok(())
}
