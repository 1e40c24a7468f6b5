/* CPU time split across three call paths in known proportions (50/30/20).
 * Each path burns a fixed number of iterations of the same loop, so the
 * ratio of CPU time equals the ratio of iteration counts. */
#include <stdlib.h>

volatile unsigned long sink;

/* Called from inside each busy loop so the loop's function is not a leaf
 * and sets up its frame before the loop: gcc 12 omits or shrink-wraps the
 * frame of leaf code even with -fno-omit-frame-pointer, and a frame-pointer
 * walk from frameless code skips its caller (the tests also pass
 * -fno-shrink-wrap so the frame is set up at function entry). */
__attribute__((noinline)) void tick(void) { __asm__ volatile(""); }

__attribute__((noinline)) static void burn(unsigned long n) {
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        __asm__ volatile("" : "+r"(x));
        if ((i & 0xfffff) == 0) tick();
    }
    sink = x;
}

__attribute__((noinline)) void path_a(unsigned long n) { burn(n * 5); sink++; }
__attribute__((noinline)) void path_b(unsigned long n) { burn(n * 3); sink++; }
__attribute__((noinline)) void path_c(unsigned long n) { burn(n * 2); sink++; }

int main(int argc, char **argv) {
    unsigned long rounds = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
    for (unsigned long r = 0; r < rounds; r++) {
        path_a(1000000);
        path_b(1000000);
        path_c(1000000);
    }
    return 0;
}
