//! Applying a decoded profile to a tenant's head: interning its mappings, functions and
//! locations, walking each distinct stack into the shared stack tree once, and storing one
//! profile per sample type. The same code runs for live ingest, log replay and flush, so the
//! head is built identically either way.

use ember_pprof::{DecodeLimits, ProfileView};

use crate::ingest::IngestRecord;
use crate::{Labels, StoredProfile, TenantHead, head, series_labels};

/// Decodes a logged profile (gzip'd or raw) and runs `f` on it; the error says why it could
/// not be decoded.
pub(crate) fn with_view<T>(
    bytes: &[u8],
    f: impl FnOnce(&ProfileView<'_>) -> T,
) -> Result<T, ember_pprof::PprofError> {
    let raw = ember_pprof::decompress(bytes, &DecodeLimits::default())?;
    let view = ProfileView::parse(&raw)?;
    Ok(f(&view))
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

/// Interns the profile's mappings, functions and locations, then every sample's stack into
/// the head's stack tree and its labels into a label set, and sums values per leaf node and
/// label set: one `(node, label set, value)` list per sample type (unsorted, may hold zeros).
fn stacks_of(head: &mut TenantHead, profile: &ProfileView<'_>) -> Vec<Vec<(u32, u32, i64)>> {
    let (locations, mut strings) = intern_symbols(head, profile);
    let n_types = profile.sample_type.len();
    // Samples often repeat a stack (Go profiles split samples by labels, e.g. span ids):
    // each distinct stack is interned once. `distinct[k]` is the range of `flat` holding the
    // k-th distinct stack's interned locations; `of_sample[i]` is sample i's k (None when
    // all its values are zero).
    // Sized for the profile up front: growing these maps rehashed them ~10 times a profile.
    let samples = profile.sample.len();
    let mut by_ids: head::FastMap<&[u64], usize> =
        head::FastMap::with_capacity_and_hasher(samples, Default::default());
    let mut flat: Vec<u32> = Vec::with_capacity(profile.sample_location_ids.len());
    let mut distinct: Vec<std::ops::Range<usize>> = Vec::with_capacity(samples);
    let mut of_sample: Vec<Option<usize>> = Vec::with_capacity(profile.sample.len());
    for sample in &profile.sample {
        let (ids, values) = profile.sample_data(sample);
        if values.iter().all(|v| *v == 0) {
            of_sample.push(None);
            continue;
        }
        let k = *by_ids.entry(ids).or_insert_with(|| {
            let start = flat.len();
            flat.extend(ids.iter().filter_map(|id| {
                profile
                    .location_position(*id)
                    .and_then(|i| locations.get(i))
                    .copied()
            }));
            distinct.push(start..flat.len());
            distinct.len() - 1
        });
        of_sample.push(Some(k));
    }
    // All at once: the lookups in the head's (large) stack table do not wait on each other.
    let leaves = head.stacks(distinct.iter().map(|r| &flat[r.clone()]));
    let mut sums: head::FastMap<(u32, u32), usize> =
        head::FastMap::with_capacity_and_hasher(distinct.len(), Default::default());
    let mut out: Vec<Vec<(u32, u32, i64)>> = (0..n_types)
        .map(|_| Vec::with_capacity(distinct.len()))
        .collect();
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for (sample, k) in profile.sample.iter().zip(of_sample) {
        let Some(&node) = k.and_then(|k| leaves.get(k)) else {
            continue;
        };
        let set = if sample.label.is_empty() {
            0
        } else {
            pairs.clear();
            for l in profile
                .sample_labels
                .get(sample.label.clone())
                .unwrap_or(&[])
            {
                let value = if l.str != 0 {
                    strings.id(head, profile, l.str)
                } else {
                    // A numeric label (Go heap profiles' `bytes`) is kept as its decimal text.
                    head.intern(&l.num.to_string())
                };
                pairs.push((strings.id(head, profile, l.key), value));
            }
            head.label_set(&mut pairs)
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

/// The head's string id of each string of one profile's table, interned on first use: a
/// profile's functions share file names, `system_name` is usually `name`, and its samples
/// repeat label keys.
struct StringIds(Vec<u32>);

impl StringIds {
    /// The id of string `i`, a sample label's key or value.
    fn id(&mut self, head: &mut TenantHead, profile: &ProfileView<'_>, i: i64) -> u32 {
        self.get(i, || head.intern(&profile.string(i)))
    }

    /// The id of string `i`, part of a symbol ([`TenantHead::intern_symbol`]).
    fn symbol(&mut self, head: &mut TenantHead, profile: &ProfileView<'_>, i: i64) -> u32 {
        self.get(i, || head.intern_symbol(profile.string_bytes(i)))
    }

    /// String `i`'s id, from `intern` the first time (out of range: `intern` of "").
    fn get(&mut self, i: i64, intern: impl FnOnce() -> u32) -> u32 {
        match usize::try_from(i).ok().and_then(|i| self.0.get_mut(i)) {
            Some(slot) if *slot != u32::MAX => *slot,
            Some(slot) => {
                *slot = intern();
                *slot
            }
            None => intern(),
        }
    }
}

/// Interns the profile's strings, mappings, functions and locations into `head`; returns the
/// head's location id for each location of the profile, by table position, and the string
/// ids interned so far.
fn intern_symbols(head: &mut TenantHead, profile: &ProfileView<'_>) -> (Vec<u32>, StringIds) {
    let mut strings = StringIds(vec![u32::MAX; profile.string_count()]);
    let mut s = |head: &mut TenantHead, i: i64| -> u32 { strings.symbol(head, profile, i) };
    // Interned ids by table position (the view resolves pprof ids to positions).
    let mappings: Vec<u32> = profile
        .mapping
        .iter()
        .map(|m| {
            let sym = head::MappingSym {
                start: m.memory_start,
                limit: m.memory_limit,
                offset: m.file_offset,
                filename: s(head, m.filename),
                build_id: s(head, m.build_id),
                flags: u8::from(m.has_functions)
                    | u8::from(m.has_filenames) << 1
                    | u8::from(m.has_line_numbers) << 2
                    | u8::from(m.has_inline_frames) << 3,
            };
            head.mapping(sym) + 1
        })
        .collect();
    // The functions' strings first, in the order the loop below would intern them (so ids
    // are the same): these lookups do not wait on each other, nor the functions' on them.
    for f in &profile.function {
        s(head, f.name);
        s(head, f.system_name);
        s(head, f.filename);
    }
    let functions: Vec<u32> = profile
        .function
        .iter()
        .map(|f| {
            let sym = head::FunctionSym {
                name: s(head, f.name),
                system_name: s(head, f.system_name),
                filename: s(head, f.filename),
                start_line: f.start_line,
            };
            head.function(sym)
        })
        .collect();
    let mut locations: Vec<u32> = Vec::with_capacity(profile.location.len());
    // One buffer for every location's lines: a location seen before costs no allocation.
    let mut lines: Vec<(u32, i64)> = Vec::new();
    for loc in &profile.location {
        lines.clear();
        lines.extend(profile.location_lines(loc).iter().filter_map(|l| {
            let f = functions.get(profile.function_position(l.function_id)?)?;
            Some((*f, l.line))
        }));
        let mapping = profile
            .mapping_position(loc.mapping_id)
            .and_then(|i| mappings.get(i))
            .copied()
            .unwrap_or(0);
        locations.push(head.location_of(mapping, loc.address, &lines, loc.is_folded));
    }
    (locations, strings)
}
