//! `Store::ingest` on real corpus profiles: every limit refuses the whole batch with a typed
//! error before anything is logged, and an accepted batch is durable (it survives a reopen
//! that replays the log).

use std::path::{Path, PathBuf};

use ember_store::{
    IngestBatch, IngestError, IngestLimits, IngestProfile, Query, Store, StoreOptions,
    parse_selector,
};

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/corpora")
        .join(rel)
}

/// A fresh, empty directory for one test, removed with its content when dropped (when the
/// test that holds it ends), so test runs leave nothing behind in the temp directory.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("ember-ingest-{name}-"))
        .tempdir()
        .expect("temp dir")
}

const CPU: &str = "pyroscope/pkg/pprof/testdata/go.cpu.labels.pprof";

fn profile(service: &str, what: &str) -> IngestProfile {
    IngestProfile {
        labels: vec![("service_name".into(), service.into())],
        time_nanos: 1_700_000_000_000_000_000,
        pprof: std::fs::read(corpus(CPU)).unwrap(),
        what: what.into(),
    }
}

fn batch(profiles: Vec<IngestProfile>) -> IngestBatch {
    IngestBatch { profiles }
}

fn all() -> Query {
    Query {
        selector: parse_selector("{}").unwrap(),
        profile_type: Some("cpu".into()),
        start_nanos: 0,
        end_nanos: i64::MAX,
    }
}

fn open(dir: &Path, options: StoreOptions) -> Store {
    Store::open(dir, options).unwrap()
}

#[test]
fn accepted_batch_is_durable_and_counted() {
    let dir = temp_dir("durable");
    let dir = dir.path();
    {
        let store = open(dir, StoreOptions::default());
        let receipt = store
            .ingest("t", batch(vec![profile("a", "p0"), profile("b", "p1")]))
            .unwrap();
        assert_eq!(receipt.profiles, 2);
        // go.cpu.labels has two sample types (samples, cpu): one series each per profile.
        assert_eq!(receipt.series, 4);
        assert_eq!(store.merge_stacks("t", &all()).profiles, 2);
        assert_eq!(store.wal_stats().records, 2);
        store.close();
    }
    // Reopened without a flush: the profiles come back from the log alone.
    let store = open(dir, StoreOptions::default());
    assert_eq!(store.replay_stats().0.records, 2);
    assert_eq!(store.merge_stacks("t", &all()).profiles, 2);
    assert!(store.merge_stacks("other", &all()).is_empty());
}

#[test]
fn one_bad_profile_refuses_the_batch_before_logging() {
    let dir = temp_dir("atomic");
    let dir = dir.path();
    let store = open(dir, StoreOptions::default());
    let mut bad = profile("a", "series[0].samples[1]");
    bad.pprof = b"\x1f\x8b not really gzip".to_vec();
    let err = store
        .ingest("t", batch(vec![profile("a", "series[0].samples[0]"), bad]))
        .unwrap_err();
    assert!(matches!(err, IngestError::BadProfile { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("series[0].samples[1]: invalid pprof")
    );
    assert_eq!(store.wal_stats().records, 0);
    assert!(store.tenants().is_empty());
}

#[test]
fn limits_are_typed_refusals() {
    let dir = temp_dir("limits");
    let dir = dir.path();
    let samples = ember_pprof::decode(&std::fs::read(corpus(CPU)).unwrap())
        .unwrap()
        .sample
        .len();
    let options = StoreOptions {
        max_series_per_tenant: 3,
        ingest: IngestLimits {
            max_decompressed_bytes: 64 << 20,
            max_samples_per_profile: samples,
            max_labels_per_series: 2,
            max_label_name_length: 12,
            max_label_value_length: 5,
            ..IngestLimits::default()
        },
        ..Default::default()
    };
    let store = open(dir, options);
    let with = |labels: &[(&str, &str)]| {
        let mut p = profile("a", "p");
        p.labels = labels
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        batch(vec![p])
    };
    let err = store
        .ingest("t", with(&[("a", "1"), ("b", "2"), ("c", "3")]))
        .unwrap_err();
    assert!(
        matches!(err, IngestError::TooManyLabels { count: 3, limit: 2 }),
        "{err:?}"
    );
    let err = store.ingest("t", with(&[("bad-name", "1")])).unwrap_err();
    assert!(matches!(err, IngestError::BadLabelName { .. }), "{err:?}");
    let err = store
        .ingest("t", with(&[("muchtoolongname", "1")]))
        .unwrap_err();
    assert!(
        matches!(err, IngestError::LabelNameTooLong { limit: 12, .. }),
        "{err:?}"
    );
    let err = store.ingest("t", with(&[("pod", "toolong")])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "value of label \"pod\" is longer than 5 bytes"
    );
    // Two sample types per profile: the second service would make series 3 and 4 of 3.
    store.ingest("t", with(&[("service_name", "a")])).unwrap();
    let err = store
        .ingest("t", with(&[("service_name", "b")]))
        .unwrap_err();
    assert!(
        matches!(err, IngestError::SeriesLimit { limit: 3, .. }),
        "{err:?}"
    );
    // Existing series stay writable at the limit; other tenants have their own.
    store.ingest("t", with(&[("service_name", "a")])).unwrap();
    store.ingest("u", with(&[("service_name", "b")])).unwrap();
    assert_eq!(store.wal_stats().records, 3);

    let tight = StoreOptions {
        ingest: IngestLimits {
            max_samples_per_profile: samples - 1,
            max_decompressed_bytes: 100,
            ..IngestLimits::default()
        },
        ..Default::default()
    };
    let dir = temp_dir("limits-tight");
    let store = open(dir.path(), tight.clone());
    let err = store
        .ingest("t", batch(vec![profile("a", "p")]))
        .unwrap_err();
    assert!(matches!(err, IngestError::TooLarge { .. }), "{err:?}");
    let dir = temp_dir("limits-samples");
    let store = open(
        dir.path(),
        StoreOptions {
            ingest: IngestLimits {
                max_decompressed_bytes: 64 << 20,
                ..tight.ingest
            },
            ..tight
        },
    );
    let err = store
        .ingest("t", batch(vec![profile("a", "p")]))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "p: {samples} samples exceed the limit of {} per profile",
            samples - 1
        )
    );
}

