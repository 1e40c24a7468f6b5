//! Applying a decoded profile to a tenant's head: finding each distinct stack by its
//! fingerprint, interning the mappings, functions and locations of new stacks and walking
//! them into the shared stack tree once, and storing one profile per sample type. The same code runs for live ingest, log replay and flush, so the
//! head is built identically either way.

use ember_pprof::{DecodeLimits, ProfileView};

use crate::ingest::IngestRecord;
use crate::{Labels, StoredProfile, TenantHead, head, series_labels};

pub(crate) mod spare;
mod symbols;

use symbols::ProfileSymbols;

/// Decodes a logged profile (gzip'd or raw) and runs `f` on it; the error says why it could
/// not be decoded.
pub(crate) fn with_view<T>(
    bytes: &[u8],
    f: impl FnOnce(&ProfileView<'_>) -> T,
) -> Result<T, ember_pprof::PprofError> {
    let raw = ember_pprof::decompress(bytes, &DecodeLimits::default())?;
    let view = spare::parse(&raw, u64::MAX)?;
    let out = f(&view);
    spare::give_back(view);
    Ok(out)
}

/// Adds one logged record's profile to `head` (replay, flush): one series per sample type.
pub(crate) fn apply_record(
    head: &mut TenantHead,
    record: &IngestRecord,
    profile: &ProfileView<'_>,
) -> usize {
    let series = series_labels(&record.label_list(), profile);
    apply_to(
        head,
        record.time_nanos,
        record.received_nanos,
        profile,
        series,
    )
}

/// Adds a profile to `head` under `label_sets` (one per sample type), at `time_nanos` if
/// set, else at the profile's own time, else at `received_nanos`. Returns the number of
/// series written to.
pub(crate) fn apply_to(
    head: &mut TenantHead,
    time_nanos: i64,
    received_nanos: i64,
    profile: &ProfileView<'_>,
    label_sets: Vec<Labels>,
) -> usize {
    let time = profile_time(time_nanos, profile.time_nanos, received_nanos);
    let per_type = stacks_of(head, profile);
    let n = label_sets.len();
    for (labels, mut entries) in label_sets.into_iter().zip(per_type) {
        entries.retain(|e| e.2 != 0);
        entries.sort_unstable();
        let labelled = entries.iter().any(|e| e.1 != 0);
        head.insert_with_period(
            labels,
            StoredProfile {
                time_nanos: time,
                nodes: entries.iter().map(|e| e.0).collect(),
                values: entries.iter().map(|e| e.2).collect(),
                sets: if labelled {
                    entries.iter().map(|e| e.1).collect()
                } else {
                    Vec::new()
                },
            },
            profile.period,
        );
    }
    n
}

/// The time a profile is stored at: the ingest's override if set, else the profile's own
/// time, else when it was received (ingest checks this time against its window).
pub(crate) fn profile_time(override_nanos: i64, own_nanos: i64, received_nanos: i64) -> i64 {
    if override_nanos != 0 {
        override_nanos
    } else if own_nanos != 0 {
        own_nanos
    } else {
        received_nanos
    }
}

/// Finds or makes the stack node of every distinct stack of the profile and the label set
/// of every sample, and sums values per leaf node and label set: one `(node, label set,
/// value)` list per sample type (unsorted, may hold zeros).
///
/// A stack is looked up by the fingerprint of its locations' content, computed from the
/// profile's own bytes; only the stacks the head does not know yet have their locations
/// interned (with their functions, mappings and strings) and walked into the tree. In a
/// steady fleet nearly every stack is known, so a profile costs hashing, not interning.
fn stacks_of(head: &mut TenantHead, profile: &ProfileView<'_>) -> Vec<Vec<(u32, u32, i64)>> {
    let mut symbols = ProfileSymbols::new(head, profile);
    let n_types = profile.sample_type.len();
    // Samples often repeat a stack (Go profiles split samples by labels, e.g. span ids):
    // each distinct stack is looked up once. `distinct[k]` is the k-th distinct stack's key
    // and pprof location ids; `of_sample[i]` is sample i's k (None when all its values are
    // zero). Sized for the profile up front: growing these maps rehashed them ~10 times.
    let samples = profile.sample.len();
    let mut by_ids: head::FastMap<&[u64], usize> =
        head::FastMap::with_capacity_and_hasher(samples, Default::default());
    let mut distinct: Vec<(u128, &[u64])> = Vec::with_capacity(samples);
    let mut of_sample: Vec<Option<usize>> = Vec::with_capacity(samples);
    for sample in &profile.sample {
        let (ids, values) = profile.sample_data(sample);
        if values.iter().all(|v| *v == 0) {
            of_sample.push(None);
            continue;
        }
        let k = *by_ids.entry(ids).or_insert_with(|| {
            distinct.push((symbols.stack_key(ids), ids));
            distinct.len() - 1
        });
        of_sample.push(Some(k));
    }
    let mut leaves = head.known_stacks(distinct.iter().map(|d| d.0));
    // The new stacks: their locations interned, then walked into the tree together.
    let mut flat: Vec<u32> = Vec::new();
    let mut ranges: Vec<(u128, std::ops::Range<usize>)> = Vec::new();
    for ((key, ids), leaf) in distinct.iter().zip(&leaves) {
        if leaf.is_none() {
            let start = flat.len();
            for id in ids.iter() {
                if let Some(at) = profile.location_position(*id) {
                    flat.push(symbols.location(head, at));
                }
            }
            ranges.push((*key, start..flat.len()));
        }
    }
    let new: Vec<(u128, &[u32])> = ranges.iter().map(|(k, r)| (*k, &flat[r.clone()])).collect();
    let mut made = head.walk_stacks(&new).into_iter();
    for leaf in leaves.iter_mut().filter(|l| l.is_none()) {
        *leaf = made.next();
    }
    let mut sums: head::FastMap<(u32, u32), usize> =
        head::FastMap::with_capacity_and_hasher(distinct.len(), Default::default());
    let mut out: Vec<Vec<(u32, u32, i64)>> = (0..n_types)
        .map(|_| Vec::with_capacity(distinct.len()))
        .collect();
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    // Label set by the sample's labels as the profile sends them (string table indexes).
    let mut sets_of: head::FastMap<&[ember_pprof::Label], u32> = head::FastMap::default();
    for (sample, k) in profile.sample.iter().zip(of_sample) {
        let Some(&Some(node)) = k.and_then(|k| leaves.get(k)) else {
            continue;
        };
        let raw_labels = profile
            .sample_labels
            .get(sample.label.clone())
            .unwrap_or(&[]);
        let set = if raw_labels.is_empty() {
            0
        } else if let Some(&set) = sets_of.get(raw_labels) {
            // The same labels as an earlier sample (a thread and an endpoint, typically):
            // found in this small table instead of sorting them and looking the set up in
            // the head's, which holds every span id's set.
            set
        } else {
            pairs.clear();
            for l in raw_labels {
                let value = if l.str != 0 {
                    symbols.string(head, l.str)
                } else {
                    // A numeric label (Go heap profiles' `bytes`) is kept as its decimal text.
                    head.intern(&l.num.to_string())
                };
                pairs.push((symbols.string(head, l.key), value));
            }
            let set = head.label_set(&mut pairs);
            sets_of.insert(raw_labels, set);
            set
        };
        let (_, values) = profile.sample_data(sample);
        // Samples with the same stack and labels add up.
        let slot = *sums.entry((node, set)).or_insert_with(|| {
            for o in out.iter_mut() {
                o.push((node, set, 0));
            }
            out.first().map_or(0, |o| o.len() - 1)
        });
        for (i, v) in values.iter().enumerate().take(n_types) {
            if let Some(e) = out.get_mut(i).and_then(|o| o.get_mut(slot)) {
                e.2 = e.2.saturating_add(*v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_pprof::ProfileBuilder;

    /// A profile of one sample `leaf <- main` (leaf first), its functions declared in the
    /// given order (so pprof ids differ between calls), `leaf` in `file` at `line`, plus
    /// `unused` locations no sample refers to.
    fn profile(leaf_first: bool, file: &str, line: i64, unused: usize) -> Vec<u8> {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
        let (leaf, main) = if leaf_first {
            let leaf = b.function("serve", "serve", file);
            (leaf, b.function("main", "main", "main.go"))
        } else {
            let main = b.function("main", "main", "main.go");
            (b.function("serve", "serve", file), main)
        };
        for i in 0..unused {
            let f = b.function(&format!("unused{i}"), "", "x.go");
            b.location(m, 0x5000 + i as u64, &[(f, 1)]);
        }
        let l_main = b.location(m, 0x1100, &[(main, 3)]);
        let l_leaf = b.location(m, 0x1200, &[(leaf, line)]);
        b.add_sample(&[l_leaf, l_main], &[5], &[]);
        ember_pprof::encode(&b.build())
    }

    /// `leaf <- main` where `leaf` is named `name` at address 0x1200, `main` at 0x1100,
    /// plus, with `deeper`, a third frame `inner` at 0x1300 under `leaf` (a new stack of
    /// known locations).
    fn named(name: &str, deeper: bool) -> Vec<u8> {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
        let main = b.function("main", "main", "main.go");
        let leaf = b.function(name, name, "serve.go");
        let l_main = b.location(m, 0x1100, &[(main, 3)]);
        let l_leaf = b.location(m, 0x1200, &[(leaf, 10)]);
        if deeper {
            let inner = b.function("inner", "inner", "serve.go");
            let l_inner = b.location(m, 0x1300, &[(inner, 20)]);
            b.add_sample(&[l_inner, l_leaf, l_main], &[5], &[]);
        }
        b.add_sample(&[l_leaf, l_main], &[5], &[]);
        ember_pprof::encode(&b.build())
    }

    #[test]
    fn a_function_renamed_at_the_same_address_is_a_new_location_not_a_stale_one() {
        let mut head = TenantHead::new();
        let before = apply(&mut head, &named("serve", true), 1);
        let locations = head.symbol_table_sizes().3;
        // A deploy renames the function; addresses, lines and pprof ids stay the same.
        let after = apply(&mut head, &named("serve_v2", true), 2);
        assert_eq!(
            head.symbol_table_sizes().3,
            locations + 1,
            "the renamed leaf only"
        );
        let paths: Vec<Vec<&str>> = after.iter().map(|n| head.path(*n)).collect();
        assert!(paths.contains(&vec!["main", "serve_v2"]), "{paths:?}");
        assert!(
            paths.contains(&vec!["main", "serve_v2", "inner"]),
            "{paths:?}"
        );
        assert!(before.iter().all(|n| !after.contains(n)));
        // And back: the old name's locations are found again, nothing new interned.
        let sizes = head.symbol_table_sizes();
        let again = apply(&mut head, &named("serve", true), 3);
        assert_eq!(again, before);
        assert_eq!(head.symbol_table_sizes(), sizes);
    }

    #[test]
    fn a_new_stack_of_known_locations_reuses_them_through_the_memo() {
        let mut head = TenantHead::new();
        // `inner` seen first in its own stack, then `serve <- main` and `inner` under it:
        // the new stack's three locations are all known.
        apply(&mut head, &named("serve", false), 1);
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
        let inner = b.function("inner", "inner", "serve.go");
        let l_inner = b.location(m, 0x1300, &[(inner, 20)]);
        b.add_sample(&[l_inner], &[1], &[]);
        apply(&mut head, &ember_pprof::encode(&b.build()), 2);
        let sizes = head.symbol_table_sizes();
        let nodes = apply(&mut head, &named("serve", true), 3);
        let (strings, mappings, functions, locations, _) = head.symbol_table_sizes();
        assert_eq!(
            (strings, mappings, functions, locations),
            (sizes.0, sizes.1, sizes.2, sizes.3)
        );
        let paths: Vec<Vec<&str>> = nodes.iter().map(|n| head.path(*n)).collect();
        assert!(paths.contains(&vec!["main", "serve", "inner"]), "{paths:?}");
        for n in &nodes {
            // Each location of the stack is the one interned before, with its file and line.
            for l in head.stack_locations(*n) {
                let loc = head.location_sym(l).unwrap();
                let f = head.function_sym(loc.lines[0].0).unwrap();
                let want = match head.string(f.name) {
                    "main" => (0x1100, 3),
                    "serve" => (0x1200, 10),
                    "inner" => (0x1300, 20),
                    other => panic!("unexpected {other}"),
                };
                assert_eq!((loc.address, loc.lines[0].1), want);
            }
        }
    }

    #[test]
    fn samples_with_the_same_labels_share_a_set_and_others_do_not() {
        use ember_pprof::SampleLabel::{Num, Str};
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
        let f = b.function("main", "main", "main.go");
        let locs: Vec<u64> = (0..6)
            .map(|i| b.location(m, 0x1100 + i, &[(f, 3)]))
            .collect();
        let samples: [&[ember_pprof::SampleLabel]; 6] = [
            &[Str("thread", "a"), Str("endpoint", "/x")],
            &[Str("thread", "a"), Str("endpoint", "/x")],
            &[Str("endpoint", "/x"), Str("thread", "a")],
            &[Str("thread", "b")],
            &[Num("bytes", 1, "")],
            &[Num("bytes", 2, "")],
        ];
        for (l, labels) in locs.iter().zip(samples) {
            b.add_sample(&[*l], &[1], labels);
        }
        let mut head = TenantHead::new();
        apply(&mut head, &ember_pprof::encode(&b.build()), 1);
        let p = head.all_series().next().unwrap().profiles[0].clone();
        let by_address = |addr: u64| {
            let i = (0..p.nodes.len())
                .find(|&i| {
                    let l = head.stack_locations(p.nodes[i])[0];
                    head.location_sym(l).unwrap().address == addr
                })
                .unwrap();
            let mut pairs: Vec<(String, String)> = head
                .label_set_pairs(p.set(i))
                .iter()
                .map(|(k, v)| (head.string(*k).to_string(), head.string(*v).to_string()))
                .collect();
            pairs.sort();
            (p.set(i), pairs)
        };
        let sets: Vec<(u32, Vec<(String, String)>)> =
            (0..6).map(|i| by_address(0x1100 + i)).collect();
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(sets[0].1, vec![pair("endpoint", "/x"), pair("thread", "a")]);
        assert_eq!(sets[1].0, sets[0].0);
        assert_eq!(sets[2].0, sets[0].0, "the same labels in another order");
        assert_eq!(sets[3].1, vec![pair("thread", "b")]);
        assert_eq!(sets[4].1, vec![pair("bytes", "1")]);
        assert_eq!(sets[5].1, vec![pair("bytes", "2")]);
        let distinct: std::collections::BTreeSet<u32> = sets.iter().map(|s| s.0).collect();
        assert_eq!(distinct.len(), 4);
    }

    /// Applies `raw` to `head` as the next profile of one series; returns its leaf nodes.
    fn apply(head: &mut TenantHead, raw: &[u8], time: i64) -> Vec<u32> {
        let view = ProfileView::parse(raw).unwrap();
        let labels: Labels = vec![("service_name".into(), "app".into())];
        apply_to(head, time, 0, &view, vec![labels]);
        let series = head.all_series().next().unwrap();
        series.profiles.last().unwrap().nodes.clone()
    }

    #[test]
    fn a_stack_is_found_by_content_whatever_its_pprof_ids() {
        let mut head = TenantHead::new();
        let first = apply(&mut head, &profile(true, "serve.go", 10, 0), 1);
        let (nodes, locations) = (head.node_count(), head.symbol_table_sizes());
        // Same content, other ids, unused locations: the same leaf, nothing new interned.
        let again = apply(&mut head, &profile(false, "serve.go", 10, 3), 2);
        assert_eq!(again, first);
        assert_eq!(head.node_count(), nodes);
        assert_eq!(
            head.symbol_table_sizes(),
            locations,
            "unused locations not interned"
        );
        // A different file or line of the leaf's function is a different stack.
        let other_file = apply(&mut head, &profile(true, "other.go", 10, 0), 3);
        let other_line = apply(&mut head, &profile(true, "serve.go", 11, 0), 4);
        assert_ne!(other_file, first);
        assert_ne!(other_line, first);
        assert_ne!(other_line, other_file);
        assert_eq!(head.path(other_file[0]), head.path(first[0]), "same names");
        assert_eq!(head.stack_locations(first[0]).len(), 2);
    }
}
