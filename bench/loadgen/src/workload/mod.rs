//! A realistic, seeded workload of profiles for server benchmarks (issue 11).
//!
//! Benchmarks on a handful of small profiles repeated flatter every part of a profile store:
//! symbol tables de-duplicate perfectly, stacks never change, compression sees the same
//! bytes again. This module derives a fleet's worth of **distinct** profiles from real
//! pprof files of several languages ([`BASES`], all in `tests/data/corpora/`):
//!
//! - a **service** is a base profile plus seeded state: a name, a namespace, 3 to 30 pods
//!   spread over 1 to 4 regions ([`Service`]); the fleet cycles over the bases, half of it
//!   on the Go CPU profile (72.5 KB gzip'd, 647 stacks);
//! - profile `k` of a service holds the base's stacks that are **on** at `k` (each stack
//!   lives in periods of 30 to 3,000 profiles and is on in a period with probability 0.95
//!   for the heaviest down to 0.55 for the lightest), plus **synthetic** stacks, each the
//!   root side of one real stack, one to three real frames of extra depth and the leaf side
//!   of another real stack; synthetic slots (a quarter of the base's stack count) are
//!   renewed at the **churn** rate, [`Churn::per_profile`] new distinct stacks per profile;
//! - every `deploy_every_hours` (per service, at a seeded offset) a **deploy** renames a
//!   share of the functions the way new builds do (Go closures `func1` → `func7`, module
//!   paths `/v2/` → `/v3/`, generated suffixes in other languages), so stacks through them
//!   become new distinct stacks;
//! - **values** get lognormal noise per sample (σ = 0.35) and a daily cycle (±25 %); counts
//!   stay integers and `cpu = count × period` stays true;
//! - **sample labels**: `thread_name` on 60 % of samples (languages with threads),
//!   `endpoint` on 40 % (a quarter of those split over two endpoints), `span_id` on 5 %;
//! - profiles are gzip'd at the fastest level, as Go's runtime writes them.
//!
//! Every decision is a hash of the seed and what it is about, so profile `k` of service `s`
//! is a pure function of (seed, s, k, start time): same seed, same bytes, in any order.

mod base;
mod build;
mod rename;
mod rng;
mod services;
mod stats;

pub use base::{BASES, Base, BaseSpec, Language, default_corpora_dir};
pub use services::{Pod, Service};
pub use stats::{RunStats, StatsSummary};

use std::path::PathBuf;

use build::Template;

/// Why a workload could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A base profile file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A base profile did not decode.
    #[error("decoding base profile {path}: {source}")]
    Base {
        /// The file, under the corpora directory.
        path: PathBuf,
        /// The error.
        source: ember_pprof::PprofError,
    },
    /// A base profile has no non-zero sample.
    #[error("base profile {0} has no samples")]
    EmptyBase(&'static str),
    /// The configuration is unusable.
    #[error("bad workload configuration: {0}")]
    Config(String),
}

/// How fast stacks are renewed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Churn {
    /// About 0.2 new stacks per profile: a day of 8,640 profiles of the Go CPU service holds
    /// a few thousand distinct stacks (base stacks, their renamed forms, a few synthetic).
    Low,
    /// 42 new stacks per profile: a day of 8,640 profiles of the Go CPU service holds about
    /// 365,000 distinct stacks, as issue 11 measured on a real service.
    High,
    /// This many new distinct stacks per profile on average.
    PerProfile(f64),
}

impl Churn {
    /// New distinct synthetic stacks per profile.
    pub fn per_profile(self) -> f64 {
        match self {
            Churn::Low => 0.2,
            Churn::High => 42.0,
            Churn::PerProfile(n) => n.max(0.0),
        }
    }
}

impl std::str::FromStr for Churn {
    type Err = String;

    /// `low`, `high` or a number of new stacks per profile.
    fn from_str(s: &str) -> Result<Churn, String> {
        match s {
            "low" => Ok(Churn::Low),
            "high" => Ok(Churn::High),
            n => match n.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(Churn::PerProfile(v)),
                _ => Err(format!("churn {s:?}: expected low, high or a number >= 0")),
            },
        }
    }
}

/// Settings of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadConfig {
    /// Seed of every random decision.
    pub seed: u64,
    /// Number of services (20 names are built in; more are `svc-<n>`).
    pub services: usize,
    /// Stack renewal rate.
    pub churn: Churn,
    /// Seconds of the service's life between two of its profiles (the day's clock: 10 s
    /// per profile makes 8,640 a day), also each profile's duration.
    pub profile_seconds: f64,
    /// Timestamp of profile 0, unix nanoseconds.
    pub start_nanos: i64,
    /// Timestamp distance between profiles `k` and `k + 1`, nanoseconds (for a back-fill,
    /// `profile_seconds` in nanoseconds; for live pushes, small, so all are recent).
    pub step_nanos: i64,
    /// Hours between deploys of a service.
    pub deploy_every_hours: f64,
    /// Share of functions a deploy renames, 0 to 1.
    pub rename_share: f64,
}

