//! Merging sorted stacks into frames: one pass, keeping only the open root→leaf path.

use crate::stacks::Line;

/// One merged frame: a function at a depth spanning `[start, end)` in sample units.
pub(crate) struct Frame<'a> {
    /// The function name (with any `_[k]`-style annotation).
    pub(crate) name: &'a str,
    /// 0 for the root (`all`).
    pub(crate) depth: usize,
    /// First sample (in input order) the frame covers.
    pub(crate) start: u64,
    /// One past the last sample it covers.
    pub(crate) end: u64,
    /// The differential of the leaf of this frame's stacks, 0 for inner frames.
    pub(crate) delta: Option<i64>,
}

/// A frame of the current root→leaf path, not yet closed.
struct Open<'a> {
    name: &'a str,
    start: u64,
    delta: Option<i64>,
    /// Byte offset just past this frame's name in the stack that opened it.
    end: usize,
}

/// Length of the common prefix of two byte strings, compared eight bytes at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Merges consecutive stacks into frames. Frames are emitted as they close, parents before
/// children among those closing together; frames narrower than `min_time` are dropped.
///
/// Only the open root→leaf path is kept. The frames a stack shares with the previous one are
/// found from the byte-level common prefix of the two stacks and the recorded end offset of
/// each open frame, so shared frames are never split or compared again.
pub(crate) fn merge<'a>(lines: &[Line<'a>], min_time: f64) -> Vec<Frame<'a>> {
    let mut frames = Vec::new();
    // path[0] is the root; path[i].end is where frame i ends in the stack that opened it.
    let mut path: Vec<Open<'a>> = Vec::new();
    let mut prev: &str = "";
    let mut time = 0u64;
    let close = |path: &mut Vec<Open<'a>>, keep: usize, time: u64, frames: &mut Vec<Frame<'a>>| {
        for (i, o) in path.drain(keep..).enumerate() {
            if ((time - o.start) as f64) >= min_time {
                frames.push(Frame {
                    name: o.name,
                    depth: keep + i,
                    start: o.start,
                    end: time,
                    delta: o.delta,
                });
            }
        }
    };
    for (n, line) in lines.iter().enumerate() {
        // After an unsorted input was sorted, consecutive stacks live far apart in memory; touching
        // a later stack now lets its cache misses overlap with the work on this one.
        if let Some(ahead) = lines.get(n + 8) {
            let b = ahead.stack.as_bytes();
            std::hint::black_box(
                b.first().copied().unwrap_or(0) ^ b.get(b.len() / 2).copied().unwrap_or(0),
            );
        }
        let cur = line.stack;
        let first_new = if path.is_empty() {
            let delta = line.delta.map(|_| 0);
            path.push(Open {
                name: "",
                start: time,
                delta,
                end: 0,
            });
            Some(0)
        } else {
            let lcp = common_prefix(prev.as_bytes(), cur.as_bytes());
            let mut shared = 1 + path[1..].partition_point(|o| o.end < lcp);
            if let Some(o) = path.get(shared) {
                // A frame ending exactly at the divergence point is shared when `cur` also has
                // a frame boundary there.
                if o.end == lcp && cur.as_bytes().get(lcp).is_none_or(|&b| b == b';') {
                    shared += 1;
                }
            }
            close(&mut path, shared, time, &mut frames);
            match path.last() {
                Some(o) if shared > 1 && o.end >= cur.len() => None,
                Some(o) if shared > 1 => Some(o.end + 1),
                _ => Some(0),
            }
        };
        if let Some(from) = first_new {
            // One vectorised scan for all the separators of the new part (frames are short,
            // so a per-frame byte loop dominated this function).
            let mut begin = from;
            let rest = &cur.as_bytes()[from..];
            // Only the leaf carries the line's differential; new intermediate frames start at 0.
            let inner_delta = line.delta.map(|_| 0);
            for sep in memchr::memchr_iter(b';', rest) {
                let end = from + sep;
                path.push(Open {
                    name: &cur[begin..end],
                    start: time,
                    delta: inner_delta,
                    end,
                });
                begin = end + 1;
            }
            path.push(Open {
                name: &cur[begin..],
                start: time,
                delta: line.delta,
                end: cur.len(),
            });
        }
        prev = cur;
        time = time.saturating_add(line.count);
    }
    close(&mut path, 0, time, &mut frames);
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straightforward frame-by-frame merge used as the reference for the prefix-based one.
    fn naive_merge<'a>(lines: &[Line<'a>]) -> Vec<(String, usize, u64, u64, Option<i64>)> {
        let mut out = Vec::new();
        let mut path: Vec<(&str, u64, Option<i64>)> = Vec::new();
        let mut time = 0;
        for line in lines {
            let cur: Vec<&str> = std::iter::once("").chain(line.stack.split(';')).collect();
            let shared = path
                .iter()
                .zip(&cur)
                .take_while(|(p, c)| p.0 == **c)
                .count();
            for (i, p) in path.drain(shared..).enumerate() {
                out.push((p.0.to_owned(), shared + i, p.1, time, p.2));
            }
            for (i, name) in cur.iter().enumerate().skip(shared) {
                let d = line.delta.map(|d| if i + 1 == cur.len() { d } else { 0 });
                path.push((name, time, d));
            }
            time += line.count;
        }
        for (i, p) in path.drain(..).enumerate() {
            out.push((p.0.to_owned(), i, p.1, time, p.2));
        }
        out
    }

    #[test]
    fn prefix_merge_matches_naive_merge() {
        let alphabet = ["a", "ab", "a;b", "", "b", "a b", "ba"];
        let mut state = 12345u64;
        for round in 0..300 {
            let mut stacks = Vec::new();
            for _ in 0..(round % 12 + 1) {
                let mut s = String::new();
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                for k in 0..((state >> 60) % 5 + 1) {
                    if k > 0 {
                        s.push(';');
                    }
                    s.push_str(alphabet[((state >> (8 * k)) % alphabet.len() as u64) as usize]);
                }
                stacks.push(s);
            }
            stacks.sort();
            let lines: Vec<Line<'_>> = stacks
                .iter()
                .enumerate()
                .map(|(i, s)| Line {
                    stack: s,
                    count: i as u64 % 3 + 1,
                    delta: Some(i as i64 - 2),
                })
                .collect();
            let fast: Vec<_> = merge(&lines, 0.0)
                .into_iter()
                .map(|f| (f.name.to_owned(), f.depth, f.start, f.end, f.delta))
                .collect();
            assert_eq!(fast, naive_merge(&lines), "{stacks:?}");
        }
    }
}
