//! The block writer's rollups and time chunks, byte for byte against the encoders they
//! replaced (session 16's, kept here as the reference: they sorted each profile's and each
//! series' `(frame, value)` pairs), on generated heads: several services, pods and sample
//! types, stacks sharing frames through other addresses and inlined functions, sample
//! label sets, negative values and values cancelling to zero, an averaged series, profiles
//! spread over several ten-minute windows, and one writer reused over heads of different
//! sizes (its buffers must start clean for each chunk).

use std::collections::BTreeMap;

use crate::chunks::{ChunkWriter, Pending, plan};
use crate::encoding::{gcd, put_signed, put_str, put_varint};
use crate::head::{FunctionSym, LocationSym, MappingSym, Series, StoredProfile, TenantHead};

/// The reference: sorts `(frame, value)` pairs, adds up repeats, drops zero sums.
fn sum_sorted(frames: &mut Vec<(u32, i64)>) {
    frames.sort_unstable_by_key(|f| f.0);
    frames.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = kept.1.saturating_add(later.1);
        }
        same
    });
    frames.retain(|f| f.1 != 0);
}

/// The reference rollup encoder (per node sums, then per frame, sorted).
fn reference_rollup(head: &TenantHead, series: &[&Series], out: &mut Vec<u8>) {
    let mut node_sums = vec![0i64; head.node_count()];
    let mut per_series: Vec<Option<Vec<(u32, i64)>>> = Vec::new();
    let mut used = vec![false; head.frame_count()];
    for s in series {
        if crate::read::averaged_labels(&s.labels) {
            per_series.push(None);
            continue;
        }
        let mut touched: Vec<u32> = Vec::new();
        for p in &s.profiles {
            for (n, v) in p.nodes.iter().zip(&p.values) {
                let e = &mut node_sums[*n as usize];
                if *e == 0 {
                    touched.push(*n);
                }
                *e = e.saturating_add(*v);
            }
        }
        let mut frames = Vec::new();
        for n in touched {
            let v = std::mem::take(&mut node_sums[n as usize]);
            if v != 0 {
                frames.push((head.frame_of(n), v));
            }
        }
        sum_sorted(&mut frames);
        for (f, _) in &frames {
            used[*f as usize] = true;
        }
        per_series.push(Some(frames));
    }
    for f in (1..used.len()).rev() {
        if used[f] {
            used[head.frame_parent(f as u32) as usize] = true;
        }
    }
    let mut new_id = vec![0u32; used.len()];
    let mut kept = Vec::new();
    for f in 1..used.len() {
        if used[f] {
            kept.push(f as u32);
            new_id[f] = kept.len() as u32;
        }
    }
    let mut names: Vec<u32> = vec![0];
    let mut name_id = std::collections::HashMap::from([(0u32, 0u32)]);
    let frame_names: Vec<u32> = kept
        .iter()
        .map(|f| {
            *name_id.entry(head.frame_name(*f)).or_insert_with(|| {
                names.push(head.frame_name(*f));
                names.len() as u32 - 1
            })
        })
        .collect();
    put_varint(out, names.len() as u64);
    for n in &names {
        put_str(out, head.string(*n));
    }
    put_varint(out, kept.len() as u64);
    for (i, f) in kept.iter().enumerate() {
        put_varint(
            out,
            u64::from(i as u32 + 1 - new_id[head.frame_parent(*f) as usize]),
        );
    }
    for n in &frame_names {
        put_varint(out, u64::from(*n));
    }
    for s in &per_series {
        let Some(frames) = s else {
            put_varint(out, 0);
            continue;
        };
        put_varint(out, 1 + frames.len() as u64);
        let mut last = 0;
        for (f, _) in frames {
            put_varint(out, u64::from(new_id[*f as usize] - last));
            last = new_id[*f as usize];
        }
        for (_, v) in frames {
            put_signed(out, *v);
        }
    }
}

