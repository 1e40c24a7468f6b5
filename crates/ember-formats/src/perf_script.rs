//! `perf script` text from a profile: one block per sample (a header line, one tab-indented
//! frame per line leaf first, a blank line), the text `stackcollapse-perf.pl`, inferno and
//! `ember collapse` fold. Blocks are counts of samples, so a profile's value becomes that many
//! repeated blocks: a count sample type as it is, a time or size through the profile's period
//! (`cpu/nanoseconds` with a 10 ms period: one block per 10 ms).
//!
//! The block layout is [`write_block`]'s, the one every perf script Ember writes goes through
//! (the recordings' writer in `ember-samples` calls it too).

use std::io::{self, Write};

use ember_pprof::Profile;

use crate::FormatError;

/// A block's header: who was sampled, and when when it is known.
#[derive(Debug, Clone, Copy)]
pub struct Header<'a> {
    /// Thread name; empty is written `[unknown]` (perf prints a name there, and parsers rely
    /// on the column).
    pub comm: &'a str,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU and time in nanoseconds, when known (aggregated stacks have neither).
    pub at: Option<(u32, u64)>,
}

/// One frame line.
#[derive(Debug, Clone, Copy)]
pub struct FrameLine<'a> {
    /// Instruction address.
    pub address: u64,
    /// Function name; empty is written `[unknown]`.
    pub function: &'a str,
    /// Offset of the address inside the function, when known.
    pub offset: Option<u64>,
    /// Binary path or `[kernel.kallsyms]`; empty is written `[unknown]`.
    pub module: &'a str,
}

/// Writes one sample block, frames leaf first.
pub fn write_block<'a>(
    out: &mut impl Write,
    header: Header<'_>,
    frames: impl IntoIterator<Item = FrameLine<'a>>,
) -> io::Result<()> {
    let or_unknown = |s: &'a str| if s.is_empty() { "[unknown]" } else { s };
    let comm = if header.comm.is_empty() {
        "[unknown]"
    } else {
        header.comm
    };
    let (pid, tid) = (header.pid, header.tid);
    match header.at {
        Some((cpu, time_ns)) => {
            let secs = time_ns / 1_000_000_000;
            let micros = (time_ns % 1_000_000_000) / 1_000;
            writeln!(
                out,
                "{comm} {pid}/{tid} [{cpu:03}] {secs}.{micros:06}: cpu-clock: "
            )?;
        }
        None => writeln!(out, "{comm} {pid}/{tid} cpu-clock: ")?,
    }
    for f in frames {
        let module = or_unknown(f.module);
        let function = or_unknown(f.function);
        match f.offset {
            Some(off) if !f.function.is_empty() => {
                writeln!(out, "\t{:16x} {function}+{off:#x} ({module})", f.address)?
            }
            _ => writeln!(out, "\t{:16x} {function} ({module})", f.address)?,
        }
    }
    writeln!(out)
}

