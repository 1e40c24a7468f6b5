//! Assembling one generated profile: which stacks it holds (real stacks with on/off
//! lifetimes, synthetic recombinations that come and go at the churn rate), their noisy
//! values, sample labels, renamed functions, and the encoding.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::io::Write;

use ember_pprof::{Label, Profile, Sample};

use super::Workload;
use super::base::{Base, Language};
use super::rename::{last_rename, renamed};
use super::rng::{Rng, hash, mix, tag, unit};

/// A base prepared for generation: lookups from locations to the functions they name.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    /// The base profile.
    pub(crate) base: Base,
    /// For each location id, the indices (into the function table) of its lines, leaf first.
    loc_funcs: HashMap<u64, Vec<usize>>,
    /// Hash of each function's base name, by function-table index.
    name_hashes: Vec<u64>,
    /// All location ids, for the extra frames of synthetic stacks.
    location_ids: Vec<u64>,
}

/// Hash of a function name (stable within a build; only used for counting distinct stacks).
fn name_hash(name: &str) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(name)
}

impl Template {
    /// Prepares `base`.
    pub(crate) fn new(base: Base) -> Template {
        let t = &base.tables;
        let func_index: HashMap<u64, usize> = t
            .function
            .iter()
            .enumerate()
            .map(|(i, f)| (f.id, i))
            .collect();
        let loc_funcs = t
            .location
            .iter()
            .map(|l| {
                let funcs = l
                    .line
                    .iter()
                    .filter_map(|line| func_index.get(&line.function_id).copied())
                    .collect();
                (l.id, funcs)
            })
            .collect();
        let name_hashes = t
            .function
            .iter()
            .map(|f| name_hash(ember_pprof::string(t, f.name)))
            .collect();
        let location_ids = base.location_ids().collect();
        Template {
            base,
            loc_funcs,
            name_hashes,
            location_ids,
        }
    }

    /// Number of synthetic stack slots: a quarter of the base's stacks (at least 8), so a
    /// profile holds about as many stacks as the base.
    pub(crate) fn synthetic_slots(&self) -> usize {
        (self.base.stacks.len() / 4).max(8)
    }
}

/// A stack chosen for one profile, before labels.
struct Chosen {
    /// Location ids, leaf first.
    locations: Vec<u64>,
    /// Values before noise.
    values: Vec<i64>,
    /// Identity of the slot and generation, seeding the stack's noise and labels.
    key: u64,
}

/// What [`assemble`] returns besides the bytes.
pub(crate) struct Assembled {
    /// The profile, gzip'd.
    pub(crate) bytes: Vec<u8>,
    /// Its samples.
    pub(crate) samples: usize,
    /// Hashes of its distinct stacks (function-name sequences), sorted.
    pub(crate) stacks: Vec<u64>,
}

/// Makes profile number `k` of service `s`.
pub(crate) fn assemble(w: &Workload, s: usize, k: u64, time_nanos: i64) -> Assembled {
    let service = &w.services[s];
    let tpl = &w.templates[service.base];
    let seed = w.config.seed;
    let mut profile = tpl.base.tables.clone();
    let hashes = rename_functions(w, s, k, tpl, &mut profile);
    let mut chosen = real_stacks(w, s, k, tpl);
    synthetic_stacks(w, s, k, tpl, &mut chosen);
    let mut stacks: Vec<u64> = chosen
        .iter()
        .map(|c| stack_hash(tpl, &hashes, &c.locations))
        .collect();
    stacks.sort_unstable();
    stacks.dedup();
    let mut strings = Strings::new(&mut profile);
    let diurnal = 1.0
        + 0.25
            * (std::f64::consts::TAU
                * (k as f64 * w.config.profile_seconds / 86_400.0
                    + unit(hash(&[seed, tag::NOISE, s as u64]))))
            .sin();
    let language = tpl.base.spec.language;
    let mut samples = Vec::with_capacity(chosen.len() * 5 / 4);
    for c in chosen {
        let mut rng = Rng::new(hash(&[seed, tag::NOISE, s as u64, k, c.key]));
        let factor = diurnal * rng.lognormal(0.35);
        let values = noisy(&c.values, factor);
        if values.iter().all(|&v| v == 0) {
            continue;
        }
        let mut lrng = Rng::new(hash(&[seed, tag::LABELS, s as u64, k, c.key]));
        push_labelled(
            &mut samples,
            c.locations,
            values,
            language,
            &mut lrng,
            &mut strings,
        );
    }
    drop(strings);
    let sample_count = samples.len();
    profile.sample = samples;
    profile.time_nanos = time_nanos;
    profile.duration_nanos = (w.config.profile_seconds * 1e9) as i64;
    Assembled {
        bytes: gzip_fast(&ember_pprof::encode(&profile)),
        samples: sample_count,
        stacks,
    }
}

