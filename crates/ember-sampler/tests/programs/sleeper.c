/* Blocks for known times in two functions (300 ms and 100 ms in 10 ms
 * sleeps) so off-CPU time per stack can be checked. */
#include <time.h>

__attribute__((noinline)) void nap(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, 0);
    __asm__ volatile("");
}

__attribute__((noinline)) void sleep_long(void) {
    for (int i = 0; i < 30; i++) nap(10);
    __asm__ volatile("");
}

__attribute__((noinline)) void sleep_short(void) {
    for (int i = 0; i < 10; i++) nap(10);
    __asm__ volatile("");
}

int main(void) {
    sleep_long();
    sleep_short();
    return 0;
}