/// The reference chunk encoder (each profile's pairs sorted by frame).
fn reference_chunk(head: &TenantHead, chunk: &Pending<'_>, out: &mut Vec<u8>) {
    out.clear();
    let entries: Vec<Vec<(u32, i64)>> = chunk
        .runs
        .iter()
        .flat_map(|r| r.2.iter())
        .map(|p| {
            let mut e: Vec<(u32, i64)> = p
                .nodes
                .iter()
                .zip(&p.values)
                .map(|(n, v)| (head.frame_of(*n), *v))
                .collect();
            sum_sorted(&mut e);
            e
        })
        .collect();
    let mut kept = std::collections::BTreeSet::new();
    for &(f, _) in entries.iter().flatten() {
        let mut f = f;
        while f != 0 && kept.insert(f) {
            f = head.frame_parent(f);
        }
    }
    let kept: Vec<u32> = kept.into_iter().collect();
    let id = |f: u32| {
        if f == 0 {
            0
        } else {
            kept.binary_search(&f).unwrap() as u32 + 1
        }
    };
    let mut names: Vec<u32> = vec![0];
    let mut name_id = std::collections::HashMap::from([(0u32, 0u32)]);
    let frame_names: Vec<u32> = kept
        .iter()
        .map(|f| {
            *name_id.entry(head.frame_name(*f)).or_insert_with(|| {
                names.push(head.frame_name(*f));
                names.len() as u32 - 1
            })
        })
        .collect();
    put_varint(out, names.len() as u64);
    for n in &names {
        put_str(out, if *n == 0 { "" } else { head.string(*n) });
    }
    put_varint(out, kept.len() as u64);
    for (i, f) in kept.iter().enumerate() {
        put_varint(out, u64::from(i as u32 + 1 - id(head.frame_parent(*f))));
    }
    for n in &frame_names {
        put_varint(out, u64::from(*n));
    }
    put_varint(out, entries.len() as u64);
    for e in &entries {
        put_varint(out, e.len() as u64);
        let mut last = 0;
        for &(f, _) in e {
            put_varint(out, u64::from(id(f) - last));
            last = id(f);
        }
        let g = e.iter().fold(0u64, |g, x| gcd(g, x.1.unsigned_abs()));
        let g = i64::try_from(g).unwrap_or(1).max(1);
        put_varint(out, g as u64);
        for &(_, v) in e {
            put_signed(out, v / g);
        }
    }
}

