//! The workload both profilers sample: CPU-bound work at the bottom of 28–40 frames of
//! recursion, along a few hundred distinct paths into four leaves, so a profile has the
//! depth of a service's stacks and more than one stack to symbolize.

use std::hint::black_box;

/// Recurses `depth` frames, then runs `f` at the bottom (the stack for one capture).
#[inline(never)]
pub fn at_depth(depth: usize, f: &mut dyn FnMut()) {
    if depth == 0 {
        f();
    } else {
        at_depth(black_box(depth - 1), f);
    }
    // Keeps the call from becoming a tail call, so every level keeps its frame.
    black_box(depth);
}

/// Runs `units` units of work (about 20 µs each on this VM); returns a value to keep.
pub fn burn(units: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..units {
        acc ^= down_a(28 + (i % 13) as usize, i);
    }
    black_box(acc)
}

/// One level of recursion; the unit's low bits pick the path (`down_a` or `down_b`).
#[inline(never)]
fn down_a(depth: usize, unit: u64) -> u64 {
    let r = if depth == 0 {
        leaf(unit)
    } else if (unit >> (depth % 4)) & 1 == 0 {
        down_a(depth - 1, unit)
    } else {
        down_b(depth - 1, unit)
    };
    black_box(r)
}

#[inline(never)]
fn down_b(depth: usize, unit: u64) -> u64 {
    let r = if depth == 0 {
        leaf(unit)
    } else if (unit >> (depth % 4)) & 2 == 0 {
        down_a(depth - 1, unit)
    } else {
        down_b(depth - 1, unit)
    };
    black_box(r.rotate_left(1))
}

fn leaf(unit: u64) -> u64 {
    match unit % 4 {
        0 => mix::<0>(unit),
        1 => mix::<1>(unit),
        2 => mix::<2>(unit),
        _ => mix::<3>(unit),
    }
}

/// The hot loop: xorshift rounds, one monomorphised copy per leaf.
#[inline(never)]
fn mix<const K: u64>(seed: u64) -> u64 {
    let mut x = seed ^ (0x9e37_79b9_7f4a_7c15 + K);
    for _ in 0..4_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = black_box(x);
    }
    x
}