/// How many blocks a value of sample type `index` stands for: a count as it is; another unit
/// divided by the period when the period is in that unit.
fn per_block(profile: &Profile, index: usize) -> Result<Option<i64>, FormatError> {
    let string = |i: i64| ember_pprof::string(profile, i);
    let st = &profile.sample_type[index];
    let unit = string(st.unit);
    if unit == "count" || unit.is_empty() {
        return Ok(None);
    }
    let period_unit = profile
        .period_type
        .as_ref()
        .map(|p| string(p.unit))
        .unwrap_or("");
    if profile.period > 0 && period_unit == unit {
        return Ok(Some(profile.period));
    }
    Err(FormatError::SampleIndex(format!(
        "perf script counts samples: sample type {}/{unit} has no period in {unit} to count \
         them by; choose a count type with --sample-index",
        string(st.r#type)
    )))
}

/// The sample type perf script is written from: `selector`'s, else the first count type (the
/// samples themselves), else the profile's default.
fn choose(profile: &Profile, selector: Option<&str>) -> Result<usize, FormatError> {
    if selector.is_none()
        && let Some(i) = profile
            .sample_type
            .iter()
            .position(|t| ember_pprof::string(profile, t.unit) == "count")
    {
        return Ok(i);
    }
    crate::select_sample_index(profile, selector)
}

/// Numeric sample label `key` (`pid`, `tid`), or 0.
fn num_label(profile: &Profile, sample: &ember_pprof::Sample, keys: &[&str]) -> u32 {
    sample
        .label
        .iter()
        .find(|l| keys.contains(&ember_pprof::string(profile, l.key)))
        .and_then(|l| {
            if l.num != 0 {
                u32::try_from(l.num).ok()
            } else {
                ember_pprof::string(profile, l.str).parse().ok()
            }
        })
        .unwrap_or(0)
}

/// Writes `profile` as `perf script` text: every sample with a positive value of the chosen
/// type (see `choose`) as that many blocks (see `per_block`); the thread name from a
/// `thread_name`/`comm` label, pid and tid from `pid`/`tid` labels; frames leaf first, one
/// per line of each location (inlined callees first, as pprof lists them), the module its
/// mapping's file. Returns how many blocks were written.
pub fn profile_to_perf_script(
    profile: &Profile,
    selector: Option<&str>,
    out: &mut impl Write,
) -> Result<u64, FormatError> {
    let index = choose(profile, selector)?;
    let per = per_block(profile, index)?;
    let string = |i: i64| ember_pprof::string(profile, i);
    let locations: std::collections::HashMap<u64, &ember_pprof::Location> =
        profile.location.iter().map(|l| (l.id, l)).collect();
    let functions: std::collections::HashMap<u64, &ember_pprof::Function> =
        profile.function.iter().map(|f| (f.id, f)).collect();
    let mappings: std::collections::HashMap<u64, &ember_pprof::Mapping> =
        profile.mapping.iter().map(|m| (m.id, m)).collect();
    let io = |e: io::Error| FormatError::Io {
        path: "-".into(),
        source: e,
    };
    let mut written = 0u64;
    let mut block = Vec::new();
    for sample in &profile.sample {
        let value = sample.value.get(index).copied().unwrap_or(0);
        let blocks = match per {
            None => value,
            Some(period) => (value + period / 2) / period,
        };
        if blocks <= 0 {
            continue;
        }
        let comm = sample
            .label
            .iter()
            .find(|l| matches!(string(l.key), "thread_name" | "comm"))
            .map(|l| string(l.str))
            .unwrap_or("");
        let header = Header {
            comm,
            pid: num_label(profile, sample, &["pid", "process_id"]),
            tid: num_label(profile, sample, &["tid", "thread_id"]),
            at: None,
        };
        let frames = sample
            .location_id
            .iter()
            .filter_map(|id| locations.get(id))
            .flat_map(|loc| {
                let module = mappings
                    .get(&loc.mapping_id)
                    .map(|m| string(m.filename))
                    .unwrap_or("");
                let lines: Vec<FrameLine> = if loc.line.is_empty() {
                    vec![FrameLine {
                        address: loc.address,
                        function: "",
                        offset: None,
                        module,
                    }]
                } else {
                    loc.line
                        .iter()
                        .map(|line| FrameLine {
                            address: loc.address,
                            function: functions
                                .get(&line.function_id)
                                .map(|f| string(f.name))
                                .unwrap_or(""),
                            offset: None,
                            module,
                        })
                        .collect()
                };
                lines
            });
        block.clear();
        write_block(&mut block, header, frames).map_err(io)?;
        for _ in 0..blocks {
            out.write_all(&block).map_err(io)?;
        }
        written += blocks as u64;
    }
    out.flush().map_err(io)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_become_blocks_and_uncountable_types_are_refused() {
        let mut b = ember_pprof::ProfileBuilder::new(&[("samples", "count"), ("wall", "seconds")]);
        b.add_folded_stack(&["main", "work"], &[2, 7]);
        let profile = b.build();
        let mut out = Vec::new();
        assert_eq!(profile_to_perf_script(&profile, None, &mut out).unwrap(), 2);
        let text = String::from_utf8(out).unwrap();
        let block = "[unknown] 0/0 cpu-clock: \n\t               0 work ([unknown])\n\t               0 main ([unknown])\n\n";
        assert_eq!(text, block.repeat(2));
        // Seconds with no period in seconds cannot be told in samples.
        let err = profile_to_perf_script(&profile, Some("wall"), &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("choose a count type"), "{err}");
    }
}