/// xorshift64: a seeded stream of numbers below `n`.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// A generated head of `size` (stacks, profiles) from `seed`.
fn generated(seed: u64, size: usize) -> TenantHead {
    let mut rng = Rng(seed);
    let mut h = TenantHead::new();
    let file = h.intern("/bin/app");
    let mapping = h.mapping(MappingSym {
        start: 0x1000,
        limit: 0xffff_ffff,
        offset: 0,
        filename: file,
        build_id: 0,
        flags: 1,
    }) + 1;
    // Fewer functions than locations: functions recur at other addresses and inlined.
    let functions: Vec<u32> = (0..4 * size)
        .map(|i| {
            let name = h.intern(&format!("pkg.fn{i}"));
            h.function(FunctionSym {
                name,
                system_name: name,
                filename: file,
                start_line: i as i64,
            })
        })
        .collect();
    let locations: Vec<u32> = (0..8 * size)
        .map(|i| {
            let lines: Box<[(u32, i64)]> = match rng.below(6) {
                // Address only: named by its address.
                0 => Box::new([]),
                1 => Box::new([
                    (functions[rng.below(functions.len() as u64) as usize], 7),
                    (functions[rng.below(functions.len() as u64) as usize], 9),
                ]),
                _ => Box::new([(functions[rng.below(functions.len() as u64) as usize], 3)]),
            };
            h.location(LocationSym {
                mapping,
                address: 0x1000 + 16 * i as u64,
                lines,
                is_folded: false,
            })
        })
        .collect();
    let stacks: Vec<u32> = (0..16 * size)
        .map(|_| {
            let depth = 1 + rng.below(9) as usize;
            // Roots from a few locations, so stacks share prefixes.
            let mut s: Vec<u32> = (0..depth)
                .map(|d| locations[rng.below(if d == 0 { 3 } else { 8 * size as u64 }) as usize])
                .collect();
            s.reverse();
            h.stack(&s)
        })
        .collect();
    let span = h.intern("span_id");
    let sets: Vec<u32> = ["a", "b", "c"]
        .iter()
        .map(|v| {
            let v = h.intern(v);
            h.label_set(&mut vec![(span, v)])
        })
        .collect();
    let day = 1_795_737_600_000_000_000i64;
    for service in ["api", "db", "web"] {
        for pod in ["p0", "p1"] {
            for kind in ["cpu", "alloc", "mean"] {
                let mut labels = vec![
                    ("__name__".to_string(), kind.to_string()),
                    ("pod".to_string(), pod.to_string()),
                    ("service_name".to_string(), service.to_string()),
                ];
                if kind == "mean" {
                    if pod == "p1" {
                        continue;
                    }
                    labels.push(("__aggregation_type__".into(), "average".into()));
                }
                let mut t = day + rng.below(600) as i64 * 1_000_000_000;
                for _ in 0..1 + rng.below(size as u64) {
                    t += (1 + rng.below(400) as i64) * 1_000_000_000;
                    let labelled = rng.below(3) == 0;
                    let mut entries: Vec<(u32, u32, i64)> = (0..1 + rng.below(3 * size as u64))
                        .map(|_| {
                            let node = stacks[rng.below(stacks.len() as u64) as usize];
                            let set = if labelled {
                                sets[rng.below(3) as usize]
                            } else {
                                0
                            };
                            let value = match rng.below(20) {
                                0 => -10 * rng.below(50) as i64,
                                1 => 0,
                                _ => 10 * (1 + rng.below(1000) as i64),
                            };
                            (node, set, value)
                        })
                        .collect();
                    // A value and its negation on two nodes of one frame: a zero frame sum.
                    if let Some(&(node, set, v)) = entries.first()
                        && rng.below(4) == 0
                    {
                        let other = if set == sets[0] { sets[1] } else { sets[0] };
                        entries.push((node, if labelled { other } else { 0 }, -v));
                    }
                    entries.sort_unstable_by_key(|e| (e.0, e.1));
                    entries.dedup_by_key(|e| (e.0, e.1));
                    h.insert_with_period(
                        labels.clone(),
                        StoredProfile {
                            time_nanos: t,
                            nodes: entries.iter().map(|e| e.0).collect(),
                            values: entries.iter().map(|e| e.2).collect(),
                            sets: if labelled {
                                entries.iter().map(|e| e.1).collect()
                            } else {
                                Vec::new()
                            },
                        },
                        10,
                    );
                }
            }
        }
    }
    h
}

/// Per profile of a decoded chunk, its frames' paths with their sums (zero sums dropped, as
/// every read drops them).
fn chunk_sums(c: &crate::chunks::Chunk, profiles: usize) -> Vec<BTreeMap<String, i64>> {
    let path = |f: u32| c.path(f);
    (0..profiles)
        .map(|j| {
            let mut sums: BTreeMap<String, i64> = BTreeMap::new();
            c.for_each_entry(j..j + 1, |f, v| *sums.entry(path(f)).or_default() += v);
            sums.retain(|_, v| *v != 0);
            sums
        })
        .collect()
}

/// Rollups are byte for byte what the sorting encoder wrote; time chunks (which now hold
/// the profiles' columns) give back every profile's columns exactly, and the same frame
/// sums per profile as the fourth format's chunks the sorting encoder wrote.
#[test]
fn rollups_and_chunks_are_byte_for_byte_what_the_sorting_encoders_wrote() {
    let mut writer = ChunkWriter::default();
    let mut scratch = crate::block::fold::SlotSums::default();
    let mut chunks_seen = 0;
    for (seed, size) in [(1u64, 3usize), (2, 40), (3, 1), (4, 25), (5, 60)] {
        let head = generated(0x9e37_79b9_7f4a_7c15 ^ seed, size);
        let series: Vec<&Series> = head
            .all_series()
            .filter(|s| !s.profiles.is_empty())
            .collect();
        let (mut new, mut old) = (Vec::new(), Vec::new());
        crate::rollup::encode(&head, &series, &mut new, &mut scratch);
        reference_rollup(&head, &series, &mut old);
        assert_eq!(new, old, "rollup, seed {seed}");
        let planned = plan(&series);
        assert!(planned.len() > 3 || size < 5, "several windows per service");
        for (i, chunk) in planned.iter().enumerate() {
            writer.encode(&head, chunk, &mut new);
            reference_chunk(&head, chunk, &mut old);
            let n: usize = chunk.runs.iter().map(|r| r.2.len()).sum();
            let now = crate::chunks::Chunk::decode(new.clone(), n, true).unwrap();
            let before = crate::chunks::Chunk::decode(old.clone(), n, false).unwrap();
            assert_eq!(
                chunk_sums(&now, n),
                chunk_sums(&before, n),
                "chunk {i}, seed {seed}"
            );
            let mut p = StoredProfile::default();
            for (j, want) in chunk.runs.iter().flat_map(|r| r.2).enumerate() {
                assert!(now.profile_columns(j, &mut p));
                assert_eq!(
                    (&p.nodes, &p.values, &p.sets),
                    (&want.nodes, &want.values, &want.sets),
                    "chunk {i}, profile {j}, seed {seed}"
                );
            }
            assert!(
                !before.profile_columns(0, &mut p),
                "the fourth format has none"
            );
            chunks_seen += 1;
        }
    }
    assert!(chunks_seen > 20);
}

