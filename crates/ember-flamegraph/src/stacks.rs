//! Preparing the input stacks for merging: counts and differentials, reversal, re-rooting
//! (`--base`) and ordering (sorted, flame chart, or checked as already sorted).

use crate::FlameGraphError;
use crate::options::Options;

/// One input stack with its count and, for differential input, `after - before`.
pub(crate) struct Line<'a> {
    /// Frames root first, separated by `;`.
    pub(crate) stack: &'a str,
    /// The width: the (second, for differential input) count, truncated.
    pub(crate) count: u64,
    /// `after - before` for differential input.
    pub(crate) delta: Option<i64>,
}

fn truncate_count(c: f64) -> u64 {
    // Saturating cast: NaN → 0, huge → u64::MAX; counts are never negative after parsing.
    c.trunc() as u64
}

pub(crate) fn line_order(a: &Line<'_>, b: &Line<'_>) -> std::cmp::Ordering {
    (a.stack, a.count, a.delta).cmp(&(b.stack, b.count, b.delta))
}

/// Sorts stacks by bytes. Large inputs are sorted in chunks on scoped threads and then merged:
/// comparing long stacks scattered over a big buffer is memory-bound, so a second core helps.
pub(crate) fn sort_lines(lines: &mut Vec<Line<'_>>) {
    const PARALLEL_FROM: usize = 32 * 1024;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    if lines.len() < PARALLEL_FROM || threads < 2 {
        lines.sort_unstable_by(line_order);
        return;
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for part in lines.chunks_mut(chunk) {
            scope.spawn(move || part.sort_unstable_by(line_order));
        }
    });
    // Pairwise merges of the sorted runs until one remains.
    let mut runs: Vec<Vec<Line<'_>>> = Vec::with_capacity(threads);
    let mut rest = std::mem::take(lines);
    while rest.len() > chunk {
        let tail = rest.split_off(chunk);
        runs.push(rest);
        rest = tail;
    }
    runs.push(rest);
    while runs.len() > 1 {
        let b = runs.pop().unwrap_or_default();
        let a = runs.pop().unwrap_or_default();
        let mut merged = Vec::with_capacity(a.len() + b.len());
        let (mut ia, mut ib) = (a.into_iter().peekable(), b.into_iter().peekable());
        loop {
            let take_a = match (ia.peek(), ib.peek()) {
                (Some(x), Some(y)) => line_order(x, y) != std::cmp::Ordering::Greater,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            merged.extend(if take_a { ia.next() } else { ib.next() });
        }
        runs.push(merged);
    }
    *lines = runs.pop().unwrap_or_default();
}

/// Cuts a stack so it starts at its deepest frame listed in `base` (the leaf itself does not
/// count, and a base at the root leaves nothing to re-root); stacks without one are dropped.
fn rebase<'a>(stack: &'a str, base: &[String]) -> Option<&'a str> {
    let leaf_start = stack.rfind(';').map_or(0, |i| i + 1);
    let mut end = leaf_start.checked_sub(1)?;
    loop {
        let start = stack[..end].rfind(';').map_or(0, |i| i + 1);
        if base.iter().any(|b| b == &stack[start..end]) {
            return if start == 0 {
                None
            } else {
                Some(&stack[start..])
            };
        }
        end = start.checked_sub(1)?;
    }
}

/// Reversed copies of the stacks (`--reverse`: leaf becomes root); empty otherwise, since
/// every other mode borrows the input.
pub(crate) fn reversed_stacks<'a>(
    input: impl Iterator<Item = (&'a str, f64, Option<f64>)>,
    options: &Options,
) -> Vec<String> {
    if !options.reverse_stack_order {
        return Vec::new();
    }
    input
        .map(|(stack, _, _)| {
            let mut s = String::with_capacity(stack.len());
            for (i, f) in stack.split(';').rev().enumerate() {
                if i > 0 {
                    s.push(';');
                }
                s.push_str(f);
            }
            s.trim().to_owned()
        })
        .collect()
}

/// Turns the input into [`Line`]s: truncated counts, differentials, the reversed stacks when
/// `reversed` is non-empty, and re-rooting at `options.base` (dropping stacks without a base).
pub(crate) fn prepare<'s, 'a: 's>(
    input: impl ExactSizeIterator<Item = (&'a str, f64, Option<f64>)>,
    reversed: &'s [String],
    options: &Options,
) -> Vec<Line<'s>> {
    let mut lines: Vec<Line<'s>> = Vec::with_capacity(input.len());
    for (i, (stack, first, second)) in input.enumerate() {
        let stack: &str = if options.reverse_stack_order {
            &reversed[i]
        } else {
            stack
        };
        let (count, delta) = match second {
            Some(after) => {
                let (a, b) = (truncate_count(after), truncate_count(first));
                (
                    a,
                    Some((a as i128 - b as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64),
                )
            }
            None => (truncate_count(first), None),
        };
        let stack = if options.base.is_empty() || options.reverse_stack_order || options.flame_chart
        {
            stack
        } else {
            match rebase(stack, &options.base) {
                Some(s) => s,
                None => continue,
            }
        };
        lines.push(Line {
            stack,
            count,
            delta,
        });
    }
    lines
}

/// Puts the lines in drawing order: sorted by stack, except for a flame chart (input order,
/// oldest first) and `no_sort` (checked, not sorted).
pub(crate) fn order(lines: &mut Vec<Line<'_>>, options: &Options) -> Result<(), FlameGraphError> {
    let sorted = |lines: &[Line<'_>]| lines.windows(2).all(|w| w[0].stack <= w[1].stack);
    if options.reverse_stack_order {
        sort_lines(lines);
    } else if options.flame_chart {
        // Input is newest-first; drawing runs left (old) to right (new).
        lines.reverse();
    } else if options.no_sort {
        if let Some(i) = lines.windows(2).position(|w| w[0].stack > w[1].stack) {
            return Err(FlameGraphError::Unsorted { line: i + 2 });
        }
    } else if !sorted(lines) {
        // Collapsers already emit sorted output; checking first makes that case O(n).
        // Equal stacks merge into one frame path, so their relative order does not matter.
        sort_lines(lines);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_parallel_sort_equals_plain_sort() {
        let mut state = 99u64;
        let stacks: Vec<String> = (0..70_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!(
                    "root;f{};g{};h{}",
                    state >> 60,
                    (state >> 40) % 50,
                    (state >> 8) % 1000
                )
            })
            .collect();
        let make = || -> Vec<Line<'_>> {
            stacks
                .iter()
                .enumerate()
                .map(|(i, s)| Line {
                    stack: s,
                    count: (i % 7) as u64,
                    delta: None,
                })
                .collect()
        };
        let mut fast = make();
        sort_lines(&mut fast);
        let mut plain = make();
        plain.sort_by(line_order);
        let key = |v: &[Line<'_>]| {
            v.iter()
                .map(|l| (l.stack.to_owned(), l.count))
                .collect::<Vec<_>>()
        };
        assert_eq!(fast.len(), plain.len());
        assert_eq!(key(&fast), key(&plain));
    }

    #[test]
    fn rebase_keeps_deepest_non_leaf_base() {
        let base = vec!["B".to_owned()];
        assert_eq!(rebase("A;B;C;B;D", &base), Some("B;D"));
        assert_eq!(rebase("A;C;B", &base), None);
        assert_eq!(rebase("B;C", &base), None);
        assert_eq!(rebase("A", &base), None);
    }
}