/// Applies the deploy renames in force at profile `k` to `profile`'s function table and
/// returns every function's name hash (renamed or not).
fn rename_functions(
    w: &Workload,
    s: usize,
    k: u64,
    tpl: &Template,
    profile: &mut Profile,
) -> Vec<u64> {
    let epoch = w.epoch(s, k);
    let mut hashes = tpl.name_hashes.clone();
    let language = tpl.base.spec.language;
    for (i, f) in profile.function.iter_mut().enumerate() {
        let Some(at) = last_rename(w.config.seed, s, f.id, epoch, w.config.rename_share) else {
            continue;
        };
        let base_name = ember_pprof::string(&tpl.base.tables, f.name).to_string();
        let name = renamed(&base_name, language, s, at);
        hashes[i] = name_hash(&name);
        profile.string_table.push(name);
        let idx = (profile.string_table.len() - 1) as i64;
        f.name = idx;
        f.system_name = idx;
    }
    hashes
}

/// The base stacks switched on at profile `k`. Each stack (slot `i`, heaviest first) lives
/// in periods of its own seeded length, 30 to 3,000 profiles, and is on in a period with a
/// probability from 0.95 (heaviest) down to 0.55 (lightest): hot paths are nearly always
/// there, rare ones come and go.
fn real_stacks(w: &Workload, s: usize, k: u64, tpl: &Template) -> Vec<Chosen> {
    let seed = w.config.seed;
    let n = tpl.base.stacks.len();
    let mut out = Vec::with_capacity(n + tpl.synthetic_slots());
    for (i, stack) in tpl.base.stacks.iter().enumerate() {
        let life_h = hash(&[seed, tag::SLOT_LIFE, s as u64, i as u64]);
        let life = 30.0 * 100f64.powf(unit(life_h));
        let phase = unit(mix(life_h)) * life;
        let period = ((k as f64 + phase) / life) as u64;
        let duty = 0.95 - 0.4 * i as f64 / n as f64;
        if unit(hash(&[seed, tag::SLOT_ON, s as u64, i as u64, period])) >= duty {
            continue;
        }
        out.push(Chosen {
            locations: stack.locations.clone(),
            values: stack.values.clone(),
            key: hash(&[0, i as u64]),
        });
    }
    out
}

/// Synthetic stacks at profile `k`: slot `j` holds generation `floor(k * churn / slots +
/// phase_j)`, so across the slots `churn` new stacks appear per profile on average. A
/// generation's stack is the root side of one real stack, one to three real frames drawn
/// from the whole profile (extra depth), and the leaf side of another real stack.
fn synthetic_stacks(w: &Workload, s: usize, k: u64, tpl: &Template, out: &mut Vec<Chosen>) {
    let seed = w.config.seed;
    let slots = tpl.synthetic_slots();
    let churn = w.config.churn.per_profile();
    let stacks = &tpl.base.stacks;
    for j in 0..slots {
        let phase = unit(hash(&[seed, tag::SLOT_PHASE, s as u64, j as u64]));
        let generation = (k as f64 * churn / slots as f64 + phase) as u64;
        let id = hash(&[seed, tag::SYNTH, s as u64, j as u64, generation]);
        let mut rng = Rng::new(id);
        let root = &stacks[rng.below(stacks.len())].locations;
        let leaf = &stacks[rng.below(stacks.len())].locations;
        let keep_root = 1 + rng.below(root.len());
        let keep_leaf = 1 + rng.below(leaf.len().min(8));
        let extra = 1 + rng.below(3);
        let mut locations = Vec::with_capacity(keep_leaf + extra + keep_root);
        locations.extend_from_slice(&leaf[..keep_leaf]);
        for _ in 0..extra {
            locations.push(tpl.location_ids[rng.below(tpl.location_ids.len())]);
        }
        locations.extend_from_slice(&root[root.len() - keep_root..]);
        let values = stacks[rng.below(stacks.len())].values.clone();
        out.push(Chosen {
            locations,
            values,
            key: id,
        });
    }
}

/// Hash of a stack's function-name sequence (inline frames included), which is what makes
/// two stacks the same for a profile store.
fn stack_hash(tpl: &Template, hashes: &[u64], locations: &[u64]) -> u64 {
    let mut h = 0x243F_6A88_85A3_08D3u64;
    for id in locations {
        for &f in tpl.loc_funcs.get(id).map_or(&[][..], Vec::as_slice) {
            h = mix(h ^ hashes[f]);
        }
    }
    h
}

/// Scales `values` by `factor`, keeping them consistent: the first non-zero value (a count,
/// typically) is rounded to an integer of at least 1 and the others follow it exactly, so
/// `cpu = count * period` stays true.
fn noisy(values: &[i64], factor: f64) -> Vec<i64> {
    let Some(&driver) = values.iter().find(|&&v| v != 0) else {
        return values.to_vec();
    };
    let scaled = ((driver as f64 * factor).round() as i64).max(1);
    values
        .iter()
        .map(|&v| ((v as i128 * scaled as i128) / driver as i128) as i64)
        .collect()
}

