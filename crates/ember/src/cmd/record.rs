//! `ember record`: sample a command, processes or the whole host with
//! perf_event and write pprof, folded stacks, an SVG flame graph or
//! `perf script` text.

use anyhow::{Context, bail};
use ember_sampler::{CallGraph, Options, Target};
use std::ffi::OsString;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Output formats of `ember record`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// gzip'd pprof protobuf (`.pb.gz`, `.pb`, `.pprof`).
    Pprof,
    /// Folded stacks, one `root;...;leaf count` line per stack (`.folded`, `.txt`).
    Folded,
    /// Interactive SVG flame graph (`.svg`).
    Svg,
    /// `perf script` compatible text (`.perf.txt`).
    PerfScript,
}

/// How user-space stacks are unwound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CallGraphArg {
    /// Per binary: frame pointers where they work, CFI where they do not (see --call-graph).
    Auto,
    /// Frame pointers, walked by the kernel.
    Fp,
    /// CFI (.eh_frame/.debug_frame) over a copy of the user stack (x86_64).
    Dwarf,
}

/// Sample a command, processes or the whole host with perf_event and write a profile.
#[derive(clap::Args)]
#[command(
    long_about = "Sample CPU stacks with perf_event_open (software cpu-clock event, one per CPU) \
                  and write a profile.\n\n\
                  Targets: a command to launch (`ember record -- make -j2`, following its forks \
                  and threads), running processes (`-p PID[,PID]`) or the whole host (`-a`). \
                  The output format follows the extension of --output (.pb.gz, .folded, .svg, \
                  .perf.txt) unless --format is given. Ctrl-C stops a -p/-a recording and \
                  writes the profile."
)]
pub struct Args {
    /// Samples per second per CPU (1-10000).
    #[arg(short = 'F', long, default_value_t = 99,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    frequency: u32,

    /// Attach to running processes (comma-separated pids); follows their new threads and children.
    #[arg(short, long, value_delimiter = ',', conflicts_with_all = ["all_cpus", "command"])]
    pid: Vec<u32>,

    /// Sample every task on every CPU until Ctrl-C or --duration.
    #[arg(short, long, conflicts_with = "command")]
    all_cpus: bool,

    /// Stop after this many seconds (a launched command keeps running).
    #[arg(short, long, value_name = "SECS")]
    duration: Option<f64>,

    /// Output file.
    #[arg(short, long, default_value = "ember.pb.gz")]
    output: PathBuf,

    /// Output format; default: chosen by the extension of --output (pprof otherwise).
    #[arg(long, value_enum)]
    format: Option<Format>,

    /// User-stack unwinding. `auto` decides per binary (by build-id, else file): the first 16
    /// samples whose user instruction is in a binary are unwound both ways; if the
    /// frame-pointer walk found exactly CFI's frames inside that binary in at least 80% of
    /// them, the binary keeps frame pointers (cheaper), otherwise CFI; a binary without
    /// .eh_frame/.debug_frame uses frame pointers at once. The choice sticks for the run and
    /// is printed at the end.
    #[arg(long, value_enum, default_value = "auto")]
    call_graph: CallGraphArg,

    /// Bytes of user stack copied per sample for dwarf/auto unwinding (multiple of 8).
    #[arg(long, default_value_t = 16384, value_name = "BYTES")]
    stack_size: u32,

    /// Data pages per CPU ring buffer (power of two; at least 256 with dwarf/auto).
    #[arg(long, default_value_t = 64, value_name = "PAGES")]
    mmap_pages: usize,

    /// Also record off-CPU time: the sched:sched_switch tracepoint samples each switch-out of
    /// the targets with the blocked stack, timed until the task runs again (sample type
    /// off_cpu/nanoseconds, the default view; folded and SVG output show it). Needs tracefs
    /// (mounted at /sys/kernel/tracing when root and missing); otherwise context-switch
    /// events are used, with a warning.
    #[arg(long)]
    off_cpu: bool,

    /// Wall-clock time per stack: on-CPU plus off-CPU time (implies --off-cpu; sample type
    /// wall/nanoseconds, the default view; folded and SVG output show it).
    #[arg(long)]
    wall: bool,

