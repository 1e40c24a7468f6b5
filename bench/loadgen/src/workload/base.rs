//! The real profiles the workload is derived from, and the parts of them the generator
//! recombines: their stacks (location lists, leaf first) with values, and their tables.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ember_pprof::Profile;

use super::WorkloadError;

/// One real profile the generator starts from, by language and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseSpec {
    /// Short name used in reports (`go-cpu`).
    pub name: &'static str,
    /// Language of the profiled program, which picks thread names and rename styles.
    pub language: Language,
    /// Path of the file under `tests/data/corpora/`.
    pub path: &'static str,
}

/// Language of a base profile's program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// Go (runtime/pprof).
    Go,
    /// Java (JFR converted to pprof by Pyroscope).
    Java,
    /// .NET (Pyroscope's .NET profiler).
    DotNet,
    /// Node.js (pprof-nodejs).
    JavaScript,
    /// Python (py-spy / Pyroscope's Python profiler).
    Python,
    /// Ruby (rbspy / Pyroscope's Ruby profiler).
    Ruby,
    /// Rust (pprof-rs).
    Rust,
}

/// The base profiles, all real files of `tests/data/corpora/` (see tests/data/README.md for
/// their origin and licence). The first is the Go CPU profile issue 11 asks for: 72.5 KB
/// gzip'd, about 650 stacks; the others bring other languages' frame shapes. (The C++
/// `cppbench.cpu` is in the legacy binary format, which ember-pprof does not read, and
/// `dotnet-pprof-3`/`-73` have invalid function ids, so they are not used.)
pub const BASES: [BaseSpec; 8] = [
    BaseSpec {
        name: "go-cpu",
        language: Language::Go,
        path: "pyroscope/pkg/pprof/testdata/gotruncatefix/cpu_go_truncated_1.pb.gz",
    },
    BaseSpec {
        name: "java-cpu",
        language: Language::Java,
        path: "pyroscope/pkg/og/convert/jfr/testdata/cortex-dev-01__kafka-0__cpu_lock0_alloc0__0.jfr.gz.process_cpu_cpu_nanoseconds_cpu_nanoseconds.17241709254077376921.pb.gz",
    },
    BaseSpec {
        name: "dotnet-cpu",
        language: Language::DotNet,
        path: "pyroscope/pkg/og/convert/pprof/testdata/dotnet-pprof-211.pb.gz",
    },
    BaseSpec {
        name: "go-heap",
        language: Language::Go,
        path: "pyroscope/pkg/pprof/testdata/gotruncatefix/heap_go_truncated_4.pb.gz",
    },
    BaseSpec {
        name: "js-cpu",
        language: Language::JavaScript,
        path: "pyroscope/pkg/og/convert/pprof/testdata/cpu-js.pb.gz",
    },
    BaseSpec {
        name: "python-cpu",
        language: Language::Python,
        path: "pyroscope/pkg/pprof/testdata/profile_python",
    },
    BaseSpec {
        name: "ruby-cpu",
        language: Language::Ruby,
        path: "pyroscope/pkg/pprof/testdata/profile_ruby",
    },
    BaseSpec {
        name: "rust-cpu",
        language: Language::Rust,
        path: "pyroscope/pkg/pprof/testdata/profile_rust",
    },
];

/// A distinct stack of a base profile: its locations (leaf first) and summed values.
#[derive(Debug, Clone)]
pub(crate) struct BaseStack {
    /// Location ids, leaf first, as in `Sample::location_id`.
    pub(crate) locations: Vec<u64>,
    /// Values summed over the base's samples with these locations.
    pub(crate) values: Vec<i64>,
}

/// A decoded base profile, ready to be recombined.
#[derive(Debug, Clone)]
pub struct Base {
    /// Which file this is.
    pub spec: BaseSpec,
    /// The decoded profile with its samples removed (the tables every generated profile
    /// starts from).
    pub(crate) tables: Profile,
    /// Its distinct stacks, heaviest first.
    pub(crate) stacks: Vec<BaseStack>,
    /// Size of the file as read, bytes.
    pub file_bytes: usize,
}

impl Base {
    /// Decodes a base from its bytes. Samples with the same locations are merged (their
    /// labels dropped: the generator writes its own), zero samples dropped.
    pub fn from_bytes(spec: BaseSpec, bytes: &[u8]) -> Result<Base, WorkloadError> {
        let mut profile = ember_pprof::decode(bytes).map_err(|source| WorkloadError::Base {
            path: PathBuf::from(spec.path),
            source,
        })?;
        let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut stacks: Vec<BaseStack> = Vec::new();
        for sample in std::mem::take(&mut profile.sample) {
            if sample.location_id.is_empty() || sample.value.iter().all(|&v| v == 0) {
                continue;
            }
            match index.get(&sample.location_id) {
                Some(&i) => {
                    for (sum, v) in stacks[i].values.iter_mut().zip(&sample.value) {
                        *sum += v;
                    }
                }
                None => {
                    index.insert(sample.location_id.clone(), stacks.len());
                    stacks.push(BaseStack {
                        locations: sample.location_id,
                        values: sample.value,
                    });
                }
            }
        }
        if stacks.is_empty() {
            return Err(WorkloadError::EmptyBase(spec.path));
        }
        // Heaviest first (ties by position, so the order is deterministic).
        stacks.sort_by(|a, b| b.values.first().cmp(&a.values.first()));
        Ok(Base {
            spec,
            tables: profile,
            stacks,
            file_bytes: bytes.len(),
        })
    }

    /// Reads and decodes a base from the corpora directory (`tests/data/corpora`).
    pub fn load(spec: BaseSpec, corpora: &Path) -> Result<Base, WorkloadError> {
        let path = corpora.join(spec.path);
        let bytes = std::fs::read(&path).map_err(|source| WorkloadError::Io {
            path: path.clone(),
            source,
        })?;
        Base::from_bytes(spec, &bytes)
    }

    /// Reads every base of [`BASES`] from the corpora directory.
    pub fn load_all(corpora: &Path) -> Result<Vec<Base>, WorkloadError> {
        BASES.iter().map(|&s| Base::load(s, corpora)).collect()
    }

    /// Number of distinct stacks of the base.
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// The location ids of the base (recombination draws extra frames from them).
    pub(crate) fn location_ids(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.tables.location.iter().map(|l| l.id)
    }
}

/// Where the corpora are in this repository: `tests/data/corpora` beside the workspace root
/// this crate was built from.
pub fn default_corpora_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_base_decodes_with_stacks() {
        for base in Base::load_all(&default_corpora_dir()).unwrap() {
            let funcs = base.tables.function.len();
            let locs = base.tables.location.len();
            let depth =
                base.stacks.iter().map(|s| s.locations.len()).sum::<usize>() / base.stacks.len();
            eprintln!(
                "{}: {} bytes, {} stacks, {} locations, {} functions, mean depth {}, types {:?}",
                base.spec.name,
                base.file_bytes,
                base.stacks.len(),
                locs,
                funcs,
                depth,
                base.tables.sample_type.len()
            );
            assert!(base.stacks.len() >= 20, "{}", base.spec.name);
            assert!(funcs > 0 && locs > 0);
        }
    }
}