/// The corpus profile's decompressed size.
fn raw_len() -> u64 {
    let pprof = std::fs::read(corpus(CPU)).unwrap();
    ember_pprof::decompress(&pprof, &Default::default())
        .unwrap()
        .len() as u64
}

#[test]
fn a_batch_is_refused_whole_once_its_profiles_pass_the_batch_limit_together() {
    let raw = raw_len();
    // Room for two profiles, not three, although each alone is far below the per-profile cap.
    let options = StoreOptions {
        ingest: IngestLimits {
            max_batch_decompressed_bytes: 2 * raw + raw / 2,
            ..IngestLimits::default()
        },
        ..Default::default()
    };
    let dir = temp_dir("batch-limit");
    let dir = dir.path();
    let store = open(dir, options.clone());
    let three = || {
        batch(vec![
            profile("a", "p0"),
            profile("a", "p1"),
            profile("a", "p2"),
        ])
    };
    let err = store.ingest("t", three()).unwrap_err();
    assert!(
        matches!(err, IngestError::BatchTooLarge { limit } if limit == 2 * raw + raw / 2),
        "{err:?}"
    );
    // Nothing of the refused batch was logged or applied.
    assert_eq!(store.wal_stats().records, 0);
    assert!(store.tenants().is_empty());
    store
        .ingest("t", batch(vec![profile("a", "p0"), profile("a", "p1")]))
        .unwrap();
    assert_eq!(store.wal_stats().records, 2);

    // A batch over the in-flight limit by itself could never fit: too large, not busy.
    let options = StoreOptions {
        ingest: IngestLimits {
            max_tenant_decompressed_bytes_in_flight: raw,
            ..IngestLimits::default()
        },
        ..Default::default()
    };
    let dir = temp_dir("inflight-limit");
    let store = open(dir.path(), options);
    let err = store
        .ingest("t", batch(vec![profile("a", "p0"), profile("a", "p1")]))
        .unwrap_err();
    assert!(
        matches!(err, IngestError::BatchTooLarge { limit } if limit == raw),
        "{err:?}"
    );
    // The bytes of each finished ingest are given back: one profile at a time always fits.
    for _ in 0..3 {
        store.ingest("t", batch(vec![profile("a", "p0")])).unwrap();
    }
}

