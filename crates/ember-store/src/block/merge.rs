//! Compaction that holds the merged symbols and stack tree, not the profiles.
//!
//! Merging blocks used to decode every input section into one in-memory head
//! ([`TenantHead::merge_encoded`]): each profile became three vectors of 4 to 8 bytes an
//! entry, and merges were bounded to 8 MiB of inputs, so a live server's 8.5 MB blocks
//! never merged (each repeating its symbol tables, stack tree, rollup and chunk trees: 23 %
//! of the pprof input on disk at 600 profiles a flush). Here an input section only adds its symbol tables and stack tree to the merged
//! head ([`TenantHead::merge_encoded_tables`]); its profiles stay encoded in its
//! decompressed bytes ([`Input`], with where each profile starts and the maps from its ids
//! to the merged head's), and [`BlockWriter::add_merged`] streams them, one profile at a
//! time, into the merged section, its rollup and its time chunks; the merged head's
//! interning maps are dropped between the two. Memory is the merged tables and tree, the
//! inputs' encoded series, and the output: 162–170 MiB at its peak for four 8.5 MB blocks of
//! the realistic workload (232 MiB merging through a head). Most of it is the merged stack
//! tree with its interning maps (some 650,000 nodes for those four blocks, ~100 MiB while
//! they are read), not the profiles. The section, rollup and chunks hold the same bytes as
//! merging through a head (`tests::streamed_merge_equals_merge_through_a_head`).

use super::writer::{BlockWriter, SectionIndex};
use crate::StoreError;
use crate::encoding::{Reader, put_deltas, put_labels, put_signed, put_varint};
use crate::head::{Labels, Series, StoredProfile, TenantHead};

/// One input section of a merge: its encoded head, decompressed, with where each profile
/// is in it and this merge's ids of its stack nodes and sample label sets.
pub(crate) struct Input {
    /// The section's encoding from its series on.
    raw: Vec<u8>,
    /// The merged head's node of each of the section's stack nodes.
    nodes: Vec<u32>,
    /// The merged head's label set of each of the section's sets (0: the empty set).
    sets: Vec<u32>,
    series: Vec<InputSeries>,
    /// The section's time chunks when they hold its profiles' columns (the current
    /// format), read from there without putting them back into the section first.
    chunks: Vec<crate::chunks::Chunk>,
}

/// Where a profile's columns are: at a position of [`Input::raw`], or in a time chunk
/// (its position in the section's chunks, and the profile's in the chunk).
#[derive(Debug, Clone, Copy)]
enum At {
    Raw(usize),
    Chunk(u32, u32),
}

/// One series of an [`Input`]: profiles in time order.
struct InputSeries {
    labels: Labels,
    period: i64,
    times: Vec<i64>,
    /// Where each profile's columns are.
    columns: Vec<At>,
    /// Where each profile's sample label set ids start in [`Input::raw`] (unused for a
    /// profile in a chunk); empty when the section has none.
    set_ids: Vec<usize>,
}

impl Input {
    /// Adds the tables and stack tree of the encoded head `raw` to `head` and finds its
    /// profiles (every id checked); `None` when malformed.
    pub(crate) fn read(head: &mut TenantHead, raw: Vec<u8>) -> Option<Input> {
        Self::read_with(head, raw, None)
    }

    /// [`Input::read`] of a section of the current format: `raw` its decompressed bytes,
    /// `chunks` all of its time chunks, which hold the columns of its chunked series.
    pub(crate) fn read_chunked(
        head: &mut TenantHead,
        raw: Vec<u8>,
        section: &super::Section,
        chunks: Vec<crate::chunks::Chunk>,
    ) -> Option<Input> {
        Self::read_with(head, raw, Some((section, chunks)))
    }