#[test]
fn streamed_merge_equals_merge_through_a_head() {
    // Inputs of overlapping times, one of them twice (equal times: the earlier input's
    // profile first), with labelled, unlabelled and averaged series.
    for seeds in [[11u64, 12, 13], [21, 21, 22], [31, 32, 33]] {
        let heads: Vec<TenantHead> = seeds
            .iter()
            .enumerate()
            .map(|(i, s)| generated(0x2545_f491_4f6c_dd1d ^ s, 5 + 12 * i))
            .collect();
        let encoded: Vec<Vec<u8>> = heads
            .iter()
            .map(|h| {
                let mut b = Vec::new();
                h.encode(&mut b);
                b
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        // Every piece decompressed, and what the index says (the streamed head is another
        // zstd frame of the same bytes, so offsets differ).
        let write = |name: &str, f: &dyn Fn(&mut super::BlockWriter)| -> Vec<Vec<u8>> {
            let objects = crate::objects::Objects::local(&dir.path().join(name), "").unwrap();
            let mut w = super::BlockWriter::new();
            f(&mut w);
            let block = w.finish(&objects, 7).unwrap().unwrap();
            let mut out = Vec::new();
            for s in &block.sections {
                out.push(s.raw(&objects).unwrap());
                let (at, len) = s.rollup.unwrap();
                out.push(s.unpack(&objects, at, len).unwrap());
                for c in &s.chunks {
                    out.push(s.unpack(&objects, c.offset, c.len).unwrap());
                }
                let index = format!(
                    "{} {} {} {:?} {:?} {:?} {:?}",
                    s.tenant,
                    s.min_time,
                    s.max_time,
                    s.series,
                    s.sample_keys,
                    s.runs,
                    s.chunks.iter().map(|c| c.profiles).collect::<Vec<_>>()
                );
                out.push(index.into_bytes());
            }
            out
        };
        let through_head = write("head", &|w| {
            let mut merged = TenantHead::new();
            for e in &encoded {
                merged.merge_encoded(e).unwrap();
            }
            w.add("t", &merged);
        });
        let streamed = write("streamed", &|w| {
            let mut merged = TenantHead::new();
            let inputs: Vec<super::merge::Input> = encoded
                .iter()
                .map(|e| super::merge::Input::read(&mut merged, e.clone()).unwrap())
                .collect();
            w.add_merged("t", &merged, &inputs).unwrap();
        });
        assert!(through_head == streamed, "seeds {seeds:?}");
    }
    // A damaged input is refused, never a panic.
    let mut b = Vec::new();
    generated(5, 8).encode(&mut b);
    for cut in [1, b.len() / 2, b.len() - 1] {
        assert!(super::merge::Input::read(&mut TenantHead::new(), b[..cut].to_vec()).is_none());
    }
    for f in crate::encoding::flipped(&b, 0x9e37_79b9_7f4a_7c15, 500) {
        let mut merged = TenantHead::new();
        if let Some(input) = super::merge::Input::read(&mut merged, f) {
            let mut w = super::BlockWriter::new();
            w.add_merged("t", &merged, &[input]).unwrap();
        }
    }
}