    /// Show inlined functions as frames of their own and record file:line, read from the
    /// binaries' DWARF (or their split debug files); slower to symbolize.
    #[arg(long)]
    inline: bool,

    /// Do not read or write the on-disk symbol cache ($XDG_CACHE_HOME/ember/symbols or
    /// ~/.cache/ember/symbols, one file per build-id).
    #[arg(long)]
    no_symbol_cache: bool,

    /// Do not print the progress line.
    #[arg(short, long)]
    quiet: bool,

    /// The command to launch and profile (after `--`).
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

fn format_for(path: &Path) -> Format {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if name.ends_with(".svg") {
        Format::Svg
    } else if name.ends_with(".perf.txt") || name.ends_with(".perf") {
        Format::PerfScript
    } else if name.ends_with(".folded") || name.ends_with(".txt") {
        Format::Folded
    } else {
        Format::Pprof
    }
}

/// Runs `ember record`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let target = if !args.pid.is_empty() {
        Target::Pids(args.pid.clone())
    } else if args.all_cpus {
        Target::AllCpus
    } else if !args.command.is_empty() {
        Target::Command(args.command.clone())
    } else {
        bail!("nothing to record: give a command after `--`, -p PID or -a");
    };
    let call_graph = match args.call_graph {
        CallGraphArg::Auto => CallGraph::Auto,
        CallGraphArg::Fp => CallGraph::Fp,
        CallGraphArg::Dwarf => CallGraph::Dwarf,
    };
    let duration = match args.duration {
        Some(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => bail!("--duration must be a positive number of seconds, got {s}"),
        None => None,
    };
    let format = args.format.unwrap_or_else(|| format_for(&args.output));
    let mut options = Options::new(target);
    options.frequency = args.frequency;
    options.call_graph = call_graph;
    options.duration = duration;
    options.ring_pages = args.mmap_pages;
    options.user_stack_size = args.stack_size;
    options.off_cpu = args.off_cpu;
    options.wall = args.wall;

    ember_sampler::install_interrupt_handler();
    let show_progress = !args.quiet && std::io::stderr().is_terminal();
    let recording = ember_sampler::record(&options, |p| {
        if show_progress {
            eprint!(
                "\rember record: {:6.1}s  {} samples  {} lost ",
                p.elapsed.as_secs_f64(),
                p.samples,
                p.lost
            );
        }
    })
    .context("recording failed")?;
    if show_progress {
        eprintln!();
    }
    for w in &recording.warnings {
        eprintln!("ember record: warning: {w}");
    }

    hwm("recorded");
    let mut symbolizer = ember_samples::Symbolizer::with_inline(args.inline);
    if !args.no_symbol_cache {
        symbolizer.cache_dir = ember_samples::symbolize::default_cache_dir();
    }
    let (profile, summary) = ember_samples::build_profile(&recording, &mut symbolizer);
    hwm("profile built");
    write_output(&args.output, format, &recording, &profile, &mut symbolizer)?;
    hwm("written");
    symbolizer.save_cache();
    for w in &symbolizer.warnings {
        eprintln!("ember record: warning: {w}");
    }
    let seconds = recording.duration_ns as f64 / 1e9;
    let overhead = match ember_sampler::sys::own_cpu_ns() {
        Some(ns) if seconds > 0.0 => format!(
            "; ember used {:.0} ms CPU ({:.2}% of one core)",
            ns as f64 / 1e6,
            ns as f64 / 1e9 / seconds * 100.0
        ),
        _ => String::new(),
    };
    eprintln!(
        "ember record: {} samples ({} lost) from {} processes in {:.2}s; {:.1}% of frames [unknown]{}; wrote {}",
        summary.samples,
        summary.lost,
        summary.processes,
        seconds,
        summary.unknown_percent(),
        overhead,
        args.output.display()
    );
    if recording.off_cpu {
        let blocked: u64 = recording.off_cpu_stacks().values().map(|v| v.period).sum();
        let source = match recording.off_cpu_source {
            Some(ember_sampler::OffCpuSource::Tracepoint) => "sched:sched_switch",
            _ => "context-switch events",
        };
        eprintln!(
            "ember record: off-CPU ({source}): {} context switches, {:.3}s blocked in total",
            recording.off_cpu_switches,
            blocked as f64 / 1e9
        );
    }
    let fp_count = recording
        .auto_choices
        .iter()
        .filter(|c| c.method == ember_sampler::unwind::Method::FramePointer)
        .count();
    if recording.auto_choices.len() > 8 {
        eprintln!(
            "ember record: auto unwinding: frame pointers for {fp_count} binaries, CFI for {}",
            recording.auto_choices.len() - fp_count
        );
    } else {
        for c in &recording.auto_choices {
            let method = match c.method {
                ember_sampler::unwind::Method::FramePointer => "frame pointers",
                ember_sampler::unwind::Method::Cfi => "CFI",
            };
            eprintln!(
                "ember record: auto unwinding: {method} for {} ({})",
                c.path, c.reason
            );
        }
    }
    if let Some(ember_sampler::launch::ExitStatus::Code(c)) = recording.exit_status
        && c != 0
    {
        eprintln!("ember record: the command exited with status {c}");
    }
    if let Some(ember_sampler::launch::ExitStatus::Signal(s)) = recording.exit_status {
        eprintln!("ember record: the command was killed by signal {s}");
    }
    Ok(())
}

