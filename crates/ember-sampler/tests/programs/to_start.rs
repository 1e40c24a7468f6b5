// A hot loop two calls below `main`, for argv[1] milliseconds, on the main thread and on one
// spawned thread: their stacks must unwind through the Rust runtime
// (std::rt::lang_start_internal) and glibc's start-up (__libc_start_call_main,
// __libc_start_main, _start), and through glibc's thread start (start_thread, clone3).
use std::hint::black_box;
use std::time::{Duration, Instant};

#[inline(never)]
fn hot_loop(mut x: u64) -> u64 {
    for i in 0..50_000u64 {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    x
}

#[inline(never)]
fn middle_call(seed: u64) -> u64 {
    hot_loop(black_box(seed)) ^ 1
}

#[inline(never)]
fn spin_until(end: Instant) -> u64 {
    let mut acc = 0;
    let mut seed = 0;
    while Instant::now() < end {
        acc ^= middle_call(seed);
        seed += 1;
    }
    acc
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500);
    let end = Instant::now() + Duration::from_millis(ms);
    let thread = std::thread::spawn(move || spin_until(end));
    let acc = spin_until(end) ^ thread.join().unwrap();
    println!("{acc}");
}
