//! A recording as a pprof profile (through `ember_pprof::ProfileBuilder`), with the
//! end-of-run summary figures.

use crate::recording::Recording;
use crate::resolve::{KERNEL_MODULE, Resolver, file_name};
use crate::stack::Frame;
use crate::symbolize::Symbolizer;
use ember_pprof::{Profile, ProfileBuilder, SampleLabel};
use std::cmp::Ordering;
use std::collections::HashMap;

/// Figures for the end-of-run summary.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Samples recorded.
    pub samples: u64,
    /// Records lost by the kernel.
    pub lost: u64,
    /// Distinct processes sampled.
    pub processes: usize,
    /// Frames (weighted by sample count) that could not be symbolized.
    pub unknown_frames: u64,
    /// All frames, weighted by sample count.
    pub total_frames: u64,
}

impl Summary {
    /// Percentage of frames that stayed `[unknown]`.
    pub fn unknown_percent(&self) -> f64 {
        if self.total_frames == 0 {
            0.0
        } else {
            100.0 * self.unknown_frames as f64 / self.total_frames as f64
        }
    }
}

/// Builds the pprof profile of a recording: sample types `samples/count` and
/// `cpu/nanoseconds`, labels `pid`, `tid`, `comm`, `thread_name`.
pub fn build_profile(rec: &Recording, sym: &mut Symbolizer) -> (Profile, Summary) {
    let mut types = vec![("samples", "count"), ("cpu", "nanoseconds")];
    if rec.off_cpu {
        types.push(("off_cpu", "nanoseconds"));
    }
    if rec.wall {
        types.push(("wall", "nanoseconds"));
    }
    let mut b = ProfileBuilder::new(&types);
    let period = 1_000_000_000 / i64::from(rec.frequency.max(1));
    b.set_period(("cpu", "nanoseconds"), period);
    b.set_time(rec.start_unix_ns, rec.duration_ns);
    b.set_default_sample_type(if rec.wall {
        "wall"
    } else if rec.off_cpu {
        "off_cpu"
    } else {
        "cpu"
    });
    let mut summary = Summary {
        samples: rec.samples,
        lost: rec.lost,
        processes: rec.process_count(),
        ..Default::default()
    };

    let mut resolver = Resolver::new(rec, sym);
    // Mapping ids per recording map; the kernel gets one spanning its addresses.
    let mut mapping_ids: HashMap<u32, u64> = HashMap::new();
    let (mut kmin, mut kmax) = (u64::MAX, 0u64);
    for (key, _, _) in rec.all_stacks() {
        for f in &key.frames {
            if let Frame::Kernel { addr, .. } = f {
                kmin = kmin.min(*addr);
                kmax = kmax.max(*addr);
            }
        }
    }
    // Deterministic output: walk stacks in a stable order.
    // (key, value, off-CPU?) in a stable order.
    let mut keys: Vec<_> = rec.all_stacks().collect();
    keys.sort_by(|a, b| {
        (a.2, a.0.pid, a.0.tid)
            .cmp(&(b.2, b.0.pid, b.0.tid))
            .then_with(|| frames_cmp(&a.0.frames, &b.0.frames))
    });
    // pprof tools treat the first mapping as the main binary: register the
    // executables (file name starting with the process name) first, then the
    // other user mappings in order of use, the kernel last.
    for exe_pass in [true, false] {
        for (key, _, _) in &keys {
            for f in key.frames.iter().rev() {
                let Frame::User { map, .. } = *f else {
                    continue;
                };
                let m = &rec.maps()[map as usize];
                if exe_pass && (key.comm.is_empty() || !file_name(&m.path).starts_with(&*key.comm))
                {
                    continue;
                }
                if let std::collections::hash_map::Entry::Vacant(slot) = mapping_ids.entry(map) {
                    let build_id = resolver
                        .sym
                        .binary(&m.path, m.pid)
                        .map(|bin| bin.build_id.clone())
                        .unwrap_or_default();
                    slot.insert(b.mapping(m.start, m.end, m.pgoff, &m.path, &build_id));
                }
            }
        }
    }
    let kernel_mapping = (kmin <= kmax)
        .then(|| b.mapping(kmin & !0xfff, kmax.saturating_add(1), 0, KERNEL_MODULE, ""));
    let mut location_ids: HashMap<Frame, u64> = HashMap::new();
    let mut locs = Vec::new();
    for (key, value, off) in keys {
        locs.clear();
        for frame in &key.frames {
            let info = resolver.resolve(frame);
            summary.total_frames += value.count;
            if !info.known {
                summary.unknown_frames += value.count;
            }
            if let Some(&id) = location_ids.get(frame) {
                locs.push(id);
                continue;
            }
            let (mapping, addr) = match *frame {
                Frame::Kernel { addr, .. } => (kernel_mapping.unwrap_or(0), addr),
                Frame::User { map, addr, .. } => {
                    (mapping_ids.get(&map).copied().unwrap_or(0), addr)
                }
                Frame::Anon { addr, .. } => (0, addr),
            };
            // pprof: the innermost inlined function first, the real one last.
            let mut lines: Vec<(u64, i64)> = info
                .inlined
                .iter()
                .map(|f| {
                    (
                        b.function(&f.name, &f.system_name, &f.file),
                        i64::from(f.line),
                    )
                })
                .collect();
            lines.push((
                b.function(&info.name, &info.system_name, &info.file),
                i64::from(info.line),
            ));
            let id = b.location(mapping, addr, &lines);
            location_ids.insert(*frame, id);
            locs.push(id);
        }
        let labels = [
            SampleLabel::Num("pid", i64::from(key.pid), ""),
            SampleLabel::Num("tid", i64::from(key.tid), ""),
            SampleLabel::Str("comm", &key.comm),
            SampleLabel::Str("thread_name", &key.thread_name),
        ];
        // samples, cpu[, off_cpu][, wall]: wall is whichever time this is.
        let ns = value.period as i64;
        let mut values = if off {
            vec![0, 0, ns]
        } else {
            vec![value.count as i64, ns]
        };
        if rec.off_cpu && !off {
            values.push(0);
        }
        if rec.wall {
            values.push(ns);
        }
        b.add_sample(&locs, &values, &labels);
    }
    (b.build(), summary)
}

/// Orders stacks frame by frame (kind, then address), without allocating.
pub(crate) fn frames_cmp(a: &[Frame], b: &[Frame]) -> Ordering {
    let key = |f: &Frame| match *f {
        Frame::Kernel { addr, .. } => (0u8, addr),
        Frame::User { addr, .. } => (1, addr),
        Frame::Anon { addr, .. } => (2, addr),
    };
    a.iter().map(key).cmp(b.iter().map(key))
}
