//! The signal handler under stress, and walks over bad frame chains.
//!
//! `profiles_while_threads_allocate_lock_spawn_and_exit` records at the highest frequency
//! while threads allocate (through the sampling allocator, so the heap sampler's lock and
//! the handler meet), contend on a lock, push and pop label scopes, and start and exit;
//! `EMBER_SDK_STRESS_SECS` sets its length (4 s by default; the report's run used 180).
//! A watchdog aborts the process if the test does not end in time (a deadlock).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: ember_sdk::SamplingAllocator =
    ember_sdk::SamplingAllocator::with_rate(std::alloc::System, 32 << 10);

#[test]
fn profiles_while_threads_allocate_lock_spawn_and_exit() {
    let secs: u64 = std::env::var("EMBER_SDK_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let done = Arc::new(AtomicBool::new(false));
    {
        let done = done.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(secs + 120);
            while Instant::now() < deadline {
                if done.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!("stress test did not finish: deadlock?");
            std::process::abort();
        });
    }
    let rec = ember_sdk::CpuRecording::start(ember_sdk::MAX_FREQUENCY).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let work = Arc::new(AtomicU64::new(0));
    let shared = Arc::new(Mutex::new(HashMap::<u64, String>::new()));
    let mut threads = Vec::new();
    for i in 0..4 {
        let (stop, work) = (stop.clone(), work.clone());
        threads.push(std::thread::spawn(move || {
            let labels = ember_sdk::Labels::new([("worker", format!("alloc-{i}"))]);
            while !stop.load(Ordering::Relaxed) {
                labels.scope(|| {
                    let mut v: Vec<Vec<u8>> =
                        (0..64).map(|n| vec![n as u8; 100 + n * 37]).collect();
                    v.retain(|x| x.len() % 2 == 0);
                    let s: String = v.iter().map(|x| x.len().to_string()).collect();
                    std::hint::black_box(s);
                });
                work.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for i in 0..2 {
        let (stop, shared) = (stop.clone(), shared.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut m = shared.lock().unwrap();
                m.insert(n % 1024, format!("{i}-{n}"));
                n += 1;
            }
        }));
    }
    {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut spawned = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let kids: Vec<_> = (0..4)
                    .map(|k| {
                        std::thread::Builder::new()
                            .name(format!("short-{k}"))
                            .spawn(move || common::burn_hot(20_000 + k * 1000))
                            .unwrap()
                    })
                    .collect();
                for kid in kids {
                    kid.join().unwrap();
                }
                spawned += 4;
            }
            std::hint::black_box(spawned);
        }));
    }
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let profile = rec.finish();
    let heap = ember_sdk::heap_profile().expect("the sampling allocator is global here");
    done.store(true, Ordering::Relaxed);
    let p = ember_pprof::decode(&ember_pprof::encode_gzip(&profile)).unwrap();
    ember_pprof::decode(&ember_pprof::encode_gzip(&heap)).unwrap();
    let samples: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    let stats = ember_sdk::cpu_stats();
    eprintln!(
        "{secs} s: {samples} samples, {} work items, stats {stats:?}",
        work.load(Ordering::Relaxed)
    );
    assert!(samples > 0);
    assert!(work.load(Ordering::Relaxed) > 0);
    let labelled = p
        .sample
        .iter()
        .filter(|s| common::labels_of(&p, s).contains_key("worker"))
        .count();
    assert!(labelled > 0, "samples inside label scopes carry them");
}

#[test]
fn bad_frame_chains_end_the_walk() {
    let mut mem = vec![0usize; 64];
    let base = mem.as_ptr() as usize;
    let at = |i: usize| base + i * 8;
    let (lo, hi) = (base, base + 64 * 8);
    // A good chain of three frames whose last link points back down: three frames.
    mem[4] = at(8);
    mem[5] = 0x1111;
    mem[8] = at(12);
    mem[9] = 0x2222;
    mem[12] = at(2);
    mem[13] = 0x3333;
    let walk = |mem: &Vec<usize>, fp| ember_sdk::bench::walk_in(mem, fp, lo, hi);
    assert_eq!(walk(&mem, at(4)), [0x1111, 0x2222, 0x3333]);
    // A frame pointing to itself.
    mem[12] = at(12);
    assert_eq!(walk(&mem, at(4)), [0x1111, 0x2222, 0x3333]);
    // A wild pointer far outside the bounds: not even read.
    mem[12] = 0xdead_beef_0000;
    assert_eq!(walk(&mem, at(4)), [0x1111, 0x2222, 0x3333]);
    // Misaligned.
    mem[8] = at(12) + 3;
    assert_eq!(walk(&mem, at(4)), [0x1111, 0x2222]);
    // Just past the top: the 16 bytes of a frame must fit below `hi`.
    mem[8] = at(63);
    assert_eq!(walk(&mem, at(4)), [0x1111, 0x2222]);
    // A zero return address ends the stack.
    mem[8] = at(12);
    mem[13] = 0;
    assert_eq!(walk(&mem, at(4)), [0x1111, 0x2222]);
    // Null and below-bounds starts.
    assert!(walk(&mem, 0).is_empty());
    assert!(walk(&mem, base - 16).is_empty());
    // A long chain stops at the buffer, never overruns it.
    let mut long = vec![0usize; 300];
    let lb = long.as_ptr() as usize;
    for i in 0..149 {
        long[2 * i] = lb + (2 * i + 2) * 8;
        long[2 * i + 1] = 0x4000 + i;
    }
    let got = ember_sdk::bench::walk_in(&long, lb, lb, lb + 300 * 8);
    assert_eq!(got.len(), 64);
}

/// Real signals landing while the frame pointer register holds garbage: the handler must
/// end the walk (leaf only) and the process must not fault.
#[cfg(target_arch = "x86_64")]
#[test]
fn signals_during_garbage_frame_pointers_do_not_crash() {
    #[inline(never)]
    fn spin_with_rbp(rbp: usize, iters: u64) {
        // SAFETY: rbp is saved on the stack, replaced for a counted loop that touches no
        // memory, and restored; nothing in between uses it.
        unsafe {
            std::arch::asm!(
                "push rbp",
                "mov rbp, {bad}",
                "2:",
                "dec {n}",
                "jnz 2b",
                "pop rbp",
                bad = in(reg) rbp,
                n = inout(reg) iters => _,
            );
        }
    }
    let rec = ember_sdk::CpuRecording::start(ember_sdk::MAX_FREQUENCY).unwrap();
    let chain = vec![0usize; 8];
    let mut fake = chain.clone();
    // A chain in the heap (outside the stack range): rejected at the first check.
    fake[0] = usize::MAX - 7;
    fake[1] = 0x1234;
    let stack_local = [0usize, 0x5678, usize::MAX - 15, 0x9abc];
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        for bad in [
            0,
            8,
            0xdead_beef_0000,
            usize::MAX - 7,
            fake.as_ptr() as usize,
            stack_local.as_ptr() as usize,
            stack_local.as_ptr() as usize + 3,
        ] {
            spin_with_rbp(bad, 2_000_000);
        }
    }
    let p = rec.finish();
    let samples: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert!(samples > 0, "signals arrived while rbp was garbage");
    std::hint::black_box(stack_local);
}
