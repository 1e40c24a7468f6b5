//! ember-sdk side by side with pprof-rs (frame-pointer unwinder) on the same workload, in
//! the same run, alternated: see README.md for what each figure means.
//!
//! Without arguments this is the parent: it runs every measurement as child processes of
//! itself (one contender per process: both install a `SIGPROF` handler), rotating the order
//! of the contenders every round, and prints the medians and ranges as a Markdown table.
//! `ROUNDS=n` sets the rounds of the CPU-overhead measurement (default 9).

mod child;
mod procinfo;
mod workload;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use child::Contender;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let num = |i: usize| -> u64 { arg(i).parse().expect("a number") };
    match arg(0) {
        "" => parent(),
        "capture-ember" => child::capture_ember(num(1) as u32, num(2) as u32),
        "capture-pprof" => child::capture_pprof(num(1) as u32),
        "cpu" => child::cpu(Contender::parse(arg(1)), num(2) as u32, num(3)),
        "encode" => child::encode(Contender::parse(arg(1)), num(2) as u32, num(3)),
        other => panic!("unknown mode {other:?}"),
    }
}

/// One child's `key=value` lines.
type Figures = BTreeMap<String, f64>;

fn run_child(args: &[String]) -> Figures {
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(args)
        .output()
        .expect("starting a child");
    assert!(
        out.status.success(),
        "child {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 from the child");
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = match v {
                "true" => 1.0,
                "false" => 0.0,
                v => v.parse().unwrap_or(f64::NAN),
            };
            (k.to_string(), v)
        })
        .collect()
}

fn strings(parts: &[&dyn std::fmt::Display]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}

/// Median and range of one figure over rounds.
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

fn spread(values: &[f64]) -> Spread {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Spread {
        median,
        min: v[0],
        max: v[n - 1],
    }
}

fn collect(rounds: &[Figures], key: &str) -> Vec<f64> {
    rounds.iter().map(|f| f[key]).collect()
}

/// "median (min–max)" with `decimals` decimals.
fn fmt(values: &[f64], decimals: usize) -> String {
    let s = spread(values);
    format!(
        "{:.d$} ({:.d$}–{:.d$})",
        s.median,
        s.min,
        s.max,
        d = decimals
    )
}

/// Units of work for about one second of CPU on this machine now.
fn calibrate() -> u64 {
    let t = procinfo::thread_cpu();
    let mut units = 0;
    while (procinfo::thread_cpu() - t).as_secs_f64() < 0.3 {
        workload::burn(200);
        units += 200;
    }
    let per_unit = (procinfo::thread_cpu() - t).as_secs_f64() / units as f64;
    (1.0 / per_unit) as u64
}