    fn read_with(
        head: &mut TenantHead,
        raw: Vec<u8>,
        chunked: Option<(&super::Section, Vec<crate::chunks::Chunk>)>,
    ) -> Option<Input> {
        let tables = head.merge_encoded_tables(&raw)?;
        let n_nodes = tables.nodes.len();
        let base = tables.series_at;
        // Positions are kept from `base` on: the tables before it are not kept.
        let body = raw.get(base..)?;
        let mut r = Reader::new(body);
        let n_series = r.count()?;
        let mut series = Vec::with_capacity(n_series);
        // The index position of the next series with profiles (the index lists those).
        let mut listed = 0usize;
        for _ in 0..n_series {
            let labels = r.labels()?;
            let period = r.signed()?;
            let n = r.count()?;
            let times = r.deltas(n)?;
            let mut columns = Vec::with_capacity(n);
            let at = listed;
            listed += usize::from(n > 0);
            if let Some((section, _)) = chunked.as_ref()
                && crate::chunks::holds(&labels, n)
            {
                if section.series.get(at)?.labels != labels {
                    return None;
                }
                let runs = section.runs.get(at)?;
                for j in 0..n {
                    let (c, k) = super::columns::locate(runs, j)?;
                    columns.push(At::Chunk(c as u32, k as u32));
                }
            } else {
                for _ in 0..n {
                    columns.push(At::Raw(r.position()));
                    let k = r.count()?;
                    let mut last = 0u32;
                    for _ in 0..k {
                        last = last.wrapping_add(r.u32()?);
                        if last as usize >= n_nodes {
                            return None;
                        }
                    }
                    i64::try_from(r.varint()?).ok()?;
                    for _ in 0..k {
                        r.signed()?;
                    }
                }
            }
            series.push(InputSeries {
                labels,
                period,
                times,
                columns,
                set_ids: Vec::new(),
            });
        }
        let mut sets = vec![0];
        if !r.at_end() {
            // The sample-label part: tag 1, the sets, then every profile's set ids.
            if r.varint()? != 1 {
                return None;
            }
            let n_strings = tables.strings.len();
            let string = |r: &mut Reader<'_>| r.u32().filter(|s| (*s as usize) < n_strings);
            let n = r.count()?;
            let mut table: Vec<Vec<(u32, u32)>> = Vec::with_capacity(n);
            for _ in 0..n {
                let k = r.count()?;
                table.push(r.column(k, |r| Some((string(r)?, string(r)?)))?);
            }
            sets = head.merge_label_sets(&tables.strings, table.iter().map(|s| &s[..]))?;
            for s in &mut series {
                for &at in &s.columns {
                    let At::Raw(at) = at else {
                        // In a chunk, with its set ids (checked below).
                        s.set_ids.push(0);
                        continue;
                    };
                    s.set_ids.push(r.position());
                    let entries = Reader::new(body.get(at..)?).count()?;
                    let k = r.count()?;
                    if k != 0 && k != entries {
                        return None;
                    }
                    for _ in 0..k {
                        r.u32().filter(|x| (*x as usize) <= n)?;
                    }
                }
            }
        }
        if !r.at_end() {
            return None;
        }
        let chunks = chunked.map_or_else(Vec::new, |(_, c)| c);
        // The chunks' ids index this section's nodes and sets (each chunk was checked
        // whole when decoded; its profiles are read without further checks).
        let fits = |c: &crate::chunks::Chunk| {
            c.max_node().is_none_or(|n| (n as usize) < n_nodes)
                && (c.max_set() as usize) < sets.len()
        };
        if !chunks.iter().all(fits) {
            return None;
        }
        // Profiles of a series are written in time order; should a section not be, the
        // merge still lists them so (as inserting them into a head did, stably).
        for s in &mut series {
            if s.times.is_sorted() {
                continue;
            }
            let mut order: Vec<usize> = (0..s.times.len()).collect();
            order.sort_by_key(|&j| s.times[j]);
            s.times = order.iter().map(|&j| s.times[j]).collect();
            s.columns = order.iter().map(|&j| s.columns[j]).collect();
            if !s.set_ids.is_empty() {
                s.set_ids = order.iter().map(|&j| s.set_ids[j]).collect();
            }
        }
        // Only the series are read again: the tables (a third of the bytes, on the realistic
        // workload) go.
        let mut raw = raw;
        raw.drain(..base);
        raw.shrink_to_fit();
        Some(Input {
            raw,
            nodes: tables.nodes,
            sets,
            series,
            chunks,
        })
    }

