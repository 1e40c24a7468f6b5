//! `ember top`: the pprof top table (flat, flat%, sum%, cum, cum%, name) of a pprof profile or
//! folded stacks, or of the merge of several, formatted like `go tool pprof -top`.

use anyhow::Context;
use ember_formats::{SortBy, TopOptions, into_profile, read_input, top};
use std::io::Write;
use std::path::PathBuf;

use super::merge_inputs::read_merged;

/// Row order of `ember top`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Sort {
    /// By the function's own value.
    Flat,
    /// By the value of the function and everything it calls.
    Cum,
}

/// Print the pprof "top" table: the heaviest functions by flat or cumulative value.
#[derive(clap::Args)]
#[command(
    long_about = "Print the heaviest functions of a profile, exactly like `go tool pprof -top`: \
                  flat (the function's own value), flat%, sum% (running total of flat%), cum \
                  (the function and its callees, counted once per sample), cum% and the name. \
                  Inlined functions are rows of their own, marked (inline). Functions whose cum \
                  is at most 0.5% of the total are dropped (see the `Dropped` line). The input \
                  may be a pprof profile (gzip'd or raw) or folded stacks (counted as samples).\n\n\
                  Several inputs (any mix of pprof and folded stacks) are merged first, like \
                  `go tool pprof -top a.pb.gz b.pb.gz`: identical locations and functions are \
                  shared, values of identical stacks (and labels) are summed, and every input \
                  must have the same sample types. They are read and merged one at a time, so \
                  thousands of profiles take memory in proportion to the merged result, not to \
                  the inputs."
)]
pub struct Args {
    /// Profiles to summarise (pprof, folded stacks, speedscope, perf script or a Perfetto trace,
    /// detected by content); several are merged.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    /// Row order.
    #[arg(long, value_enum, default_value = "flat")]
    sort: Sort,
    /// Sample type to show: index or name (`cpu`, `alloc_space`, `inuse_space`). Default: the
    /// profile's default sample type, else its last.
    #[arg(long, value_name = "NAME|N")]
    sample_index: Option<String>,
    /// Show at most N rows (0 = all).
    #[arg(long, value_name = "N", default_value_t = 0)]
    nodecount: usize,
    /// Hide functions whose cum is below this fraction of the total.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.005)]
    nodefraction: f64,
}

/// Runs `ember top`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (profile, what) = match args.files.as_slice() {
        // One input is summarised as it is, without the round trip through a merge.
        [file] => (into_profile(read_input(file)?), file.display().to_string()),
        files => (
            read_merged(files, ("samples", "count"))?.profile,
            format!("the merge of {} inputs", files.len()),
        ),
    };
    let options = TopOptions {
        sort: match args.sort {
            Sort::Flat => SortBy::Flat,
            Sort::Cum => SortBy::Cum,
        },
        sample_index: args.sample_index,
        node_count: args.nodecount,
        node_fraction: args.nodefraction,
        ..Default::default()
    };
    let table = top(&profile, &options).with_context(|| what)?;
    let mut out = std::io::stdout().lock();
    out.write_all(table.render().as_bytes())?;
    out.flush()?;
    Ok(())
}
