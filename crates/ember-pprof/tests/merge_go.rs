//! The rules [`ember_pprof::merge`] (and [`ember_pprof::Merger`]) share with Go's
//! `profile.Merge`, which `go tool pprof a.pb.gz b.pb.gz` uses: samples whose values are all
//! zero are dropped (in an input, or once summed), the first input's main mapping stays first,
//! labels are kept and take part in the identity of a sample, the default sample type is the
//! first one set, and durations add up as Go's `int64` does. `ember top a b` agreeing with
//! `go tool pprof -top a b` on real files is checked by `crates/ember/tests/cli_merge.rs`.

use ember_pprof::{Merger, Profile, ProfileBuilder, SampleLabel, merge, string, validate};

const TYPES: [(&str, &str); 2] = [("samples", "count"), ("cpu", "nanoseconds")];

/// A profile whose first mapping is the main binary while its first sample runs in libc.
fn first(b: &mut ProfileBuilder) {
    let app = b.mapping(0x40_0000, 0x80_0000, 0, "/bin/app", "");
    let libc = b.mapping(0x7f00_0000, 0x7f10_0000, 0, "/lib/libc.so.6", "");
    let write = b.function("write", "write", "");
    let main = b.function("main.main", "main.main", "main.go");
    let zero = b.function("main.zeroOnly", "main.zeroOnly", "main.go");
    let cancels = b.function("main.cancels", "main.cancels", "main.go");
    let l_write = b.location(libc, 0x7f00_1000, &[(write, 0)]);
    let l_main = b.location(app, 0x40_1000, &[(main, 10)]);
    let l_zero = b.location(libc, 0x7f00_2000, &[(zero, 3)]);
    let l_cancels = b.location(app, 0x40_2000, &[(cancels, 7)]);
    b.add_sample(&[l_write, l_main], &[5, 50], &[]);
    b.add_sample(&[l_main], &[3, 30], &[SampleLabel::Str("pod", "a")]);
    b.add_sample(&[l_zero, l_main], &[0, 0], &[]);
    b.add_sample(&[l_cancels, l_main], &[4, 40], &[]);
}

fn profile_a() -> Profile {
    let mut b = ProfileBuilder::new(&TYPES);
    first(&mut b);
    b.set_time(1_000, i64::MAX);
    b.build()
}

/// Same binary; sets a default sample type, repeats a labelled stack, cancels a stack.
fn profile_b() -> Profile {
    let mut b = ProfileBuilder::new(&TYPES);
    let app = b.mapping(0x40_0000, 0x80_0000, 0, "/bin/app", "");
    let main = b.function("main.main", "main.main", "main.go");
    let cancels = b.function("main.cancels", "main.cancels", "main.go");
    let l_main = b.location(app, 0x40_1000, &[(main, 10)]);
    let l_cancels = b.location(app, 0x40_2000, &[(cancels, 7)]);
    b.add_sample(&[l_main], &[2, 20], &[SampleLabel::Str("pod", "a")]);
    b.add_sample(&[l_main], &[1, 10], &[SampleLabel::Str("pod", "b")]);
    b.add_sample(&[l_cancels, l_main], &[-4, -40], &[]);
    b.set_default_sample_type("cpu");
    b.set_time(500, 2);
    b.build()
}

fn function_names(p: &Profile) -> Vec<&str> {
    let mut names: Vec<&str> = p.function.iter().map(|f| string(p, f.name)).collect();
    names.sort_unstable();
    names
}

/// `(leaf function, labels) → values` of every sample.
fn samples(p: &Profile) -> Vec<(String, Vec<String>, Vec<i64>)> {
    let mut out: Vec<_> = p
        .sample
        .iter()
        .map(|s| {
            let leaf = p.location[s.location_id[0] as usize - 1].line[0].function_id;
            let name = string(p, p.function[leaf as usize - 1].name).to_owned();
            let labels = s
                .label
                .iter()
                .map(|l| format!("{}={}", string(p, l.key), string(p, l.str)))
                .collect();
            (name, labels, s.value.clone())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn merge_keeps_what_go_keeps() {
    let (a, b) = (profile_a(), profile_b());
    let m = merge(&[a.clone(), b.clone()]).unwrap();
    validate(&m).unwrap();
    // The all-zero sample and the stack that summed to zero are gone, with their functions.
    assert_eq!(function_names(&m), ["main.main", "write"]);
    assert_eq!(
        samples(&m),
        [
            ("main.main".into(), vec!["pod=a".into()], vec![5, 50]),
            ("main.main".into(), vec!["pod=b".into()], vec![1, 10]),
            ("write".into(), vec![], vec![5, 50]),
        ]
    );
    // The main binary is the first mapping although a libc sample came first.
    assert_eq!(string(&m, m.mapping[0].filename), "/bin/app");
    assert_eq!(m.mapping.len(), 2);
    assert_eq!(string(&m, m.default_sample_type), "cpu");
    assert_eq!(m.time_nanos, 500);
    assert_eq!(m.duration_nanos, i64::MAX.wrapping_add(2));

    // One at a time gives the same profile.
    let mut merger = Merger::new();
    merger.add(&a).unwrap();
    merger.add(&b).unwrap();
    assert!(merger.finish().unwrap() == m);

    // A single input loses its zero sample only.
    let one = merge(std::slice::from_ref(&a)).unwrap();
    assert_eq!(one.sample.len(), a.sample.len() - 1);
    assert_eq!(string(&one, one.mapping[0].filename), "/bin/app");
}
