// A hot loop that lives entirely in an #[inline(always)] function, so in an
// optimised build its samples carry only the caller's symbol; DWARF inline
// records are the only way to see it. Runs for argv[1] milliseconds.
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(always)]
fn mix_inlined_hot(mut x: u64, rounds: u64) -> u64 {
    for i in 0..rounds {
        x = (x.wrapping_mul(6364136223846793005).wrapping_add(i)) ^ (x >> 29);
    }
    x
}

#[inline(never)]
fn outer_caller(seed: u64) -> u64 {
    let mut acc = 0;
    for k in 0..64 {
        acc ^= mix_inlined_hot(black_box(seed.wrapping_add(k)), black_box(20_000));
    }
    acc
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let end = Instant::now() + Duration::from_millis(ms);
    let mut acc = 0u64;
    let mut seed = 1u64;
    while Instant::now() < end {
        acc ^= outer_caller(black_box(seed));
        seed += 1;
    }
    println!("{acc}");
}
