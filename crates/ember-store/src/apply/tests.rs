//! Tests of applying profiles to a head: stacks found by content, symbols and label sets
//! remembered, every sample type checked against its source.

use super::*;
use ember_pprof::ProfileBuilder;
use std::collections::BTreeMap;

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
    let sets: Vec<(u32, Vec<(String, String)>)> = (0..6).map(|i| by_address(0x1100 + i)).collect();
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

#[test]
fn label_sets_remembered_across_profiles_are_the_sets_of_their_labels() {
    use ember_pprof::SampleLabel::{self, Num, Str};
    // Each profile interns its strings in another order, so the same labels have
    // other string table indexes in each.
    let one = |first: &str, labels: &[&[SampleLabel<'_>]]| {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let _ = b.function(first, first, "x.go");
        let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
        let f = b.function("main", "main", "main.go");
        for (i, l) in labels.iter().enumerate() {
            let loc = b.location(m, 0x1100 + i as u64, &[(f, 3)]);
            b.add_sample(&[loc], &[1], l);
        }
        ember_pprof::encode(&b.build())
    };
    let sets = |head: &TenantHead| -> Vec<Vec<(String, String)>> {
        let p = head.all_series().next().unwrap().profiles.last().unwrap();
        let mut by_address: Vec<(u64, Vec<(String, String)>)> = (0..p.nodes.len())
            .map(|i| {
                let l = head.stack_locations(p.nodes[i])[0];
                let mut pairs: Vec<(String, String)> = head
                    .label_set_pairs(p.set(i))
                    .iter()
                    .map(|(k, v)| (head.string(*k).into(), head.string(*v).into()))
                    .collect();
                pairs.sort();
                (head.location_sym(l).unwrap().address, pairs)
            })
            .collect();
        by_address.sort();
        by_address.into_iter().map(|x| x.1).collect()
    };
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    let mut head = TenantHead::new();
    apply(
        &mut head,
        &one(
            "a",
            &[
                &[Str("thread", "a"), Str("endpoint", "/x")],
                &[Num("bytes", 1, "")],
            ],
        ),
        1,
    );
    let count = head.label_set_count();
    apply(
        &mut head,
        &one(
            "endpoint",
            &[
                &[Str("thread", "a"), Str("endpoint", "/x")],
                &[Str("bytes", "1")],
                &[Str("thread", "b"), Str("endpoint", "/x")],
                &[Str("endpoint", "/x"), Str("thread", "a")],
            ],
        ),
        2,
    );
    assert_eq!(
        sets(&head),
        vec![
            vec![pair("endpoint", "/x"), pair("thread", "a")],
            vec![pair("bytes", "1")],
            vec![pair("endpoint", "/x"), pair("thread", "b")],
            vec![pair("endpoint", "/x"), pair("thread", "a")],
        ]
    );
    assert_eq!(
        head.label_set_count(),
        count + 1,
        "only thread b's set is new"
    );
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

/// Three one-frame samples: `f` and `g` in `file_f` and `file_g`, and a second `f` in
/// `b.go`, at the same addresses whatever the arguments; with `shuffled`, the strings
/// are interned in another order (other string indexes, one unused string).
fn files(file_f: &str, file_g: &str, shuffled: bool) -> Vec<u8> {
    let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
    let (f, g, f_b) = if shuffled {
        let _ = b.function("unused", "", "z.go");
        let f_b = b.function("f", "f", "b.go");
        let g = b.function("g", "g", file_g);
        (b.function("f", "f", file_f), g, f_b)
    } else {
        let f = b.function("f", "f", file_f);
        let g = b.function("g", "g", file_g);
        (f, g, b.function("f", "f", "b.go"))
    };
    for (i, func) in [f, g, f_b].into_iter().enumerate() {
        let l = b.location(m, 0x1100 + i as u64, &[(func, 7)]);
        b.add_sample(&[l], &[1], &[]);
    }
    ember_pprof::encode(&b.build())
}

#[test]
fn functions_sharing_a_file_keep_apart_and_a_file_counts_by_its_bytes() {
    // Source files are fingerprinted once per profile by their string: a file shared
    // by two functions, or met at another string index, must still stand for its bytes.
    let mut head = TenantHead::new();
    let first = apply(&mut head, &files("a.go", "a.go", false), 1);
    assert_eq!(first.len(), 3);
    let sizes = head.symbol_table_sizes();
    let again = apply(&mut head, &files("a.go", "a.go", true), 2);
    assert_eq!(again, first, "same content at other string indexes");
    assert_eq!(head.symbol_table_sizes(), sizes);
    // f moves to another file: its location is new, g's and the other f's are not.
    let moved = apply(&mut head, &files("c.go", "a.go", true), 3);
    assert_eq!(head.symbol_table_sizes().3, sizes.3 + 1);
    let (old, new): (Vec<u32>, Vec<u32>) = moved.iter().partition(|n| first.contains(n));
    assert_eq!((old.len(), new.len()), (2, 1));
    let file = |n: u32| {
        let l = head.location_sym(head.stack_locations(n)[0]).unwrap();
        let f = head.function_sym(l.lines[0].0).unwrap();
        head.string(f.filename).to_string()
    };
    assert_eq!(file(new[0]), "c.go");
}

/// What a profile says, per sample type, as `(stack of (address, [(function, line)])
/// leaf first, sorted sample labels) → sum`, zero sums left out: computed from the
/// decoded source, and from what the head stored.
type Sums = BTreeMap<(Vec<(u64, Vec<(String, i64)>)>, Vec<(String, String)>), i64>;

fn source_sums(p: &ember_pprof::Profile) -> Vec<Sums> {
    let s = |i: i64| p.string_table.get(i as usize).cloned().unwrap_or_default();
    let locations: std::collections::HashMap<u64, &ember_pprof::Location> =
        p.location.iter().map(|l| (l.id, l)).collect();
    let functions: std::collections::HashMap<u64, &ember_pprof::Function> =
        p.function.iter().map(|f| (f.id, f)).collect();
    let mut out = vec![Sums::new(); p.sample_type.len()];
    for sample in &p.sample {
        if sample.value.iter().all(|v| *v == 0) {
            continue;
        }
        let stack: Vec<(u64, Vec<(String, i64)>)> = sample
            .location_id
            .iter()
            .filter_map(|id| locations.get(id))
            .map(|l| {
                let lines = l
                    .line
                    .iter()
                    .filter_map(|line| {
                        let f = functions.get(&line.function_id)?;
                        Some((s(f.name), line.line))
                    })
                    .collect();
                (l.address, lines)
            })
            .collect();
        let mut labels: Vec<(String, String)> = sample
            .label
            .iter()
            .map(|l| {
                let v = if l.str != 0 {
                    s(l.str)
                } else {
                    l.num.to_string()
                };
                (s(l.key), v)
            })
            .collect();
        labels.sort();
        labels.dedup();
        for (t, v) in sample.value.iter().enumerate().take(out.len()) {
            let e = out[t].entry((stack.clone(), labels.clone())).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }
    for sums in &mut out {
        sums.retain(|_, v| *v != 0);
    }
    out
}

fn head_sums(head: &TenantHead, p: &StoredProfile) -> Sums {
    let mut out = Sums::new();
    for i in 0..p.nodes.len() {
        let stack = head
            .stack_locations(p.nodes[i])
            .into_iter()
            .map(|l| {
                let loc = head.location_sym(l).unwrap();
                let lines = loc
                    .lines
                    .iter()
                    .map(|(f, line)| {
                        let name = head.function_sym(*f).unwrap().name;
                        (head.string(name).to_string(), *line)
                    })
                    .collect();
                (loc.address, lines)
            })
            .collect();
        let mut labels: Vec<(String, String)> = head
            .label_set_pairs(p.set(i))
            .iter()
            .map(|(k, v)| (head.string(*k).to_string(), head.string(*v).to_string()))
            .collect();
        labels.sort();
        assert_ne!(p.values[i], 0, "zero sums are not stored");
        // Locations that differ in what this key leaves out (mapping, file) add up.
        let e = out.entry((stack, labels)).or_insert(0);
        *e = e.saturating_add(p.values[i]);
    }
    out.retain(|_, v| *v != 0);
    assert!(
        p.nodes
            .windows(2)
            .zip(0..)
            .all(|(w, i)| (w[0], p.set(i)) < (w[1], p.set(i + 1))),
        "entries sorted by node and set"
    );
    out
}

/// Applies `raw` under one series per sample type and checks every type's stored
/// profile against the source; returns the head.
fn check_against_source(head: &mut TenantHead, raw: &[u8], what: &str) {
    let view = ProfileView::parse(raw).unwrap();
    let want = source_sums(&view.to_profile());
    let labels: Vec<Labels> = (0..view.sample_type.len())
        .map(|t| vec![("t".to_string(), format!("{what}/{t}"))])
        .collect();
    apply_to(head, 1, 0, &view, labels.clone());
    for (t, labels) in labels.iter().enumerate() {
        let series = head.all_series().find(|s| &s.labels == labels);
        let got = match series.and_then(|s| s.profiles.last()) {
            Some(p) => head_sums(head, p),
            None => Sums::new(),
        };
        assert_eq!(got, want[t], "{what}, sample type {t}");
    }
}

/// Every file of the pprof and Pyroscope corpora under `tests/data/corpora`, sorted.
fn corpus_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora");
    let mut files = Vec::new();
    let mut dirs = vec![root.join("pprof"), root.join("pyroscope")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_sample_type_of_every_corpus_profile_stores_what_the_source_says() {
    let files = corpus_files();
    let mut checked = 0;
    // One head for all, so later profiles meet stacks, locations and label sets that
    // earlier ones made (the known-stack paths), and a fresh one for each.
    let mut shared = TenantHead::new();
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let Ok(raw) = ember_pprof::decompress(&bytes, &DecodeLimits::default()) else {
            continue;
        };
        if ProfileView::parse(&raw).map_or(true, |v| v.sample.is_empty()) {
            continue;
        }
        let what = path.display().to_string();
        check_against_source(&mut TenantHead::new(), &raw, &what);
        check_against_source(&mut shared, &raw, &what);
        check_against_source(&mut shared, &raw, &format!("{what} again"));
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} corpus profiles decoded");
}

#[test]
fn three_sample_types_with_zeros_in_some_store_each_type_apart() {
    use ember_pprof::SampleLabel::Str;
    let mut b = ProfileBuilder::new(&[
        ("alloc_objects", "count"),
        ("alloc_space", "bytes"),
        ("inuse_space", "bytes"),
    ]);
    let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
    let main = b.function("main", "main", "main.go");
    let f = b.function("alloc", "alloc", "alloc.go");
    let l_main = b.location(m, 0x1100, &[(main, 3)]);
    let l_f = b.location(m, 0x1200, &[(f, 7)]);
    let l_g = b.location(m, 0x1300, &[(f, 9)]);
    // Zeros in some types only, a stack repeated under other labels and under the
    // same ones, a sample of zeros only, values that cancel out in one type.
    b.add_sample(&[l_f, l_main], &[1, 64, 0], &[]);
    b.add_sample(&[l_f, l_main], &[2, 128, 64], &[Str("span_id", "1")]);
    b.add_sample(&[l_f, l_main], &[3, 0, 32], &[Str("span_id", "1")]);
    b.add_sample(&[l_g, l_main], &[0, 0, 0], &[]);
    b.add_sample(&[l_g, l_main], &[5, 10, 0], &[Str("span_id", "2")]);
    b.add_sample(&[l_main], &[0, 7, -7], &[]);
    b.add_sample(&[l_main], &[0, -7, 7], &[]);
    let raw = ember_pprof::encode(&b.build());
    let mut head = TenantHead::new();
    check_against_source(&mut head, &raw, "three");
    // And by hand, for the type whose entries differ most from the others'.
    let inuse = head.all_series().nth(2).unwrap().profiles[0].clone();
    assert_eq!(inuse.values, vec![96]);
    assert_eq!(head.label_set_pairs(inuse.set(0)).len(), 1);
    let objects = head.all_series().next().unwrap().profiles[0].clone();
    assert_eq!(objects.total(), 11);
    assert_eq!(objects.nodes.len(), 3);
}

#[test]
fn label_lookups_stay_in_step_through_runs_gaps_and_repeats() {
    use ember_pprof::SampleLabel::{Num, Str};
    // Label sets are fingerprinted in one pass and looked up in the next, only where a
    // sample's labels differ from the last labelled sample's: runs, unlabelled samples
    // between equal labels, a set coming back after others, numeric labels.
    let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds"), ("samples", "count")]);
    let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
    let f = b.function("main", "main", "main.go");
    let a: &[ember_pprof::SampleLabel] = &[Str("thread", "a"), Str("endpoint", "/x")];
    let bb: &[ember_pprof::SampleLabel] = &[Str("thread", "b")];
    let span: &[ember_pprof::SampleLabel] = &[Str("span_id", "00ff"), Str("thread", "a")];
    let num: &[ember_pprof::SampleLabel] = &[Num("bytes", 64, "")];
    let samples: [&[ember_pprof::SampleLabel]; 12] =
        [a, a, &[], a, bb, &[], &[], bb, a, span, num, a];
    for (i, labels) in samples.iter().enumerate() {
        // Two samples per location at times, so stacks repeat under other labels.
        let l = b.location(m, 0x1100 + (i as u64 % 5), &[(f, 3)]);
        b.add_sample(&[l], &[i as i64 + 1, 1], labels);
    }
    let raw = ember_pprof::encode(&b.build());
    let mut head = TenantHead::new();
    check_against_source(&mut head, &raw, "fresh");
    check_against_source(&mut head, &raw, "remembered");
    check_against_source(&mut TenantHead::new(), &raw, "another head");
}

#[test]
fn dense_and_sparse_location_ids_give_the_same_stacks() {
    // Stack keys read location fingerprints by id directly when the ids are 1..=n in
    // table order, and through the profile's id index otherwise: both must key a stack
    // the same way. The same profile with its location table reversed and renumbered
    // (ids 7k + 3) takes the dense profile's stacks and makes nothing new.
    let raw = named("serve", true);
    let dense = ember_pprof::decode(&raw).unwrap();
    assert!(dense.location.iter().zip(1u64..).all(|(l, id)| l.id == id));
    let mut sparse = dense.clone();
    sparse.location.reverse();
    for l in &mut sparse.location {
        l.id = l.id * 7 + 3;
    }
    for s in &mut sparse.sample {
        for id in &mut s.location_id {
            *id = *id * 7 + 3;
        }
    }
    let mut head = TenantHead::new();
    let first = apply(&mut head, &raw, 1);
    let sizes = head.symbol_table_sizes();
    assert_eq!(apply(&mut head, &ember_pprof::encode(&sparse), 2), first);
    assert_eq!(head.symbol_table_sizes(), sizes);
    // And the other way round: sparse first, on a fresh head.
    let mut head = TenantHead::new();
    let first = apply(&mut head, &ember_pprof::encode(&sparse), 1);
    let sizes = head.symbol_table_sizes();
    assert_eq!(apply(&mut head, &raw, 2), first);
    assert_eq!(head.symbol_table_sizes(), sizes);
}

#[test]
fn stack_keys_by_id_equal_stack_keys_through_the_id_index_on_every_corpus_profile() {
    let head = TenantHead::new();
    let mut dense = 0;
    for path in corpus_files() {
        let bytes = std::fs::read(&path).unwrap();
        let Ok(raw) = ember_pprof::decompress(&bytes, &DecodeLimits::default()) else {
            continue;
        };
        let Ok(view) = ProfileView::parse(&raw) else {
            continue;
        };
        let keys = |symbols: &mut ProfileSymbols<'_, '_>| -> Vec<u128> {
            let view = &view;
            view.sample
                .iter()
                .map(|s| symbols.stack_key(view.sample_data(s).0))
                .collect()
        };
        let mut by_id = ProfileSymbols::new(&head, &view, Default::default());
        let mut reference =
            ProfileSymbols::new(&head, &view, Default::default()).through_the_id_index();
        assert_eq!(keys(&mut by_id), keys(&mut reference), "{}", path.display());
        dense += usize::from(view.location.iter().zip(1u64..).all(|(l, id)| l.id == id));
    }
    assert!(
        dense >= 10,
        "only {dense} corpus profiles with dense location ids"
    );
}
