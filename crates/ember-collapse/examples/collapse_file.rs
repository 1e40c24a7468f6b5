//! Minimal driver for benchmarking the library without the full CLI:
//! `cargo run --release -p ember-collapse --example collapse_file -- FILE [THREADS] > out`.

use std::io::{BufWriter, Write};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: collapse_file FILE [THREADS]")?;
    let threads = match args.next() {
        Some(n) => n.parse()?,
        None => 0,
    };
    let options = ember_collapse::CollapseOptions {
        threads,
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let collapsed = ember_collapse::collapse(std::fs::File::open(&path)?, &options)?;
    let folded = start.elapsed();
    let mut out = BufWriter::new(std::io::stdout().lock());
    collapsed.write_folded(&mut out)?;
    out.flush()?;
    eprintln!(
        "{} stacks, {} warnings, folded in {:.3}s",
        collapsed.stacks.len(),
        collapsed.warnings.len(),
        folded.as_secs_f64()
    );
    Ok(())
}
