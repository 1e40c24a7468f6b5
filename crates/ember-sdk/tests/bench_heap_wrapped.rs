//! The allocation-heavy workload of `bench.rs` with the sampling allocator (2 MiB) as the
//! global allocator; compare with `bench.rs`'s `allocation_heavy_workload_system` (ignored;
//! run both as `bench.rs` says).

mod common;

#[global_allocator]
static ALLOC: ember_sdk::SamplingAllocator = ember_sdk::SamplingAllocator::system();

#[test]
#[ignore]
fn allocation_heavy_workload_sampled() {
    let ns = common::allocation_heavy_round_ns(2_000, 9);
    eprintln!("allocation-heavy round, sampling allocator (2 MiB): {ns:.0} ns");
}
