//! `ember-loadgen`: a load generator for `ember server` benchmarks (bench/server/run.sh).
//! Pushes pprof files from N concurrent keep-alive connections and prints profiles/s, MB/s and
//! latency percentiles.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use ember_loadgen::{LoadMode, LoadOptions, SeriesMeta};

mod realistic;

/// Options of `ember-loadgen`.
#[derive(Parser)]
#[command(
    name = "ember-loadgen",
    version,
    about = "Load generator for ember server benchmarks: concurrent keep-alive pushes, rate and latency"
)]
struct Args {
    /// pprof files to send (gzip'd or raw), used round-robin (not with --workload).
    #[arg(required_unless_present = "workload", conflicts_with = "workload")]
    files: Vec<PathBuf>,
    /// Server base URL.
    #[arg(long, default_value = "http://127.0.0.1:4040", value_name = "URL")]
    server: String,
    /// Concurrent workers, each with its own keep-alive connection.
    #[arg(long, short = 'c', default_value_t = 16)]
    concurrency: usize,
    /// Number of profiles to send [default: 10000 unless --duration is given].
    #[arg(long, short = 'n')]
    count: Option<u64>,
    /// Send for this many seconds instead of (or as well as) a fixed count.
    #[arg(long, short = 'd', value_name = "SECONDS")]
    duration: Option<f64>,
    /// Distinct label sets (`pod=pod-<i mod N>`).
    #[arg(long, default_value_t = 100)]
    label_sets: usize,
    /// service_name of every profile.
    #[arg(long, default_value = "loadgen")]
    service: String,
    /// Back-fill instead of live pushes: legacy /ingest with from/until, the first profile
    /// starting at this unix time (seconds), each next one --step seconds later.
    #[arg(long, value_name = "UNIX_SECONDS")]
    backfill_from: Option<i64>,
    /// Seconds each back-filled profile covers.
    #[arg(long, default_value_t = 10)]
    step: i64,
    /// Send N distinct variants of each file (sample values scaled by per-sample random
    /// factors, timestamps set to now) instead of the files' exact bytes; 0 sends the files
    /// unchanged.
    #[arg(long, default_value_t = 0, value_name = "N")]
    vary: usize,
    /// Tenant (X-Scope-OrgID).
    #[arg(long)]
    tenant: Option<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    workload: realistic::WorkloadArgs,
}

/// What to send: the profiles, their series (empty for files) and, for a generated
/// workload, its JSON and text report. `None` when the profiles were written to
/// `--write-dir` instead (nothing to send).
type Loaded = (
    Vec<Vec<u8>>,
    Vec<SeriesMeta>,
    Option<(serde_json::Value, String)>,
);

/// Reads (and varies) the files, or generates the workload; writes it with `--write-dir`.
fn load_profiles(args: &Args, count: Option<u64>) -> anyhow::Result<Option<Loaded>> {
    if args.workload.workload.is_none() {
        let profiles = args
            .files
            .iter()
            .map(|f| std::fs::read(f).with_context(|| format!("reading {}", f.display())))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let profiles = if args.vary > 0 {
            ember_loadgen::variants(&profiles, args.vary).context("making profile variants")?
        } else {
            profiles
        };
        return Ok(Some((profiles, Vec::new(), None)));
    }
    let Some(n) = count else {
        bail!("--workload needs a count (-n): profiles are generated before the run");
    };
    let g = realistic::generate(&args.workload, n, args.backfill_from, args.step)?;
    if let Some(dir) = &args.workload.write_dir {
        realistic::write_dir(dir, &g)?;
        if args.json {
            println!(
                "{}",
                serde_json::json!({ "workload": g.json, "write_dir": dir })
            );
        } else {
            println!("{}; written to {}", g.text, dir.display());
        }
        return Ok(None);
    }
    let realistic::Generated {
        profiles,
        series,
        json,
        text,
    } = g;
    Ok(Some((profiles, series, Some((json, text)))))
}

/// Runs the load and prints the report; fails if any request failed.
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.step <= 0 {
        bail!("--step must be positive");
    }
    let duration = match args.duration {
        Some(d) if d.is_finite() && d > 0.0 => Some(Duration::from_secs_f64(d)),
        Some(d) => bail!("--duration {d}: expected seconds > 0"),
        None => None,
    };
    let count = match (args.count, duration) {
        (None, None) => Some(10_000),
        (c, _) => c,
    };
    let Some((profiles, series, generated)) = load_profiles(&args, count)? else {
        return Ok(());
    };
    let opts = LoadOptions {
        server: args.server.clone(),
        profiles,
        workers: args.concurrency.max(1),
        count,
        duration,
        label_sets: args.label_sets.max(1),
        service: args.service.clone(),
        mode: match args.backfill_from {
            Some(start) => LoadMode::Backfill {
                start_seconds: start,
                step_seconds: args.step,
            },
            None => LoadMode::Push,
        },
        tenant: args.tenant.clone(),
        series,
    };
    let r = ember_loadgen::run(&opts)?;
    let [p50, p90, p99, max] = r.latency_ms;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "ok": r.ok, "errors": r.errors, "seconds": r.seconds,
                "profiles_per_second": r.profiles_per_second(),
                "megabytes_per_second": r.megabytes_per_second(),
                "profile_bytes": r.profile_bytes, "request_bytes": r.request_bytes,
                "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "max_ms": max,
                "concurrency": opts.workers, "first_error": r.first_error,
                "workload": generated.as_ref().map(|(j, _)| j),
            })
        );
    } else {
        if let Some((_, text)) = &generated {
            println!("{text}");
        }
        println!(
            "{} profiles in {:.2} s = {:.0} profiles/s, {:.2} MB/s of pprof ({} workers); latency p50 {p50:.2} ms, p90 {p90:.2} ms, p99 {p99:.2} ms, max {max:.2} ms; {} errors",
            r.ok,
            r.seconds,
            r.profiles_per_second(),
            r.megabytes_per_second(),
            opts.workers,
            r.errors
        );
    }
    if r.errors > 0 {
        bail!(
            "{} of {} requests failed; first: {}",
            r.errors,
            r.ok + r.errors,
            r.first_error.unwrap_or_default()
        );
    }
    Ok(())
}
