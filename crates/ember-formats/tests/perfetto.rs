//! Perfetto traces: Perfetto's own diff-test traces (textprotos from google/perfetto,
//! encoded with Perfetto's schema by `tests/data/perfetto/encode.py`) read into the
//! callstacks and totals Perfetto's expected query outputs state; pprof corpus files →
//! trace → pprof keep their folded stacks and totals; detection; and cut or random bytes
//! are errors, never panics.

use ember_formats::detect::{Input, Kind, classify, decode_as};

use ember_formats::perfetto::{
    self, PerfettoError, looks_like_trace, profile_to_trace, read_trace, trace_to_profile,
};
use ember_pprof::Profile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn data(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/perfetto")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

/// Every valid profile.proto file of the pprof manifest, with its sample types column.
fn proto_files() -> Vec<(PathBuf, String)> {
    let tsv = std::fs::read_to_string(corpora().join("pprof-cases.tsv")).unwrap();
    tsv.lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c.len() > 3 && !c[3].is_empty() && !c[2].contains("BROKEN"))
        .map(|c| (corpora().join(c[0]), c[3].to_owned()))
        .collect()
}

fn type_index(p: &Profile, name: &str) -> usize {
    p.sample_type
        .iter()
        .position(|t| p.string_table[t.r#type as usize] == name)
        .unwrap_or_else(|| panic!("no sample type {name}"))
}

fn folded(p: &Profile, name: &str) -> BTreeMap<String, i64> {
    ember_pprof::folded_stacks(p, type_index(p, name))
        .into_iter()
        .collect()
}

/// Folded stacks as written in a test.
fn expect(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|&(s, v)| (s.to_owned(), v)).collect()
}

fn total(p: &Profile, index: usize) -> i64 {
    p.sample.iter().map(|s| s.value[index]).sum()
}

/// The distinct values of label `key` (numbers as text).
fn labels(p: &Profile, key: &str) -> Vec<String> {
    let mut out: Vec<String> = p
        .sample
        .iter()
        .flat_map(|s| &s.label)
        .filter(|l| p.string_table[l.key as usize] == key)
        .map(|l| match l.str {
            0 => l.num.to_string(),
            s => p.string_table[s as usize].clone(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `test_heap_profile_dump_max` expects two `heap_profile_allocation` rows for pid 2:
/// size 1000 count 6 at callsite f1→f2→f3 and size 90 count 1 at f1→f2 (frame 4: f2 in the
/// second mapping).
#[test]
fn heapprofd_dump_max_matches_perfettos_expected_rows() {
    let bytes = data("heap_profile_dump_max.pftrace");
    assert_eq!(classify(&bytes), Kind::Perfetto);
    let p = trace_to_profile(&bytes).unwrap();
    ember_pprof::validate(&p).unwrap();
    assert_eq!(
        folded(&p, "inuse_space"),
        expect(&[("f1;f2;f3", 1000), ("f1;f2", 90)])
    );
    assert_eq!(
        folded(&p, "inuse_objects"),
        expect(&[("f1;f2;f3", 6), ("f1;f2", 1)])
    );
    assert_eq!(labels(&p, "pid"), vec!["2"]);
    assert_eq!(p.period, 1024, "sampling_interval_bytes");
}

/// `stdlib/callstacks` tests on annotate.textproto: stacks [f1, f2, f3] and [f1, f2], one
/// allocation each (f1 total 2 self 0, f2 total 2 self 1, f3 total 1 self 1), all in mapping
/// `/liblib.so` with build id `6275696c642d6964` at rel_pc 4096, 8193 and 12288.
#[test]
fn heapprofd_callstacks_match_perfettos_annotate_tests() {
    let p = trace_to_profile(&data("callstacks_annotate.pftrace")).unwrap();
    let objects = folded(&p, "alloc_objects");
    assert_eq!(
        objects,
        [("f1;f2".to_owned(), 1), ("f1;f2;f3".to_owned(), 1)].into()
    );
    assert_eq!(folded(&p, "alloc_space").values().sum::<i64>(), 200);
    assert_eq!(folded(&p, "inuse_space").values().sum::<i64>(), 200);
    assert_eq!(p.mapping.len(), 1);
    let m = &p.mapping[0];
    assert_eq!(p.string_table[m.filename as usize], "/liblib.so");
    assert_eq!(p.string_table[m.build_id as usize], "6275696c642d6964");
    let mut pcs: Vec<u64> = p.location.iter().map(|l| l.address).collect();
    pcs.sort();
    assert_eq!(pcs, vec![4096, 8193, 12288]);
}

/// Interned data on the sequence (not in the packet), two heaps of one process: each heap
/// is a `heap` label; one allocation and one free each, so nothing is in use.
#[test]
fn heapprofd_two_heaps_are_labelled_and_totalled() {
    let p = trace_to_profile(&data("heap_profile_tracker_twoheaps.pftrace")).unwrap();
    assert_eq!(labels(&p, "heap"), vec!["custom", "libc.malloc"]);
    assert_eq!(total(&p, type_index(&p, "alloc_space")), 2);
    assert_eq!(total(&p, type_index(&p, "alloc_objects")), 2);
    assert_eq!(total(&p, type_index(&p, "inuse_space")), 0);
    // The frame has no function name: a location at rel_pc 0x123 without lines.
    assert_eq!(folded(&p, "alloc_space"), [("0x123".to_owned(), 2)].into());
}

/// `test_perf_sample_followers`: one kernel-mode sample of pid/tid 0 with an empty
/// callstack, timebase SW_CPU_CLOCK at 100 Hz (so 10 ms of CPU a sample); Perfetto's
/// expected output has exactly one timebase counter row, at that sample.
#[test]
fn perf_sample_with_timebase_defaults_gives_count_and_time() {
    let bytes = data("perf_sample_followers.pftrace");
    assert_eq!(classify(&bytes), Kind::Perfetto);
    let read = read_trace(&bytes).unwrap();
    assert_eq!(read.stats.cpu_samples, 1);
    assert_eq!(read.stats.unresolved, 0);
    assert!(read.heap.is_none());
    let p = read.cpu.unwrap();
    ember_pprof::validate(&p).unwrap();
    assert_eq!(total(&p, type_index(&p, "samples")), 1);
    assert_eq!(total(&p, type_index(&p, "cpu")), 10_000_000);
    assert_eq!(p.period, 10_000_000);
    assert_eq!(labels(&p, "pid"), vec!["0"]);
    assert_eq!(labels(&p, "tid"), vec!["0"]);
    assert!(p.sample[0].location_id.is_empty());
    assert_eq!(p.time_nanos, 106_208_800_213_886);
}

/// Every corpus profile → trace → profile: a count-typed CPU profile keeps its folded
/// stacks exactly; every CPU profile keeps its sample total; a heap profile keeps the
/// stacks and totals of its space and object types.
#[test]
fn pprof_corpus_round_trips_through_a_trace() {
    let files = proto_files();
    assert!(files.len() >= 70);
    let (mut cpu, mut heap, mut scaled) = (0, 0, 0);
    for (path, types) in files {
        let original = ember_pprof::read_file(&path).unwrap();
        let (bytes, summary) = profile_to_trace(&original);
        let name = path.display().to_string();
        assert_eq!(classify(&bytes), Kind::Perfetto, "{name}");
        if original.sample.is_empty() || summary.perf_samples + summary.heap_samples == 0 {
            assert!(matches!(
                trace_to_profile(&bytes),
                Err(PerfettoError::NoSamples { .. })
            ));
            continue;
        }
        let back = trace_to_profile(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        ember_pprof::validate(&back).unwrap();
        if perfetto::is_heap_profile(&original) {
            heap += 1;
            check_heap(&original, &back, &name);
            continue;
        }
        cpu += 1;
        if summary.scaled.is_some() {
            // Every stack's count was scaled and rounded: what was written reads back, and
            // no more than the cap (plus one rounding per sample) was written.
            scaled += 1;
            assert_eq!(total(&back, 0), summary.perf_samples as i64, "{name}");
            let cap = perfetto::MAX_PERF_SAMPLES + original.sample.len() as u64;
            assert!(summary.perf_samples <= cap, "{name}");
            continue;
        }
        let string = |i: i64| original.string_table[i as usize].as_str();
        let count = original
            .sample_type
            .iter()
            .position(|t| string(t.unit) == "count");
        if let Some(c) = count {
            let want: BTreeMap<String, i64> = ember_pprof::folded_stacks(&original, c)
                .into_iter()
                .filter(|&(_, v)| v > 0)
                .collect();
            same(
                &folded(&back, "samples"),
                &want,
                &format!("{name} ({types})"),
            );
        } else {
            // Time only: each sample became round(value / period) perf samples.
            assert!(summary.perf_samples > 0, "{name}");
            assert_eq!(total(&back, 0), summary.perf_samples as i64, "{name}");
        }
    }
    eprintln!("round trip: {cpu} CPU profiles ({scaled} scaled down), {heap} heap profiles");
    assert!(
        cpu >= 40 && heap >= 10,
        "cpu {cpu}, heap {heap}, scaled {scaled}"
    );
}

/// The inuse types come back exactly; the alloc types too unless a sample had more in use
/// than allocated (a delta profile), whose alloc is raised to its inuse.
fn check_heap(original: &Profile, back: &Profile, name: &str) {
    let string = |i: i64| original.string_table[i as usize].as_str();
    let value = |s: &ember_pprof::Sample, ty: &str| {
        original
            .sample_type
            .iter()
            .position(|t| string(t.r#type) == ty)
            .map(|i| s.value[i])
    };
    let raised = original.sample.iter().any(|s| {
        value(s, "inuse_space") > value(s, "alloc_space")
            || value(s, "inuse_objects") > value(s, "alloc_objects")
    });
    for t in &original.sample_type {
        let ty = string(t.r#type);
        match ty {
            "inuse_objects" | "inuse_space" => {}
            "alloc_objects" | "alloc_space" if !raised => {}
            _ => continue,
        }
        let want: BTreeMap<String, i64> =
            ember_pprof::folded_stacks(original, type_index(original, ty))
                .into_iter()
                .collect();
        same(&folded(back, ty), &want, &format!("{name}: {ty}"));
    }
}

/// Equal maps, or a failure naming the first few differences (not both whole maps).
fn same(got: &BTreeMap<String, i64>, want: &BTreeMap<String, i64>, what: &str) {
    let diff: Vec<String> = want
        .iter()
        .filter(|(k, v)| got.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: want {v}, got {:?}", got.get(k)))
        .chain(
            got.keys()
                .filter(|k| !want.contains_key(*k))
                .map(|k| format!("{k}: unexpected")),
        )
        .take(3)
        .collect();
    assert!(diff.is_empty(), "{what}: {} stacks, {diff:#?}", want.len());
}

/// A gzip'd trace is read too (the detector gunzips first), through a real file.
#[test]
fn detector_reads_a_trace_file() {
    // Removed with its content when the guard drops, at the end of the test.
    let dir = tempfile::tempdir().expect("temp dir");
    let dir = dir.path();
    let path = dir.join("t.pftrace.gz");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &data("callstacks_annotate.pftrace")).unwrap();
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    match ember_formats::read_input(&path).unwrap() {
        Input::Pprof(p) => assert_eq!(total(&p, 0), 2),
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(dir).ok();
}

/// pprof files are never taken for traces (their first field is a `ValueType` of varints).
#[test]
fn pprof_corpus_is_not_a_trace() {
    for (path, _) in proto_files() {
        let bytes = ember_formats::input::read_bytes(&path).unwrap();
        assert!(!looks_like_trace(&bytes), "{}", path.display());
        assert_eq!(classify(&bytes), Kind::Pprof, "{}", path.display());
    }
}

/// Cut anywhere, a trace is an error naming the offset (or, cut at a packet boundary, a
/// shorter valid trace); random bytes and bit flips never panic.
#[test]
fn cut_and_corrupt_traces_are_errors_not_panics() {
    for name in [
        "callstacks_annotate.pftrace",
        "heap_profile_dump_max.pftrace",
        "perf_sample_followers.pftrace",
    ] {
        let bytes = data(name);
        for cut in 0..bytes.len() {
            match read_trace(&bytes[..cut]) {
                Ok(_) => {}
                Err(PerfettoError::Truncated { offset }) => assert!(offset < cut),
                Err(e) => assert!(!e.to_string().is_empty()),
            }
            let path = Path::new(name);
            if let Err(e) = decode_as(&bytes[..cut], Kind::Perfetto, path) {
                assert!(e.to_string().starts_with(name), "{e}");
            }
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..2000 {
            let mut flipped = bytes.clone();
            let at = next() as usize % flipped.len();
            flipped[at] ^= 1 << (next() % 8);
            let _ = read_trace(&flipped);
            let random: Vec<u8> = (0..next() % 300).map(|_| next() as u8).collect();
            let _ = read_trace(&random);
            let _ = classify(&random);
        }
    }
    let err = read_trace(&[0x0a, 0x05, 0x40]).unwrap_err();
    assert_eq!(err.to_string(), "trace cut short at byte 0");
}

mod built {
    //! Traces built here with the proto types, for what Perfetto's test traces above do not
    //! cover: heapprofd dumps split over packets and repeated over time, Chrome's sampler,
    //! compressed packets, and a sequence whose interned state is cleared.

    use super::{expect, folded};
    use ember_formats::perfetto::proto::*;
    use ember_formats::perfetto::{read_trace, trace_to_profile};
    use prost::Message;

    fn interned(names: &[&str]) -> InternedData {
        let n = names.len() as u64;
        InternedData {
            function_names: (1..=n)
                .map(|i| InternedString {
                    iid: i,
                    str: names[i as usize - 1].as_bytes().to_vec(),
                })
                .collect(),
            frames: (1..=n)
                .map(|i| Frame {
                    iid: i,
                    function_name_id: i,
                    ..Default::default()
                })
                .collect(),
            // Callstack k: frames 1..=k, root first.
            callstacks: (1..=n)
                .map(|k| Callstack {
                    iid: k,
                    frame_ids: (1..=k).collect(),
                })
                .collect(),
            ..Default::default()
        }
    }

    fn packet(seq: u32, ts: u64) -> TracePacket {
        TracePacket {
            trusted_packet_sequence_id: seq,
            timestamp: ts,
            ..Default::default()
        }
    }

    fn dump(pid: u64, callstack: u64, allocated: u64, freed: u64) -> ProcessHeapSamples {
        ProcessHeapSamples {
            pid,
            samples: vec![HeapSample {
                callstack_id: callstack,
                self_allocated: allocated,
                self_freed: freed,
                alloc_count: 1,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn heap(continued: bool, dumps: Vec<ProcessHeapSamples>) -> Option<ProfilePacket> {
        Some(ProfilePacket {
            process_dumps: dumps,
            continued,
            ..Default::default()
        })
    }

    /// A dump split over two packets (`continued`) counts whole; a later dump of the same
    /// process supersedes it (values are totals since the start); another process's dump
    /// stays.
    #[test]
    fn heapprofd_dumps_chain_and_supersede() {
        let mut first = packet(1, 5);
        first.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED;
        first.interned_data = Some(interned(&["main", "alloc"]));
        let mut part1 = packet(1, 10);
        part1.profile_packet = heap(true, vec![dump(7, 2, 100, 0)]);
        let mut part2 = packet(1, 11);
        part2.profile_packet = heap(false, vec![dump(7, 1, 50, 0), dump(8, 1, 3, 0)]);
        let trace = Trace {
            packet: vec![first, part1, part2],
        };
        let p = trace_to_profile(&trace.encode_to_vec()).unwrap();
        assert_eq!(
            folded(&p, "alloc_space"),
            expect(&[("main", 53), ("main;alloc", 100)])
        );
        let mut later = packet(1, 30);
        later.profile_packet = heap(false, vec![dump(7, 2, 400, 150)]);
        let mut trace = trace;
        trace.packet.push(later);
        let p = trace_to_profile(&trace.encode_to_vec()).unwrap();
        assert_eq!(
            folded(&p, "alloc_space"),
            expect(&[("main", 3), ("main;alloc", 400)])
        );
        assert_eq!(
            folded(&p, "inuse_space"),
            expect(&[("main", 3), ("main;alloc", 250)])
        );
    }

    /// Chrome's `StreamingProfilePacket`: one sample per callstack iid, times from the
    /// deltas; inside `compressed_packets` the same; after the sequence is cleared, an iid
    /// means what the new interned data says.
    #[test]
    fn chrome_samples_compressed_packets_and_cleared_state() {
        let mut first = packet(3, 1_000);
        first.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED;
        first.interned_data = Some(interned(&["a", "b", "c"]));
        let mut samples = packet(3, 2_000);
        samples.streaming_profile_packet = Some(StreamingProfilePacket {
            callstack_iid: vec![3, 3, 2],
            timestamp_delta_us: vec![1, 10, 10],
        });
        let mut cleared = packet(3, 3_000);
        cleared.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED;
        cleared.interned_data = Some(interned(&["x", "y"]));
        let mut again = packet(3, 4_000);
        again.streaming_profile_packet = Some(StreamingProfilePacket {
            callstack_iid: vec![2],
            timestamp_delta_us: vec![0],
        });
        let plain = Trace {
            packet: vec![first, samples, cleared, again],
        }
        .encode_to_vec();
        let want = expect(&[("a;b", 1), ("a;b;c", 2), ("x;y", 1)]);
        let p = trace_to_profile(&plain).unwrap();
        assert_eq!(folded(&p, "samples"), want);
        assert_eq!(p.time_nanos, 3_000);
        // 2,000 ns + 1 µs, then 10 µs twice: the last sample at 23,000 ns.
        assert_eq!(p.duration_nanos, 20_000);

        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, &plain).unwrap();
        let mut wrapper = packet(0, 0);
        wrapper.compressed_packets = z.finish().unwrap();
        let compressed = Trace {
            packet: vec![wrapper],
        }
        .encode_to_vec();
        let read = read_trace(&compressed).unwrap();
        assert_eq!(read.stats.packets, 4);
        assert_eq!(folded(read.cpu.as_ref().unwrap(), "samples"), want);
        // A sample naming a callstack its sequence never interned is dropped, and said so.
        let mut dangling = packet(3, 5_000);
        dangling.streaming_profile_packet = Some(StreamingProfilePacket {
            callstack_iid: vec![2, 9],
            timestamp_delta_us: vec![0, 0],
        });
        let mut trace = Trace::decode(plain.as_slice()).unwrap();
        trace.packet.push(dangling);
        let p = trace_to_profile(&trace.encode_to_vec()).unwrap();
        assert_eq!(folded(&p, "samples")["x;y"], 2);
        let comments: Vec<&str> = p
            .comment
            .iter()
            .map(|&i| p.string_table[i as usize].as_str())
            .collect();
        assert_eq!(
            comments,
            [
                "perfetto: 1 samples dropped: their callstack or frames were never interned on their sequence"
            ]
        );
        // A blob that does not inflate is an error naming the packet.
        let mut bad = packet(0, 0);
        bad.compressed_packets = vec![0x78, 0x9c, 1, 2, 3];
        let err = read_trace(&Trace { packet: vec![bad] }.encode_to_vec()).unwrap_err();
        assert!(
            err.to_string().starts_with("compressed packets at byte 0"),
            "{err}"
        );
    }
}
