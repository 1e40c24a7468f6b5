// A hot loop two calls below main, in a class template, for argv[1] milliseconds: its stacks
// must unwind through libstdc++-using code and glibc's start-up (__libc_start_call_main,
// __libc_start_main, _start).
#include <chrono>
#include <cstdlib>
#include <iostream>

template <typename T> struct Mixer {
    __attribute__((noinline)) T hot_loop(T x) {
        for (T i = 0; i < 50000; i++) {
            x = x * 6364136223846793005UL + i;
            __asm__ volatile("" : "+r"(x));
        }
        return x;
    }
};

__attribute__((noinline)) unsigned long middle_call(unsigned long seed) {
    Mixer<unsigned long> m;
    unsigned long r = m.hot_loop(seed);
    __asm__ volatile("" : "+r"(r));
    return r ^ 1;
}

int main(int argc, char **argv) {
    using clock = std::chrono::steady_clock;
    auto end = clock::now() + std::chrono::milliseconds(argc > 1 ? std::atoi(argv[1]) : 500);
    unsigned long acc = 0, seed = 0;
    while (clock::now() < end)
        acc ^= middle_call(seed++);
    std::cout << acc << std::endl;
    return 0;
}
