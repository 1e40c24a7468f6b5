// A hot loop two calls below main, for argv[1] milliseconds: its stacks must unwind through
// glibc's start-up (__libc_start_call_main, __libc_start_main, _start).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__attribute__((noinline)) unsigned long hot_loop(unsigned long x) {
    for (unsigned long i = 0; i < 50000; i++) {
        x = x * 6364136223846793005UL + i;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

__attribute__((noinline)) unsigned long middle_call(unsigned long seed) {
    unsigned long r = hot_loop(seed);
    __asm__ volatile("" : "+r"(r));
    return r ^ 1;
}

int main(int argc, char **argv) {
    double end = now_ms() + (argc > 1 ? atoi(argv[1]) : 500);
    unsigned long acc = 0, seed = 0;
    while (now_ms() < end)
        acc ^= middle_call(seed++);
    printf("%lu\n", acc);
    return 0;
}
