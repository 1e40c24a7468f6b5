// Reads the monotonic clock in a tight loop for argv[1] milliseconds, through a
// non-inlined tick(): most samples land in the vDSO's clock_gettime, whose callers only the
// vDSO's own unwind tables lead back to.
#include <stdlib.h>
#include <time.h>

__attribute__((noinline)) long tick(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_nsec;
}

int main(int argc, char **argv) {
    struct timespec start, now;
    double ms = argc > 1 ? atoi(argv[1]) : 500;
    long acc = 0;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        for (int i = 0; i < 1000; i++)
            acc += tick();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1e3 + (now.tv_nsec - start.tv_nsec) / 1e6 < ms);
    return (int)(acc & 1);
}
