//! The top table of a day against its flame graph, at the query level (no HTTP): reads a
//! directory written by `ember-loadgen --workload realistic --write-dir DIR` (its `index.tsv`
//! gives each file's labels and time), ingests every profile into a store under
//! `EMBER_BENCH_DIR` (default: the system temp dir), flushing to a block after each third of
//! them so the range lies in blocks and the head as in production, then times over the whole
//! range, best of ROUNDS (default 5), wall milliseconds:
//! - the merge alone (`Store::merge_stacks`);
//! - the flame graph (`Querier::flamebearer`: merge, node-limited tree, timeline, JSON);
//! - the top table as the server writes it (`Querier::render` with `Format::Top`: merge, then
//!   the table from the call tree), and as it wrote it before (merge, then the table of the
//!   pprof made of the merge);
//! - the diff top table of the range's second half against its first, from both merged trees
//!   (`diff_top`) and from the diff's pprof (`Diff::profile`, the previous path), checked
//!   identical;
//! - the table from the merged call tree alone (`merged_top`), and the table the server wrote
//!   before (`ember_formats::top` of `pprof_profile`), checking both texts are identical.
//!
//! `cargo run -p ember-query --release --example top_timing -- DIR [ROUNDS]`

use std::time::Instant;

use ember_query::{Format, NameRule, Output, Querier, QueryRequest, merged_top, pprof_profile};
use ember_store::{IngestBatch, IngestProfile, Query, Store, StoreOptions};

/// Best and first wall time of `rounds` runs of `f`, in ms, and its last result.
fn time<T>(rounds: usize, mut f: impl FnMut() -> T) -> (f64, f64, T) {
    let mut best = f64::MAX;
    let mut first = 0.0;
    let mut out = None;
    for i in 0..rounds.max(1) {
        let t = Instant::now();
        out = Some(f());
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if i == 0 {
            first = ms;
        }
        best = best.min(ms);
    }
    (first, best, out.expect("at least one round"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(args.get(1).expect("usage: top_timing DIR [ROUNDS]"));
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(5);
    let index = std::fs::read_to_string(dir.join("index.tsv")).expect("index.tsv");
    let base = std::env::var_os("EMBER_BENCH_DIR").map_or_else(std::env::temp_dir, Into::into);
    let data = base.join(format!("ember-top-timing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let store = Store::open(&data, StoreOptions::default()).expect("open store");

    let lines: Vec<&str> = index.lines().skip(1).collect();
    let (mut start, mut end) = (i64::MAX, i64::MIN);
    let ingest_started = Instant::now();
    for (i, line) in lines.iter().enumerate() {
        let mut f = line.split('\t');
        let (Some(file), Some(time), Some(labels)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let time_nanos = time.parse::<i64>().expect("time") * 1_000_000_000;
        start = start.min(time_nanos);
        end = end.max(time_nanos);
        let labels = labels
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let batch = IngestBatch {
            profiles: vec![IngestProfile {
                labels,
                time_nanos,
                pprof: std::fs::read(dir.join(file)).expect("profile"),
                what: file.into(),
            }],
        };
        store.ingest("t", batch).expect("ingest");
        if (i + 1) % lines.len().div_ceil(3) == 0 && i + 1 < lines.len() {
            store.flush().expect("flush");
        }
    }
    println!(
        "ingested {} profiles in {:.1} s",
        lines.len(),
        ingest_started.elapsed().as_secs_f64()
    );

    let selector = "{}";
    let cpu = Some("process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    let req = QueryRequest::parse(selector, cpu, NameRule::PyroscopeApp, start, end + 1)
        .expect("request");
    let querier = Querier::new(&store);
    let query = Query {
        profile_type: cpu.map(str::to_owned),
        start_nanos: start,
        end_nanos: end + 1,
        ..Default::default()
    };

    let (first, best, merged) = time(rounds, || store.merge_stacks("t", &query));
    let stacks = merged.self_values.iter().filter(|v| **v != 0).count();
    println!(
        "range: {} profiles, {} frames, {stacks} distinct stacks, {} names",
        merged.profiles,
        merged.frames.len(),
        merged.names.len()
    );
    println!("| measure | first, ms | best of {rounds}, ms |");
    println!("|---|---|---|");
    println!("| merge (merge_stacks) | {first:.0} | {best:.0} |");
    let (first, best, _) = time(rounds, || {
        querier.flamebearer("t", &req, "").expect("flame")
    });
    println!("| flame graph (flamebearer) | {first:.0} | {best:.0} |");
    let (first, best, served) = time(rounds, || {
        querier
            .render("t", &req, Format::Top, "")
            .expect("top table")
    });
    println!("| top table (render Format::Top) | {first:.0} | {best:.0} |");
    let (first, best, _) = time(rounds, || {
        let merged = store.merge_stacks("t", &query);
        ember_formats::top(&pprof_profile(&merged), &Default::default())
            .expect("top of the pprof")
            .render()
    });
    println!(
        "| top table the previous way (merge, then top of pprof_profile) | {first:.0} | {best:.0} |"
    );
    let (first, best, from_tree) = time(rounds, || merged_top(&merged).render());
    println!(
        "| table from the merged tree (merged_top), after the merge | {first:.0} | {best:.0} |"
    );
    let (first, best, from_pprof) = time(rounds, || {
        ember_formats::top(&pprof_profile(&merged), &Default::default())
            .expect("top of the pprof")
            .render()
    });
    println!(
        "| table from pprof_profile (previous path), after the merge | {first:.0} | {best:.0} |"
    );
    let Output::Bytes { body, .. } = served else {
        panic!("a top table is text");
    };
    assert_eq!(from_tree, from_pprof, "the two tables differ");
    assert_eq!(body, from_tree.as_bytes(), "the served table differs");
    println!(
        "tables identical ({} bytes, {} lines)",
        from_tree.len(),
        from_tree.lines().count()
    );

    // The diff of the range's second half against its first, after both merges.
    let half = start + (end - start) / 2;
    let diff = ember_query::Diff {
        left: store.merge_stacks(
            "t",
            &Query {
                end_nanos: half,
                ..query.clone()
            },
        ),
        right: store.merge_stacks(
            "t",
            &Query {
                start_nanos: half + 1,
                ..query.clone()
            },
        ),
    };
    let (first, best, from_tree) = time(rounds, || {
        ember_query::diff_top(&diff.left, &diff.right).render()
    });
    println!("| diff top table from the merged trees (diff_top) | {first:.0} | {best:.0} |");
    let (first, best, from_pprof) = time(rounds, || {
        ember_formats::top(&diff.profile(), &Default::default())
            .expect("top of the diff")
            .render()
    });
    println!(
        "| diff top table from the diff's pprof (the previous path) | {first:.0} | {best:.0} |"
    );
    assert_eq!(from_tree, from_pprof, "the two diff tables differ");
    println!(
        "diff tables identical ({} lines)",
        from_tree.lines().count()
    );
    store.close();
    let _ = std::fs::remove_dir_all(&data);
}