impl Default for WorkloadConfig {
    /// Seed 1, 20 services, high churn, a profile every 10 s, deploys every 6 h renaming
    /// 10 % of functions, starting at 2026-01-01T00:00Z.
    fn default() -> Self {
        WorkloadConfig {
            seed: 1,
            services: 20,
            churn: Churn::High,
            profile_seconds: 10.0,
            start_nanos: 1_767_225_600_000_000_000,
            step_nanos: 10_000_000_000,
            deploy_every_hours: 6.0,
            rename_share: 0.1,
        }
    }
}

/// One generated profile and what it is.
#[derive(Debug, Clone)]
pub struct GeneratedProfile {
    /// Index of its service.
    pub service: usize,
    /// Its number within the service (`k`).
    pub index: u64,
    /// Its timestamp, unix nanoseconds.
    pub time_nanos: i64,
    /// Series labels: `service_name`, `namespace`, `pod`, `region`.
    pub labels: Vec<(String, String)>,
    /// The profile, gzip'd pprof.
    pub bytes: Vec<u8>,
    /// Number of samples.
    pub samples: usize,
    /// Hashes of its distinct stacks (function-name sequences, inline frames included),
    /// sorted, for counting distinct stacks over a run.
    pub stacks: Vec<u64>,
}

/// A seeded fleet of services over base profiles, making any of their profiles on demand.
#[derive(Debug, Clone)]
pub struct Workload {
    config: WorkloadConfig,
    services: Vec<Service>,
    templates: Vec<Template>,
}

impl Workload {
    /// A workload over `bases` (one per entry of [`BASES`], in that order).
    pub fn new(config: WorkloadConfig, bases: Vec<Base>) -> Result<Workload, WorkloadError> {
        if config.services == 0 {
            return Err(WorkloadError::Config("no services".into()));
        }
        if bases.len() != BASES.len() {
            return Err(WorkloadError::Config(format!(
                "{} base profiles, expected {}",
                bases.len(),
                BASES.len()
            )));
        }
        let usable = config.profile_seconds > 0.0
            && config.deploy_every_hours > 0.0
            && (0.0..=1.0).contains(&config.rename_share);
        if !usable {
            return Err(WorkloadError::Config(
                "profile_seconds and deploy_every_hours must be > 0, rename_share in 0..=1".into(),
            ));
        }
        let services = (0..config.services)
            .map(|i| Service::new(config.seed, i))
            .collect();
        Ok(Workload {
            templates: bases.into_iter().map(Template::new).collect(),
            services,
            config,
        })
    }

    /// A workload over the bases read from `corpora` (`tests/data/corpora`).
    pub fn load(
        config: WorkloadConfig,
        corpora: &std::path::Path,
    ) -> Result<Workload, WorkloadError> {
        Workload::new(config, Base::load_all(corpora)?)
    }

    /// The settings.
    pub fn config(&self) -> &WorkloadConfig {
        &self.config
    }

    /// The services.
    pub fn services(&self) -> &[Service] {
        &self.services
    }

    /// The deploy epoch of service `s` at its profile `k`: deploys happen every
    /// `deploy_every_hours`, at a seeded offset per service.
    pub fn epoch(&self, s: usize, k: u64) -> u64 {
        let period = self.config.deploy_every_hours * 3600.0;
        let offset = rng::unit(rng::hash(&[self.config.seed, rng::tag::DEPLOY, s as u64])) * period;
        ((k as f64 * self.config.profile_seconds + offset) / period) as u64
    }

    /// Profile number `k` of service `s` (`s` < number of services).
    pub fn profile(&self, s: usize, k: u64) -> GeneratedProfile {
        let time_nanos = self.config.start_nanos + k as i64 * self.config.step_nanos;
        let a = build::assemble(self, s, k, time_nanos);
        GeneratedProfile {
            service: s,
            index: k,
            time_nanos,
            labels: self.services[s].labels(k),
            bytes: a.bytes,
            samples: a.samples,
            stacks: a.stacks,
        }
    }

    /// The `i`-th profile of the fleet's stream: services take turns, so request `i` is
    /// profile `i / services` of service `i mod services`.
    pub fn nth(&self, i: u64) -> GeneratedProfile {
        let n = self.services.len() as u64;
        self.profile((i % n) as usize, i / n)
    }

    /// Profiles `0..count` of the stream, made on `threads` threads, in order.
    pub fn generate(&self, count: u64, threads: usize) -> Vec<GeneratedProfile> {
        let threads = threads.clamp(1, 64) as u64;
        let mut parts: Vec<Vec<GeneratedProfile>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    scope.spawn(move || {
                        (t..count)
                            .step_by(threads as usize)
                            .map(|i| self.nth(i))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        // Interleave back into stream order.
        let mut out = Vec::with_capacity(count as usize);
        let mut iters: Vec<_> = parts.iter_mut().map(|p| p.drain(..)).collect();
        for i in 0..count {
            if let Some(p) = iters[(i % threads) as usize].next() {
                out.push(p);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
