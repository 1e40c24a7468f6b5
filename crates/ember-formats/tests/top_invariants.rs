//! Properties of the top table that hold for every corpus profile, checked without Go (the exact
//! comparison with `go tool pprof` lives in `go_pprof_top.rs`).

use ember_formats::{SortBy, TopOptions, top};
use std::path::{Path, PathBuf};

fn proto_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora");
    let tsv = std::fs::read_to_string(root.join("pprof-cases.tsv")).unwrap();
    tsv.lines()
        .skip(1)
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c.len() > 3 && !c[3].is_empty() && !c[2].contains("BROKEN"))
        .map(|c| root.join(c[0]))
        .collect()
}

#[test]
fn rows_are_ordered_and_consistent_with_totals() {
    for path in proto_files() {
        let name = path.display().to_string();
        let profile = ember_pprof::read_file(&path).unwrap();
        for sort in [SortBy::Flat, SortBy::Cum] {
            let table = top(
                &profile,
                &TopOptions {
                    sort,
                    ..Default::default()
                },
            )
            .unwrap();
            let total: i64 = profile
                .sample
                .iter()
                .map(|s| s.value[table.sample_index].abs())
                .sum();
            assert_eq!(table.total, total, "{name}");
            let mut flat_sum = 0i64;
            for pair in table.rows.windows(2) {
                let key = |r: &ember_formats::TopRow| match sort {
                    SortBy::Flat => r.flat.abs(),
                    SortBy::Cum => r.cum.abs(),
                };
                assert!(key(&pair[0]) >= key(&pair[1]), "{name}: rows out of order");
                if key(&pair[0]) == key(&pair[1]) && sort == SortBy::Flat {
                    assert!(
                        pair[0].name <= pair[1].name,
                        "{name}: tie not sorted by name"
                    );
                }
            }
            for row in &table.rows {
                flat_sum += row.flat;
                // A function's own samples are part of its cumulative value.
                assert!(
                    row.flat.abs() <= row.cum.abs() || row.flat.signum() != row.cum.signum(),
                    "{name}: {row:?}"
                );
                // Rows shown survived the 0.5% cut.
                assert!(
                    row.cum.abs() as f64 >= (total as f64 * 0.005).trunc() - 1.0,
                    "{name}: {row:?}"
                );
            }
            assert!(flat_sum.abs() <= total, "{name}");
            let summary = table
                .labels
                .iter()
                .find(|l| l.starts_with("Showing nodes"))
                .unwrap();
            assert!(summary.ends_with(" total"), "{name}: {summary}");
            let rendered = table.render();
            // (invalid_utf8.pb.gz has a function name with a newline, printed raw like pprof does.)
            let multi_line = table.rows.iter().any(|r| r.name.contains('\n'));
            assert!(
                multi_line || rendered.lines().count() == table.labels.len() + 1 + table.rows.len(),
                "{name}"
            );
        }
    }
}

#[test]
fn node_count_limits_rows_and_says_so() {
    let path = &proto_files()
        .into_iter()
        .find(|p| p.ends_with("sample.cpu"))
        .unwrap();
    let profile = ember_pprof::read_file(path).unwrap();
    let all = top(&profile, &TopOptions::default()).unwrap();
    let five = top(
        &profile,
        &TopOptions {
            node_count: 5,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(all.rows.len() > 5);
    assert_eq!(five.rows.len(), 5);
    assert_eq!(five.rows[0].name, all.rows[0].name);
    let expected = format!("Showing top 5 nodes out of {}", all.rows.len());
    assert!(five.labels.contains(&expected), "{:?}", five.labels);
}
