//! What a run of generated profiles looked like: sizes, samples and stacks per profile,
//! distinct stacks over the run.

use std::collections::HashSet;

use super::GeneratedProfile;

/// Accumulates [`GeneratedProfile`]s' figures.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    profiles: u64,
    bytes: u64,
    samples: u64,
    stacks: u64,
    min_bytes: Option<usize>,
    max_bytes: usize,
    distinct: HashSet<u64>,
}

/// The figures of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StatsSummary {
    /// Profiles seen.
    pub profiles: u64,
    /// Mean gzip'd size, KB (1,000 bytes).
    pub mean_kb: f64,
    /// Smallest and largest gzip'd size, bytes.
    pub min_max_bytes: (usize, usize),
    /// Mean samples per profile.
    pub mean_samples: f64,
    /// Mean distinct stacks per profile.
    pub mean_stacks: f64,
    /// Distinct stacks over all profiles seen (function-name sequences).
    pub distinct_stacks: u64,
}

impl RunStats {
    /// Counts `p`.
    pub fn add(&mut self, p: &GeneratedProfile) {
        self.profiles += 1;
        self.bytes += p.bytes.len() as u64;
        self.samples += p.samples as u64;
        self.stacks += p.stacks.len() as u64;
        self.min_bytes = Some(
            self.min_bytes
                .map_or(p.bytes.len(), |m| m.min(p.bytes.len())),
        );
        self.max_bytes = self.max_bytes.max(p.bytes.len());
        self.distinct.extend(p.stacks.iter().copied());
    }

    /// The figures so far.
    pub fn summary(&self) -> StatsSummary {
        let n = self.profiles.max(1) as f64;
        StatsSummary {
            profiles: self.profiles,
            mean_kb: self.bytes as f64 / n / 1e3,
            min_max_bytes: (self.min_bytes.unwrap_or(0), self.max_bytes),
            mean_samples: self.samples as f64 / n,
            mean_stacks: self.stacks as f64 / n,
            distinct_stacks: self.distinct.len() as u64,
        }
    }
}