    /// Profile `j` of series `s` into `p`, in the merged head's ids, entries sorted by node
    /// then set (positions and ids were checked by [`Input::read`]).
    fn profile(&self, s: usize, j: usize, p: &mut StoredProfile) {
        let series = &self.series[s];
        p.time_nanos = series.times[j];
        let raw_at = match series.columns[j] {
            At::Raw(at) => at,
            At::Chunk(c, k) => {
                let chunk = &self.chunks[c as usize];
                chunk.profile_columns(k as usize, p);
                TenantHead::remap_profile(p, &self.nodes, &self.sets);
                return;
            }
        };
        p.nodes.clear();
        p.values.clear();
        p.sets.clear();
        let mut r = Reader::new(self.raw.get(raw_at..).unwrap_or(&[]));
        let k = r.count().unwrap_or(0);
        let mut last = 0u32;
        for _ in 0..k {
            last = last.wrapping_add(r.u32().unwrap_or(0));
            p.nodes.push(last);
        }
        let g = r.varint().and_then(|g| i64::try_from(g).ok()).unwrap_or(1);
        for _ in 0..k {
            p.values.push(r.signed().unwrap_or(0).saturating_mul(g));
        }
        if let Some(&at) = series.set_ids.get(j) {
            let mut r = Reader::new(self.raw.get(at..).unwrap_or(&[]));
            let k = r.count().unwrap_or(0);
            for _ in 0..k {
                p.sets.push(r.u32().unwrap_or(0));
            }
        }
        TenantHead::remap_profile(p, &self.nodes, &self.sets);
    }
}

/// One series of the merged section: where each of its profiles comes from, in time order.
struct MergedSeries {
    labels: Labels,
    period: i64,
    /// `(input, series of that input, profile)` of each profile.
    from: Vec<(u32, u32, u32)>,
    times: Vec<i64>,
}

/// The merged section's series: in the order they first appear in the inputs (as inserting
/// the inputs into a head in order made them), each series' profiles by time, an earlier
/// input's first among equal times.
fn merged_series(inputs: &[Input]) -> Vec<MergedSeries> {
    let mut ids: std::collections::HashMap<&Labels, usize> = Default::default();
    let mut sources: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut out: Vec<MergedSeries> = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        for (s, series) in input.series.iter().enumerate() {
            if series.times.is_empty() {
                continue;
            }
            let at = *ids.entry(&series.labels).or_insert_with(|| {
                out.push(MergedSeries {
                    labels: series.labels.clone(),
                    period: 0,
                    from: Vec::new(),
                    times: Vec::new(),
                });
                sources.push(Vec::new());
                out.len() - 1
            });
            if series.period != 0 {
                out[at].period = series.period;
            }
            sources[at].push((i as u32, s as u32));
        }
    }
    for (m, sources) in out.iter_mut().zip(sources) {
        let mut next = vec![0usize; sources.len()];
        loop {
            // The source with the earliest next profile (the first such source on a tie).
            let mut best: Option<(i64, usize)> = None;
            for (k, &(i, s)) in sources.iter().enumerate() {
                if let Some(&t) = inputs[i as usize].series[s as usize].times.get(next[k])
                    && best.is_none_or(|(b, _)| t < b)
                {
                    best = Some((t, k));
                }
            }
            let Some((t, k)) = best else { break };
            let (i, s) = sources[k];
            m.from.push((i, s, next[k] as u32));
            m.times.push(t);
            next[k] += 1;
        }
    }
    out
}