/// Appends the string table entries labels need, once each.
struct Strings<'a> {
    profile: &'a mut Profile,
    index: HashMap<String, i64>,
}

impl<'a> Strings<'a> {
    fn new(profile: &'a mut Profile) -> Self {
        Strings {
            profile,
            index: HashMap::new(),
        }
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.profile.string_table.push(s.to_string());
        let i = (self.profile.string_table.len() - 1) as i64;
        self.index.insert(s.to_string(), i);
        i
    }

    fn label(&mut self, key: &str, value: &str) -> Label {
        Label {
            key: self.get(key),
            str: self.get(value),
            ..Label::default()
        }
    }
}

/// Request endpoints, as set by tracing integrations on a share of samples.
const ENDPOINTS: [&str; 10] = [
    "GET /api/v1/items",
    "GET /api/v1/items/{id}",
    "POST /api/v1/orders",
    "GET /api/v1/search",
    "POST /api/v1/login",
    "GET /healthz",
    "PUT /api/v1/cart",
    "POST /api/v1/payments",
    "GET /api/v1/recommendations",
    "DELETE /api/v1/sessions",
];

/// Thread names by language (Go has no thread names in its labels).
fn thread_names(language: Language) -> &'static [&'static str] {
    match language {
        Language::Go => &[],
        Language::Java => &[
            "main",
            "kafka-request-handler-0",
            "kafka-request-handler-1",
            "ForkJoinPool.commonPool-worker-3",
            "data-plane-kafka-network-thread-1",
            "kafka-log-cleaner-thread-0",
        ],
        Language::DotNet => &[
            ".NET ThreadPool Worker",
            ".NET TP Worker",
            "Main Thread",
            ".NET Timer",
        ],
        Language::JavaScript => &["main", "libuv-worker-1", "libuv-worker-2"],
        Language::Python => &[
            "MainThread",
            "ThreadPoolExecutor-0_0",
            "ThreadPoolExecutor-0_1",
            "uvicorn-worker",
        ],
        Language::Ruby => &[
            "main",
            "puma srv tp 001",
            "puma srv tp 002",
            "sidekiq-worker",
        ],
        Language::Rust => &[
            "main",
            "tokio-runtime-worker",
            "tokio-runtime-worker-2",
            "blocking-1",
        ],
    }
}

/// Pushes the sample(s) of one stack: thread names on 60 % (languages that have them),
/// an `endpoint` on 40 %, a `span_id` on 5 %; a quarter of labelled stacks with a count of
/// at least 2 are split over two endpoints (two samples, same stack).
fn push_labelled(
    out: &mut Vec<Sample>,
    locations: Vec<u64>,
    values: Vec<i64>,
    language: Language,
    rng: &mut Rng,
    strings: &mut Strings<'_>,
) {
    let mut labels = Vec::new();
    let threads = thread_names(language);
    if !threads.is_empty() && rng.unit() < 0.6 {
        labels.push(strings.label("thread_name", threads[rng.below(threads.len())]));
    }
    let endpoint = rng.unit() < 0.4;
    if rng.unit() < 0.05 {
        let span = format!("{:016x}", rng.next_u64());
        labels.push(strings.label("span_id", &span));
    }
    if !endpoint {
        out.push(Sample {
            location_id: locations,
            value: values,
            label: labels,
        });
        return;
    }
    let first = rng.below(ENDPOINTS.len());
    let driver = values.iter().copied().find(|&v| v != 0).unwrap_or(0);
    if driver >= 2 && rng.unit() < 0.25 {
        let part = 1 + rng.below(driver as usize - 1) as i64;
        let split: Vec<i64> = values
            .iter()
            .map(|&v| (v as i128 * part as i128 / driver as i128) as i64)
            .collect();
        let rest: Vec<i64> = values.iter().zip(&split).map(|(v, p)| v - p).collect();
        let second = (first + 1 + rng.below(ENDPOINTS.len() - 1)) % ENDPOINTS.len();
        let mut l2 = labels.clone();
        l2.push(strings.label("endpoint", ENDPOINTS[second]));
        out.push(Sample {
            location_id: locations.clone(),
            value: rest,
            label: l2,
        });
        labels.push(strings.label("endpoint", ENDPOINTS[first]));
        out.push(Sample {
            location_id: locations,
            value: split,
            label: labels,
        });
        return;
    }
    labels.push(strings.label("endpoint", ENDPOINTS[first]));
    out.push(Sample {
        location_id: locations,
        value: values,
        label: labels,
    });
}

/// gzip at level 2: Go's runtime/pprof writes profiles at `gzip.BestSpeed`, whose ratio on
/// the Go CPU base (72.5 KB as written by Go) lies between zlib's levels 1 (80 KB) and 2
/// (67 KB); level 2 keeps generated profiles near the real size and costs ~1.5 ms each.
pub(crate) fn gzip_fast(raw: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(raw.len() / 3 + 64),
        flate2::Compression::new(2),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(raw);
    enc.finish().unwrap_or_default()
}
