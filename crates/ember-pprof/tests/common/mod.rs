//! Shared helpers for the corpus-driven tests.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;

/// Root of the shared corpora, failing loudly when it is missing.
pub fn corpus() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora");
    assert!(
        dir.join("pprof-cases.tsv").is_file(),
        "test corpus not found at {} (tests/data/corpora in the repository)",
        dir.display()
    );
    dir
}

/// One row of pprof-cases.tsv.
#[derive(Debug, Clone)]
pub struct Case {
    pub path: String,
    pub notes: String,
    pub samples: usize,
    pub locations: usize,
    pub functions: usize,
    pub mappings: usize,
    pub goldens: Vec<String>,
}

impl Case {
    pub fn is_legacy(&self) -> bool {
        self.notes.starts_with("LEGACY")
    }
    pub fn is_broken(&self) -> bool {
        self.notes.starts_with("BROKEN")
    }
    pub fn bytes(&self) -> Vec<u8> {
        std::fs::read(corpus().join(&self.path)).unwrap_or_else(|e| panic!("{}: {e}", self.path))
    }
    pub fn golden(&self, suffix: &str) -> Option<PathBuf> {
        self.goldens
            .iter()
            .find(|g| g.ends_with(suffix))
            .map(|g| corpus().join(g))
    }
}

pub fn cases() -> Vec<Case> {
    let text =
        std::fs::read_to_string(corpus().join("pprof-cases.tsv")).expect("read pprof-cases.tsv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("column {name}"))
    };
    let (c_path, c_notes, c_s, c_l, c_f, c_m, c_g) = (
        col("path"),
        col("producer/notes"),
        col("samples"),
        col("locations"),
        col("functions"),
        col("mappings"),
        col("goldens"),
    );
    let rows: Vec<Case> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let num = |i: usize| f.get(i).and_then(|s| s.parse().ok()).unwrap_or(0);
            Case {
                path: f[c_path].to_string(),
                notes: f[c_notes].to_string(),
                samples: num(c_s),
                locations: num(c_l),
                functions: num(c_f),
                mappings: num(c_m),
                goldens: f
                    .get(c_g)
                    .map(|g| g.split_whitespace().map(str::to_string).collect())
                    .unwrap_or_default(),
            }
        })
        .collect();
    assert!(
        rows.len() >= 90,
        "expected the full corpus, found {} rows",
        rows.len()
    );
    rows
}

/// Proto rows that must decode (everything except legacy and broken files).
pub fn good_cases() -> Vec<Case> {
    cases()
        .into_iter()
        .filter(|c| !c.is_legacy() && !c.is_broken())
        .collect()
}

pub fn gunzip(path: &std::path::Path) -> Vec<u8> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    out
}

pub fn read_case(path: &str) -> ember_pprof::Profile {
    ember_pprof::read_file(&corpus().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}