impl BlockWriter {
    /// Adds the merge of `inputs` as a section of `tenant`: `head` holds the inputs' tables
    /// and stack trees ([`Input::read`] each into it, in order); the profiles are read from
    /// the inputs one at a time. The same bytes as [`BlockWriter::add`] of a head the inputs
    /// were merged into with [`TenantHead::merge_encoded`].
    /// An error only when zstd fails (a failed allocation): nothing is written then.
    pub(crate) fn add_merged(
        &mut self,
        tenant: &str,
        head: &TenantHead,
        inputs: &[Input],
    ) -> Result<(), StoreError> {
        let series = merged_series(inputs);
        let Some((lo, hi)) = series
            .iter()
            .flat_map(|s| [s.times.first(), s.times.last()])
            .flatten()
            .fold(None, |r: Option<(i64, i64)>, &t| {
                Some(r.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
            })
        else {
            return Ok(());
        };
        self.range = Some(self.range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        let profiles: u64 = series.iter().map(|s| s.times.len() as u64).sum();
        // The head: tables and tree, then the series streamed profile by profile into one
        // zstd frame (the merged head is never held raw whole), their sample label ids
        // gathered for the part after them. Rollup sums by the way.
        let mut stream = crate::section_codec::StreamCompressor::new().map_err(zstd_error)?;
        let mut encoded = std::mem::take(&mut self.encoded);
        encoded.clear();
        head.encode_tables(&mut encoded);
        put_varint(&mut encoded, series.len() as u64);
        let mut set_ids: Vec<u8> = Vec::new();
        let mut p = StoredProfile::default();
        let mut totals: Vec<Vec<i64>> = Vec::with_capacity(series.len());
        self.sums.reserve_slots(head.frame_count());
        let mut frames: Vec<(u32, i64)> = Vec::new();
        let mut ends: Vec<Option<usize>> = Vec::with_capacity(series.len());
        let mut used = vec![false; head.frame_count()];
        for s in &series {
            put_labels(&mut encoded, &s.labels);
            put_signed(&mut encoded, s.period);
            put_varint(&mut encoded, s.times.len() as u64);
            put_deltas(&mut encoded, s.times.iter().copied());
            let averaged = crate::read::averaged_labels(&s.labels);
            // The columns of profiles in time chunks are written there, not here.
            let in_section = !crate::chunks::holds(&s.labels, s.times.len());
            let mut own = Vec::with_capacity(s.times.len());
            for &(i, si, j) in &s.from {
                inputs[i as usize].profile(si as usize, j as usize, &mut p);
                if in_section {
                    TenantHead::put_profile_columns(&mut encoded, &p);
                    TenantHead::put_profile_sets(&mut set_ids, &p);
                }
                own.push(p.total());
                if !averaged {
                    for (n, v) in p.nodes.iter().zip(&p.values) {
                        self.sums.add(head.frame_of(*n), *v);
                    }
                }
                if encoded.len() >= STREAM_PIECE {
                    stream.write(&encoded).map_err(zstd_error)?;
                    encoded.clear();
                }
            }
            totals.push(own);
            if averaged {
                ends.push(None);
            } else {
                self.sums.drain(|f, v| {
                    used[f as usize] = true;
                    frames.push((f, v));
                });
                ends.push(Some(frames.len()));
            }
        }
        if head.encode_label_set_table(&mut encoded) {
            stream.write(&encoded).map_err(zstd_error)?;
            encoded.clear();
            stream.write(&set_ids).map_err(zstd_error)?;
        }
        drop(set_ids);
        stream.write(&encoded).map_err(zstd_error)?;
        encoded.clear();
        self.encoded = encoded;
        let (offset, len) = self.append_piece(stream.finish().map_err(zstd_error)?);
        self.encoded.clear();
        crate::rollup::write(head, &frames, &ends, &mut used, &mut self.encoded);
        drop((frames, used));
        let (rollup_at, rollup_len) = self.append_compressed();
        // Time chunks: planned on the profiles' times alone, each chunk's profiles read
        // when it is written.
        let skeleton: Vec<Series> = series
            .iter()
            .map(|s| Series {
                labels: s.labels.clone(),
                profiles: s
                    .times
                    .iter()
                    .map(|&t| StoredProfile {
                        time_nanos: t,
                        ..Default::default()
                    })
                    .collect(),
                period: s.period,
            })
            .collect();
        let refs: Vec<&Series> = skeleton.iter().collect();
        let planned = crate::chunks::plan(&refs);
        let mut chunks = Vec::with_capacity(planned.len());
        for chunk in &planned {
            let read: Vec<Vec<StoredProfile>> = chunk
                .runs
                .iter()
                .map(|(s, first, run)| {
                    let m = &series[*s as usize];
                    (0..run.len())
                        .map(|k| {
                            let (i, si, j) = m.from[*first as usize + k];
                            let mut p = StoredProfile::default();
                            inputs[i as usize].profile(si as usize, j as usize, &mut p);
                            p
                        })
                        .collect()
                })
                .collect();
            let pending = crate::chunks::Pending {
                runs: chunk
                    .runs
                    .iter()
                    .zip(&read)
                    .map(|((s, first, _), r)| (*s, *first, &r[..]))
                    .collect(),
            };
            self.chunk_writer.encode(head, &pending, &mut self.encoded);
            chunks.push((
                self.append_chunk(),
                chunk.runs.iter().map(|(s, _, r)| (*s, r.len())).collect(),
            ));
        }
        let listed = series
            .iter()
            .zip(&totals)
            .map(|(s, t)| (&s.labels, &s.times[..], &t[..]))
            .collect();
        self.put_index(&SectionIndex {
            tenant,
            head: (offset, len),
            range: (lo, hi),
            profiles,
            series: listed,
            sample_keys: head.sample_label_names().collect(),
            rollup: (rollup_at, rollup_len),
            chunks,
        });
        Ok(())
    }
}

/// Raw bytes of a merged head gathered before they go to zstd.
const STREAM_PIECE: usize = 1 << 20;

fn zstd_error(e: std::io::Error) -> StoreError {
    StoreError::Io {
        path: "compaction".into(),
        message: format!("zstd: {e}"),
    }
}
