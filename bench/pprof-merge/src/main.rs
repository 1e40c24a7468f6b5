//! Decode + merge benchmark for `ember-pprof`.
//!
//! Reads every profile named in a list file into memory first (so disk speed is not measured),
//! then times `ember_pprof::decode` over all of them and one `ember_pprof::merge` of the
//! results, and prints one JSON object with the figures. bench/run.sh runs it several times.
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
    let mut inputs = Vec::new();
    for name in names.lines().filter(|l| !l.trim().is_empty()) {
        inputs.push(std::fs::read(name).map_err(|e| format!("{name}: {e}"))?);
    }
    if inputs.is_empty() {
        return Err("the list names no profile".into());
    }
    let input_bytes: usize = inputs.iter().map(Vec::len).sum();

    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let mut profiles = Vec::with_capacity(inputs.len());
    for (i, bytes) in inputs.iter().enumerate() {
        profiles.push(ember_pprof::decode(bytes).map_err(|e| format!("profile #{i}: {e}"))?);
    }
    let decode_s = start.elapsed().as_secs_f64();

    let start = Instant::now();
    let merged = ember_pprof::merge(&profiles).map_err(|e| format!("merge: {e}"))?;
    let merge_s = start.elapsed().as_secs_f64();

    let total_s = decode_s + merge_s;
    let cpu_s = cpu_seconds() - cpu_start;
    let n = profiles.len();
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
