//! Times parse + render of one folded file: `cargo run --release --example render_file -- IN [OUT]`.
//! Used for the speed comparison with inferno-flamegraph (see the crate's tests for correctness).

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(input) = args.next() else {
        eprintln!("usage: render_file IN.folded [OUT.svg]");
        std::process::exit(2);
    };
    let output = args.next().unwrap_or_else(|| "/dev/null".to_owned());
    let start = Instant::now();
    let bytes = match std::fs::read(&input) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{input}: {e}");
            std::process::exit(1);
        }
    };
    let folded = ember_formats::parse_borrowed(&bytes);
    let parsed = start.elapsed();
    let out = match std::fs::File::create(&output) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{output}: {e}");
            std::process::exit(1);
        }
    };
    match ember_flamegraph::render(&folded, &ember_flamegraph::Options::default(), out) {
        Ok(report) => eprintln!(
            "{} stacks, {} frames drawn; read+parse {:?}, total {:?}",
            folded.lines.len(),
            report.frames_drawn,
            parsed,
            start.elapsed()
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