fn parent() {
    let started = Instant::now();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(9);
    let exe = std::env::current_exe().expect("own path");
    let exe_mib = std::fs::metadata(&exe).map(|m| m.len()).unwrap_or(0) as f64 / 1048576.0;
    let load_start = procinfo::loadavg();
    let units = calibrate();
    println!("# ember-sdk vs pprof-rs 0.15 (frame-pointer)");
    println!(
        "load average at start: {load_start}; {} CPUs; benchmark binary {exe_mib:.1} MiB; \
         {units} units ≈ 1 s of CPU",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // 1. One capture of a ~40-frame stack, 5 rounds, the order alternated.
    let (mut ember_cap, mut pprof_cap) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let ember = || run_child(&strings(&[&"capture-ember", &1_000_000, &100_000]));
        let pprof = || run_child(&strings(&[&"capture-pprof", &20_000]));
        if round % 2 == 0 {
            ember_cap.push(ember());
            pprof_cap.push(pprof());
        } else {
            pprof_cap.push(pprof());
            ember_cap.push(ember());
        }
    }
    let handler_cost = |rounds: &[Figures]| -> Vec<f64> {
        rounds
            .iter()
            .map(|f| f["signal_active_ns"] - f["signal_idle_ns"])
            .collect()
    };
    println!("\n## One stack capture (5 rounds each, median (min–max))\n");
    println!("| | ember-sdk | pprof-rs 0.15 (frame-pointer) |");
    println!("|---|---|---|");
    println!(
        "| frames walked | {} | {} |",
        fmt(&collect(&ember_cap, "depth"), 0),
        fmt(&collect(&pprof_cap, "depth"), 0)
    );
    println!(
        "| capture called directly (ns) | {} | — (only from its signal handler) |",
        fmt(&collect(&ember_cap, "direct_ns"), 0)
    );
    println!(
        "| `raise(SIGPROF)` round trip, handler active (ns) | {} | {} |",
        fmt(&collect(&ember_cap, "signal_active_ns"), 0),
        fmt(&collect(&pprof_cap, "signal_active_ns"), 0)
    );
    println!(
        "| same, handler idle / empty (ns) | {} | {} |",
        fmt(&collect(&ember_cap, "signal_idle_ns"), 0),
        fmt(&collect(&pprof_cap, "signal_idle_ns"), 0)
    );
    println!(
        "| **handler's own cost per sample** (active − idle, ns) | **{}** | **{}** |",
        fmt(&handler_cost(&ember_cap), 0),
        fmt(&handler_cost(&pprof_cap), 0)
    );
    println!(
        "| 40 × `pprof::validate` (its per-frame check, ns) | — | {} |",
        fmt(&collect(&pprof_cap, "validate40_ns"), 0)
    );

    // 2. CPU overhead: the same work with no profiler, ember-sdk, pprof-rs at 19 and 99 Hz,
    // the order rotated every round.
    let configs: [(Contender, u32); 5] = [
        (Contender::None, 0),
        (Contender::Ember, 19),
        (Contender::Pprof, 19),
        (Contender::Ember, 99),
        (Contender::Pprof, 99),
    ];
    let mut cpu: Vec<Vec<Figures>> = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        for k in 0..configs.len() {
            let i = (round + k) % configs.len();
            let (who, hz) = configs[i];
            let name = match who {
                Contender::None => "none",
                Contender::Ember => "ember",
                Contender::Pprof => "pprof",
            };
            cpu[i].push(run_child(&strings(&[&"cpu", &name, &hz.max(1), &units])));
        }
    }
    let base = collect(&cpu[0], "process_cpu_ns");
    println!("\n## CPU time of the same work ({rounds} rounds, order rotated; median (min–max))\n");
    println!(
        "| profiler | process CPU (ms) | overhead vs none, medians | overhead, paired per round (median (min–max)) | samples |"
    );
    println!("|---|---|---|---|---|");
    for (i, (who, hz)) in configs.iter().enumerate() {
        let this = collect(&cpu[i], "process_cpu_ns");
        let name = match who {
            Contender::None => "none".to_string(),
            Contender::Ember => format!("ember-sdk {hz} Hz"),
            Contender::Pprof => format!("pprof-rs {hz} Hz"),
        };
        let ms: Vec<f64> = this.iter().map(|ns| ns / 1e6).collect();
        let paired: Vec<f64> = this
            .iter()
            .zip(&base)
            .map(|(t, b)| (t / b - 1.0) * 100.0)
            .collect();
        let overall = (spread(&this).median / spread(&base).median - 1.0) * 100.0;
        let (overall, paired, samples) = if *who == Contender::None {
            ("—".to_string(), "—".to_string(), "—".to_string())
        } else {
            (
                format!("{overall:+.2} %"),
                fmt(&paired, 2) + " %",
                fmt(&collect(&cpu[i], "samples"), 0),
            )
        };
        println!(
            "| {name} | {} | {overall} | {paired} | {samples} |",
            fmt(&ms, 1)
        );
    }

    // 3. Symbolization and encoding of a 60 s profile's worth of samples; resident memory.
    let chunk = (units / 20).max(1);
    let (mut ember_enc, mut pprof_enc) = (Vec::new(), Vec::new());
    for round in 0..3 {
        let run = |who: &str| run_child(&strings(&[&"encode", &who, &1000, &chunk]));
        if round % 2 == 0 {
            ember_enc.push(run("ember"));
            pprof_enc.push(run("pprof"));
        } else {
            pprof_enc.push(run("pprof"));
            ember_enc.push(run("ember"));
        }
    }
    let total = |r: &[Figures]| -> Vec<f64> {
        r.iter()
            .map(|f| f["symbolize_ms"] + f["encode_ms"])
            .collect()
    };
    let added = |r: &[Figures], key: &str| -> Vec<f64> {
        r.iter()
            .map(|f| (f[key] - f["rss_before_kib"]) / 1024.0)
            .collect()
    };
    println!(
        "\n## A 60 s profile's worth of samples (5,940 = 60 s × 99 Hz), symbolized and encoded (3 rounds; median (min–max))\n"
    );
    println!("| | ember-sdk | pprof-rs |");
    println!("|---|---|---|");
    for (label, key, d) in [
        ("samples recorded", "samples", 0),
        ("distinct stacks", "stacks", 0),
        ("gzip'd pprof (bytes)", "bytes", 0),
        (
            "symbolize (ms; ember-sdk: `finish`, which also builds the profile)",
            "symbolize_ms",
            1,
        ),
        (
            "encode (ms; pprof-rs: `pprof()`, protobuf and gzip)",
            "encode_ms",
            1,
        ),
    ] {
        println!(
            "| {label} | {} | {} |",
            fmt(&collect(&ember_enc, key), d),
            fmt(&collect(&pprof_enc, key), d)
        );
    }
    println!(
        "| **symbolize + encode (ms)** | **{}** | **{}** |",
        fmt(&total(&ember_enc), 1),
        fmt(&total(&pprof_enc), 1)
    );
    println!(
        "| resident added while recording (MiB) | {} | {} |",
        fmt(&added(&ember_enc, "rss_recording_kib"), 1),
        fmt(&added(&pprof_enc, "rss_recording_kib"), 1)
    );
    println!(
        "| **resident added after the profile is built** (MiB; caches kept) | **{}** | **{}** |",
        fmt(&added(&ember_enc, "rss_after_kib"), 1),
        fmt(&added(&pprof_enc, "rss_after_kib"), 1)
    );
    println!(
        "| peak resident added (MiB) | {} | {} |",
        fmt(&added(&ember_enc, "peak_kib"), 1),
        fmt(&added(&pprof_enc, "peak_kib"), 1)
    );
    println!(
        "| heap profile | `SamplingAllocator` around any allocator | none without jemalloc (pprof-rs#44) |"
    );
    println!(
        "\nload average at end: {}; took {:.0} s",
        procinfo::loadavg(),
        started.elapsed().as_secs_f64()
    );
}
