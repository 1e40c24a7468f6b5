//! `--workload realistic`: the CLI side of [`ember_loadgen::workload`]: builds the seeded
//! fleet, pre-generates the run's profiles into memory (timed, so generation never throttles
//! the measured ingest), writes them as files with `--write-dir`, and reports their figures.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use ember_loadgen::SeriesMeta;
use ember_loadgen::workload::{Churn, RunStats, Workload, WorkloadConfig, default_corpora_dir};

/// The workload flags of `ember-loadgen`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WorkloadArgs {
    /// Generate the profiles instead of reading FILES: `realistic` is the seeded fleet of
    /// bench/loadgen/README.md (distinct profiles derived from real ones of 8 kinds), each
    /// sent with its own series labels and time (--service, --label-sets, --vary do not
    /// apply).
    #[arg(long, value_name = "KIND", value_parser = ["realistic"])]
    pub(crate) workload: Option<String>,
    /// Services of the fleet (each with its pods, region, namespace labels).
    #[arg(long, default_value_t = 20)]
    pub(crate) services: usize,
    /// Seed of the workload: the same seed makes the same profiles, byte for byte.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// New distinct stacks per profile: low (0.2), high (42: ~365,000 in a Go CPU day of
    /// 8,640 profiles) or a number.
    #[arg(long, default_value = "high", value_parser = clap::value_parser!(Churn))]
    pub(crate) churn: Churn,
    /// Hours between deploys of a service (each renames --rename-share of its functions).
    #[arg(long, default_value_t = 6.0)]
    pub(crate) deploy_hours: f64,
    /// Share of functions a deploy renames.
    #[arg(long, default_value_t = 0.1)]
    pub(crate) rename_share: f64,
    /// Write the generated profiles as DIR/<service>-<k>.pb.gz (plus DIR/index.tsv with
    /// their labels and times) instead of sending them.
    #[arg(long, value_name = "DIR")]
    pub(crate) write_dir: Option<PathBuf>,
    /// Directory of the base profiles [default: this repository's tests/data/corpora].
    #[arg(long, value_name = "DIR")]
    pub(crate) corpora: Option<PathBuf>,
    /// Threads generating the profiles before the run [default: available cores].
    #[arg(long, value_name = "N")]
    pub(crate) gen_threads: Option<usize>,
}

/// The pre-generated run: bytes and series of every profile, and their figures.
pub(crate) struct Generated {
    /// gzip'd pprof, in stream order.
    pub(crate) profiles: Vec<Vec<u8>>,
    /// Series and time of each.
    pub(crate) series: Vec<SeriesMeta>,
    /// Figures for the report.
    pub(crate) json: serde_json::Value,
    /// One line for the text report.
    pub(crate) text: String,
}

/// Generates `count` profiles: a back-fill from `backfill_from` at `step` seconds apart
/// (profile `k` of a service at `from + k * step`), or, live, stamped within the last
/// `count / services` milliseconds before now while the day's clock still advances `step`
/// seconds per profile (deploys and lifetimes as in a real stream).
pub(crate) fn generate(
    args: &WorkloadArgs,
    count: u64,
    backfill_from: Option<i64>,
    step: i64,
) -> anyhow::Result<Generated> {
    let services = args.services.max(1);
    let (start_nanos, step_nanos) = match backfill_from {
        Some(from) => (from * 1_000_000_000, step * 1_000_000_000),
        None => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            (
                now - (count / services as u64 + 1) as i64 * 1_000_000,
                1_000_000,
            )
        }
    };
    let config = WorkloadConfig {
        seed: args.seed,
        services,
        churn: args.churn,
        profile_seconds: step as f64,
        start_nanos,
        step_nanos,
        deploy_every_hours: args.deploy_hours,
        rename_share: args.rename_share,
    };
    let corpora = args.corpora.clone().unwrap_or_else(default_corpora_dir);
    let workload = Workload::load(config, &corpora)
        .with_context(|| format!("loading the base profiles from {}", corpora.display()))?;
    let threads = args.gen_threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let t0 = Instant::now();
    let generated = workload.generate(count, threads);
    let seconds = t0.elapsed().as_secs_f64();
    let mut stats = RunStats::default();
    let mut profiles = Vec::with_capacity(generated.len());
    let mut series = Vec::with_capacity(generated.len());
    for p in generated {
        stats.add(&p);
        series.push(SeriesMeta {
            labels: p.labels,
            time_seconds: p.time_nanos.div_euclid(1_000_000_000),
        });
        profiles.push(p.bytes);
    }
    let s = stats.summary();
    let rate = s.profiles as f64 / seconds.max(1e-9);
    let json = serde_json::json!({
        "kind": "realistic", "seed": args.seed, "services": services,
        "churn_per_profile": args.churn.per_profile(), "profiles": s.profiles,
        "mean_kb": s.mean_kb, "min_bytes": s.min_max_bytes.0, "max_bytes": s.min_max_bytes.1,
        "mean_samples": s.mean_samples, "mean_stacks": s.mean_stacks,
        "distinct_stacks": s.distinct_stacks, "generate_seconds": seconds,
        "generate_threads": threads, "generated_per_second": rate,
        "generated_per_second_per_thread": rate / threads as f64,
        "pregenerated_before_timing": true,
    });
    let text = format!(
        "workload: {} profiles pre-generated in {seconds:.2} s on {threads} threads ({:.0}/s per thread), mean {:.1} KB gzip'd, {:.0} samples, {:.0} stacks per profile, {} distinct stacks",
        s.profiles,
        rate / threads as f64,
        s.mean_kb,
        s.mean_samples,
        s.mean_stacks,
        s.distinct_stacks
    );
    Ok(Generated {
        profiles,
        series,
        json,
        text,
    })
}

/// Writes the profiles as `<service>-<k>.pb.gz` files, and `index.tsv` (file, time, labels).
pub(crate) fn write_dir(dir: &Path, generated: &Generated) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut index = String::from("file\ttime_seconds\tlabels\n");
    let mut counters = std::collections::HashMap::<&str, u64>::new();
    for (bytes, meta) in generated.profiles.iter().zip(&generated.series) {
        let service = meta.labels.first().map_or("profile", |(_, v)| v.as_str());
        let k = counters.entry(service).or_default();
        let file = format!("{service}-{:06}.pb.gz", *k);
        *k += 1;
        std::fs::write(dir.join(&file), bytes)
            .with_context(|| format!("writing {}", dir.join(&file).display()))?;
        let labels: Vec<String> = meta
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        index.push_str(&format!(
            "{file}\t{}\t{}\n",
            meta.time_seconds,
            labels.join(",")
        ));
    }
    let mut f = std::fs::File::create(dir.join("index.tsv"))?;
    f.write_all(index.as_bytes())?;
    Ok(())
}
