//! Decode + merge benchmark for `ember-pprof`.
//!
//! Reads every distinct profile named in a list file into memory first (so disk speed is not
//! measured), then, for each entry of the list in turn, times `ember_pprof::decode` and
//! `ember_pprof::Merger::add` of the decoded profile, which is dropped right after (bounded
//! memory), and prints one JSON object with the summed figures. bench/run.sh runs it several
//! times.
//!
//! Usage: `ember-bench-pprof-merge LIST_FILE` (one profile path per line).

use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let Some(list) = std::env::args_os().nth(1) else {
        eprintln!("usage: ember-bench-pprof-merge LIST_FILE");
        return ExitCode::from(2);
    };
    match run(std::path::Path::new(&list)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(list: &std::path::Path) -> Result<(), String> {
    let names = std::fs::read_to_string(list).map_err(|e| format!("{}: {e}", list.display()))?;
    let names: Vec<&str> = names.lines().filter(|l| !l.trim().is_empty()).collect();
    if names.is_empty() {
        return Err("the list names no profile".into());
    }
    // The list repeats a few files many times; read each distinct file once, up front, so disk
    // and page-cache reads stay out of the timings (the raw bytes are kept, the decoded
    // profiles are not).
    let mut files: std::collections::HashMap<&str, Vec<u8>> = std::collections::HashMap::new();
    for &name in &names {
        if !files.contains_key(name) {
            files.insert(
                name,
                std::fs::read(name).map_err(|e| format!("{name}: {e}"))?,
            );
        }
    }
    let input_bytes: usize = names.iter().map(|n| files[n].len()).sum();

    // Decode one profile, add it to the merger, drop it: memory stays bounded by one decoded
    // profile plus the merged result, however many profiles are merged.
    let cpu_start = cpu_seconds();
    let (mut decode_s, mut merge_s) = (0.0, 0.0);
    let mut merger = ember_pprof::Merger::new();
    for (i, name) in names.iter().enumerate() {
        let start = Instant::now();
        let profile =
            ember_pprof::decode(&files[name]).map_err(|e| format!("profile #{i} ({name}): {e}"))?;
        let decoded = Instant::now();
        merger
            .add(&profile)
            .map_err(|e| format!("merge of profile #{i} ({name}): {e}"))?;
        drop(profile);
        let added = Instant::now();
        decode_s += (decoded - start).as_secs_f64();
        merge_s += (added - decoded).as_secs_f64();
    }
    let start = Instant::now();
    let merged = merger.finish().map_err(|e| format!("merge: {e}"))?;
    merge_s += start.elapsed().as_secs_f64();

    let total_s = decode_s + merge_s;
    let cpu_s = cpu_seconds() - cpu_start;
    let n = names.len();
    println!(
        "{{\"profiles\": {n}, \"input_bytes\": {input_bytes}, \"decode_s\": {decode_s:.6}, \
         \"merge_s\": {merge_s:.6}, \"total_s\": {total_s:.6}, \"cpu_s\": {cpu_s:.2}, \
         \"profiles_per_s\": {:.1}, \"mb_per_s\": {:.2}, \"merged_samples\": {}, \
         \"merged_locations\": {}, \"merged_functions\": {}}}",
        n as f64 / total_s,
        input_bytes as f64 / 1e6 / total_s,
        merged.sample.len(),
        merged.location.len(),
        merged.function.len(),
    );
    Ok(())
}

/// User + system CPU time of this process so far, from /proc/self/stat (Linux; 0 elsewhere).
///
/// Reported next to wall time because the benchmark machine is shared: CPU time is what the
/// work itself costs, whatever else is running. /proc reports it in USER_HZ ticks, which Linux
/// fixes at 100 per second for user space.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}