#[test]
fn the_series_total_limit_spans_tenants_and_survives_a_reopen() {
    // Each corpus profile makes two series (two sample types).
    let options = StoreOptions {
        max_series_total: 5,
        ..Default::default()
    };
    let dir = temp_dir("series-total");
    let dir = dir.path();
    {
        let store = open(dir, options.clone());
        store.ingest("t1", batch(vec![profile("a", "p")])).unwrap();
        store.ingest("t2", batch(vec![profile("a", "p")])).unwrap();
        assert_eq!(store.series_total(), 4);
        // A third tenant would bring series 5 and 6 of 5.
        let err = store
            .ingest("t3", batch(vec![profile("a", "p")]))
            .unwrap_err();
        assert!(
            matches!(err, IngestError::TotalSeriesLimit { limit: 5 }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "series limit reached: the server may hold at most 5 series over all tenants"
        );
        // Existing series stay writable.
        store.ingest("t1", batch(vec![profile("a", "p")])).unwrap();
        store.close();
    }
    // Replayed from the log, the total is the same and still enforced.
    let store = open(dir, options);
    assert_eq!(store.series_total(), 4);
    let err = store
        .ingest("t1", batch(vec![profile("b", "p")]))
        .unwrap_err();
    assert!(
        matches!(err, IngestError::TotalSeriesLimit { .. }),
        "{err:?}"
    );
}

/// Issue 13, item 4: with `refuse_expired`, a profile older than the retention is refused
/// at ingest (not acknowledged and then deleted), and one further ahead than
/// `max_future_skew_nanos` is refused too (an `i64::MAX` time would make a block that never
/// expires); both errors name the timestamp and the window, and nothing is logged. Within
/// the window, and with the store's defaults for old times, profiles are accepted.
#[test]
fn timestamps_outside_the_window_are_refused() {
    let dir = temp_dir("window");
    let dir = dir.path();
    let day = 86_400 * 1_000_000_000i64;
    let options = StoreOptions {
        retention_nanos: 30 * day,
        ingest: IngestLimits {
            refuse_expired: true,
            ..IngestLimits::default()
        },
        ..StoreOptions::default()
    };
    let store = open(dir, options);
    let now = ember_store::now_nanos();
    let at = |t: i64| {
        let mut p = profile("a", "p0");
        p.time_nanos = t;
        batch(vec![p])
    };
    let old = store
        .ingest("t", at(1_640_995_200_000_000_000))
        .unwrap_err();
    assert!(matches!(old, IngestError::TooOld { .. }), "{old:?}");
    let text = old.to_string();
    assert!(
        text.contains("1640995200") && text.contains("30 days"),
        "{text}"
    );
    for future in [now + 2 * 3_600_000_000_000, i64::MAX] {
        let e = store.ingest("t", at(future)).unwrap_err();
        assert!(matches!(e, IngestError::TooNew { .. }), "{e:?}");
        assert!(e.to_string().contains("60 min"), "{e}");
    }
    assert!(store.merge_stacks("t", &all()).is_empty());
    store.ingest("t", at(now - 29 * day)).unwrap();
    store.ingest("t", at(now + 600_000_000_000)).unwrap();
    assert_eq!(store.merge_stacks("t", &all()).profiles, 2);
    drop(store);
    // The store's defaults keep old profiles (tests and imports write any age).
    let dir = temp_dir("window-default");
    let store = open(dir.path(), StoreOptions::default());
    store.ingest("t", at(1_000)).unwrap();
    assert!(store.ingest("t", at(i64::MAX)).is_err());
}

/// A profile of `leaf <- main` where the leaf function at address 0x1200 is called `name`.
fn named_profile(service: &str, name: &str) -> IngestProfile {
    let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
    let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
    let main = b.function("main", "main", "main.go");
    let leaf = b.function(name, name, "serve.go");
    let l_main = b.location(m, 0x1100, &[(main, 3)]);
    let l_leaf = b.location(m, 0x1200, &[(leaf, 10)]);
    b.add_sample(&[l_leaf, l_main], &[7], &[]);
    IngestProfile {
        labels: vec![("service_name".into(), service.into())],
        time_nanos: 1_700_000_000_000_000_000,
        pprof: ember_pprof::encode_gzip(&b.build()),
        what: "profile".into(),
    }
}

/// The ingest memo of known locations (by content fingerprint) is the tenant's own: two
/// tenants sending the same addresses under different names each read their own names,
/// and a rename within a tenant shows the new name, live and after a replay of the log.
#[test]
fn tenants_and_renames_never_share_remembered_locations() {
    let dir = temp_dir("memo");
    let dir = dir.path();
    let folded = |store: &Store, tenant: &str| {
        let mut f = store.merge_stacks(tenant, &all()).folded();
        f.sort();
        f
    };
    let check = |store: &Store| {
        assert_eq!(folded(store, "a"), vec![("main;serve".to_string(), 7)]);
        assert_eq!(folded(store, "b"), vec![("main;handle".to_string(), 7)]);
        assert_eq!(
            folded(store, "c"),
            vec![("main;old".to_string(), 7), ("main;renamed".to_string(), 7)]
        );
    };
    {
        let store = open(dir, StoreOptions::default());
        for (tenant, name) in [
            ("a", "serve"),
            ("b", "handle"),
            ("c", "old"),
            ("c", "renamed"),
        ] {
            store
                .ingest(tenant, batch(vec![named_profile("app", name)]))
                .unwrap();
        }
        check(&store);
        store.close();
    }
    let store = open(dir, StoreOptions::default());
    check(&store);
}