/// With EMBER_DEBUG_RSS set, prints the peak RSS so far and the time since
/// the previous phase (used by bench/record to time symbolization).
fn hwm(phase: &str) {
    static LAST: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
    if std::env::var_os("EMBER_DEBUG_RSS").is_some() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let peak = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .unwrap_or("")
            .trim();
        let now = std::time::Instant::now();
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        let ms = last.map_or(0.0, |t| now.duration_since(t).as_secs_f64() * 1e3);
        *last = Some(now);
        eprintln!("ember record: phase {phase}: peak RSS {peak}, {ms:.1} ms");
    }
}

/// The sample type folded and SVG output show: sample counts, blocked
/// nanoseconds with --off-cpu, or wall nanoseconds with --wall.
fn view_index(recording: &ember_samples::Recording) -> usize {
    if recording.wall {
        3
    } else if recording.off_cpu {
        2
    } else {
        0
    }
}

fn write_output(
    path: &Path,
    format: Format,
    recording: &ember_samples::Recording,
    profile: &ember_pprof::Profile,
    symbolizer: &mut ember_samples::Symbolizer,
) -> anyhow::Result<()> {
    let create = || {
        std::fs::File::create(path)
            .map(BufWriter::new)
            .with_context(|| format!("cannot create {}", path.display()))
    };
    match format {
        Format::Pprof => ember_pprof::write_file(profile, path)
            .with_context(|| format!("cannot write {}", path.display()))?,
        Format::Folded => {
            let folded = ember_pprof::folded_stacks(profile, view_index(recording));
            ember_formats::write(folded, create()?)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Format::Svg => {
            let lines = ember_pprof::folded_stacks(profile, view_index(recording))
                .into_iter()
                .map(|(stack, count)| ember_formats::FoldedLine {
                    stack: stack.into(),
                    count: count as f64,
                    second_count: None,
                })
                .collect();
            let folded = ember_formats::Folded {
                lines,
                ..Default::default()
            };
            let options = ember_flamegraph::Options {
                // The values' name is every Ember flame graph's (units::value_name): CPU
                // stacks count samples, wall and off-CPU stacks nanoseconds; the title says
                // which time it is.
                title: if recording.wall {
                    "ember record: wall time".to_string()
                } else if recording.off_cpu {
                    "ember record: off-CPU time".to_string()
                } else {
                    "ember record".to_string()
                },
                count_name: if recording.wall || recording.off_cpu {
                    ember_formats::units::value_name("", "nanoseconds")
                } else {
                    ember_formats::units::value_name("samples", "count")
                },
                ..Default::default()
            };
            let mut out = create()?;
            let report = ember_flamegraph::render(&folded, &options, &mut out)
                .context("cannot render the flame graph")?;
            out.flush()
                .with_context(|| format!("cannot write {}", path.display()))?;
            for w in report.warnings {
                eprintln!("ember record: warning: {w}");
            }
        }
        Format::PerfScript => {
            ember_samples::perf_script::write_recording(recording, symbolizer, create()?)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(())
}
