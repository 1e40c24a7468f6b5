/* Two named worker threads burning CPU, plus an idle main thread, so
 * samples can be checked for per-thread tid/thread_name labels. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

volatile unsigned long sink;

/* Called from inside each busy loop so the loop's function is not a leaf
 * and sets up its frame before the loop: gcc 12 omits or shrink-wraps the
 * frame of leaf code even with -fno-omit-frame-pointer, and a frame-pointer
 * walk from frameless code skips its caller (the tests also pass
 * -fno-shrink-wrap so the frame is set up at function entry). */
__attribute__((noinline)) void tick(void) { __asm__ volatile(""); }

__attribute__((noinline)) static void spin(unsigned long n) {
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 1;
        __asm__ volatile("" : "+r"(x));
        if ((i & 0xfffff) == 0) tick();
    }
    sink = x;
}

__attribute__((noinline)) static void *worker_alpha(void *arg) {
    pthread_setname_np(pthread_self(), "worker-alpha");
    spin((unsigned long)arg);
    return 0;
}

__attribute__((noinline)) static void *worker_beta(void *arg) {
    pthread_setname_np(pthread_self(), "worker-beta");
    spin((unsigned long)arg);
    return 0;
}

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 300000000UL;
    pthread_t a, b;
    pthread_create(&a, 0, worker_alpha, (void *)n);
    pthread_create(&b, 0, worker_beta, (void *)n);
    pthread_join(a, 0);
    pthread_join(b, 0);
    return 0;
}
