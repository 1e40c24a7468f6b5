//! The profile columns a section of the current format leaves to its time chunks, put back
//! ([`restore`]): what every reader of a whole section (a full-fidelity query: pprof output,
//! sample-label filters, averaged series; and compaction) reads is the encoding a section of
//! the fourth format held, while the block stores each profile once.
//!
//! Why: a block of the fourth format stored every profile twice, as the section's columns
//! (stack nodes, values, sample label set ids) and folded onto the frames of its time chunk,
//! some 7,200 bytes a profile of the realistic workload out of 11,200 (BENCHMARKS.md,
//! sessions 18 and 19). The chunks now hold the columns with a map from their stack nodes to
//! their frames, so a narrow read still reads only its chunks, and a whole-section read reads
//! the section and all of its chunks, about the bytes it read before.

use super::Section;
use crate::chunks::{Chunk, Run, holds};
use crate::encoding::{Reader, put_varint};
use crate::head::{StoredProfile, TenantHead};

/// `raw` (a decompressed section of the current format) with the columns and set ids of
/// the profiles `chunks` (all of the section's, in its order) hold put back, as
/// [`TenantHead::encode`] writes them; `None` when malformed. Ids are not checked here: the
/// decoders of the result check them.
pub(super) fn restore(section: &Section, raw: &[u8], chunks: &[Chunk]) -> Option<Vec<u8>> {
    let base = TenantHead::table_ends(raw)?[4];
    let body = raw.get(base..)?;
    // About twice the section: the columns are most of what the chunks hold.
    let chunk_bytes: usize = chunks.iter().map(Chunk::approx_bytes).sum();
    let mut out = Vec::with_capacity(raw.len() + chunk_bytes);
    out.extend_from_slice(&raw[..base]);
    let mut r = Reader::new(body);
    let n_series = r.count()?;
    put_varint(&mut out, n_series as u64);
    // The chunked profiles' set ids, series after series, kept for the sample-label part;
    // per series, its profile count and the range of its ids there (`None`: the section's).
    let mut chunk_sets: Vec<u8> = Vec::new();
    let mut series_sets: Vec<(usize, Option<std::ops::Range<usize>>)> =
        Vec::with_capacity(n_series);
    let mut listed = 0usize;
    let mut p = StoredProfile::default();
    for _ in 0..n_series {
        let start = r.position();
        let labels = r.labels()?;
        r.signed()?;
        let n = r.count()?;
        r.deltas(n)?;
        out.extend_from_slice(body.get(start..r.position())?);
        if holds(&labels, n) {
            // The index lists the section's series that have profiles, in its order.
            let at = listed;
            if section.series.get(at)?.labels != labels {
                return None;
            }
            let runs = section.runs.get(at)?;
            let sets_from = chunk_sets.len();
            for j in 0..n {
                let (chunk, k) = locate(runs, j)?;
                if !chunks.get(chunk)?.profile_columns(k, &mut p) {
                    return None;
                }
                TenantHead::put_profile_columns(&mut out, &p);
                TenantHead::put_profile_sets(&mut chunk_sets, &p);
            }
            series_sets.push((n, Some(sets_from..chunk_sets.len())));
        } else {
            for _ in 0..n {
                let s = r.position();
                let k = r.count()?;
                for _ in 0..k {
                    r.varint()?;
                }
                r.varint()?;
                for _ in 0..k {
                    r.varint()?;
                }
                out.extend_from_slice(body.get(s..r.position())?);
            }
            series_sets.push((n, None));
        }
        if n > 0 {
            listed += 1;
        }
    }
    if r.at_end() {
        return Some(out);
    }
    // The sample-label part: its tag and set table as they are, then every profile's set
    // ids in series order, from the chunks or from the section.
    let start = r.position();
    if r.varint()? != 1 {
        return None;
    }
    let sets = r.count()?;
    for _ in 0..sets {
        let k = r.count()?;
        for _ in 0..2 * k {
            r.varint()?;
        }
    }
    out.extend_from_slice(body.get(start..r.position())?);
    for (n, from_chunks) in series_sets {
        match from_chunks {
            Some(range) => out.extend_from_slice(chunk_sets.get(range)?),
            None => {
                for _ in 0..n {
                    let s = r.position();
                    let k = r.count()?;
                    for _ in 0..k {
                        r.varint()?;
                    }
                    out.extend_from_slice(body.get(s..r.position())?);
                }
            }
        }
    }
    r.at_end().then_some(out)
}

/// The chunk position and the position in it of profile `j` of a series with `runs`.
pub(super) fn locate(runs: &[Run], j: usize) -> Option<(usize, usize)> {
    let j = u32::try_from(j).ok()?;
    let i = runs.partition_point(|r| r.first + r.count <= j);
    let run = runs.get(i).filter(|r| r.first <= j)?;
    Some((run.chunk as usize, (run.at + j - run.first) as usize))
}
