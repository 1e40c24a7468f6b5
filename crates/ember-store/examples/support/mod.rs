//! What the store's measuring examples (`ingest_cpu`, `flush_cpu`) share: reading a
//! directory written by `ember-loadgen --write-dir` and this process's CPU time.

use std::path::Path;

/// One file of the directory, in `index.tsv` order: its series labels as the index writes
/// them (`k=v,k=v`), parsed, and its gzip'd bytes.
pub struct Written {
    /// The labels as written in the index, a series' key.
    #[allow(dead_code)] // used by flush_cpu only
    pub key: String,
    /// The labels, parsed.
    pub labels: Vec<(String, String)>,
    /// The profile, gzip'd.
    pub bytes: Vec<u8>,
}

/// The first `limit` profiles of `dir` (its `index.tsv`: file, time, labels).
pub fn read_written(dir: &Path, limit: usize) -> Vec<Written> {
    let index = std::fs::read_to_string(dir.join("index.tsv")).expect("index.tsv");
    let mut out = Vec::new();
    for line in index.lines().skip(1).take(limit) {
        let mut f = line.split('\t');
        let (Some(file), Some(_), Some(key)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let labels = key
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let bytes = std::fs::read(dir.join(file)).expect("profile");
        out.push(Written {
            key: key.to_string(),
            labels,
            bytes,
        });
    }
    out
}

/// User+sys CPU seconds from a `/proc/.../stat` file (0 when unreadable).
fn stat_cpu(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).copied().unwrap_or(0.0) + f.get(12).copied().unwrap_or(0.0)) / 100.0
}

/// This process's user+sys CPU seconds, every thread.
pub fn cpu() -> f64 {
    stat_cpu("/proc/self/stat")
}

/// The main thread's user+sys CPU seconds.
#[allow(dead_code)] // used by ingest_cpu only
pub fn main_thread_cpu() -> f64 {
    stat_cpu(&format!("/proc/self/task/{}/stat", std::process::id()))
}
