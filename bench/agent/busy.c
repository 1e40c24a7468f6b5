/* Busy workload for the agent benchmark: one worker per CPU, each spinning through a
 * handful of distinct call paths (recursion depths, different leaf functions) so the
 * profiler sees a realistic spread of stacks rather than one hot loop. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t leaf_hash(uint64_t x) {
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}
__attribute__((noinline)) static uint64_t leaf_sum(uint64_t x) {
    uint64_t s = 0;
    for (int i = 0; i < 3000; i++) s += (x ^ (uint64_t)i) >> 3;
    return s;
}
__attribute__((noinline)) static uint64_t leaf_div(uint64_t x) {
    uint64_t s = 1;
    for (int i = 1; i < 800; i++) s += (x | 1) / (uint64_t)i;
    return s;
}
__attribute__((noinline)) static uint64_t recurse(int depth, uint64_t x) {
    if (depth == 0) {
        switch (x % 3) {
        case 0: return leaf_hash(x);
        case 1: return leaf_sum(x);
        default: return leaf_div(x);
        }
    }
    return recurse(depth - 1, x + (uint64_t)depth) + 1;
}
__attribute__((noinline)) static void path_a(uint64_t x) { sink += recurse((int)(x % 7), x); }
__attribute__((noinline)) static void path_b(uint64_t x) { sink += recurse((int)(x % 13), x * 3); }
__attribute__((noinline)) static void path_c(uint64_t x) { sink += leaf_hash(x) + leaf_sum(x); }

int main(int argc, char **argv) {
    long workers = argc > 1 ? atol(argv[1]) : sysconf(_SC_NPROCESSORS_ONLN);
    for (long w = 1; w < workers; w++)
        if (fork() == 0) break;
    uint64_t x = (uint64_t)getpid();
    for (;;) {
        x++;
        switch (x % 4) {
        case 0: path_a(x); break;
        case 1: path_b(x); break;
        case 2: path_c(x); break;
        default: path_a(x * 7); break;
        }
    }
}
