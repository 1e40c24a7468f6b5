/* Forks a child that execs another program (argv[1..]) while the parent
 * burns CPU in parent_work, so samples must be attributed to the right
 * process image before and after exec. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned long sink;

/* Called from inside each busy loop so the loop's function is not a leaf
 * and sets up its frame before the loop: gcc 12 omits or shrink-wraps the
 * frame of leaf code even with -fno-omit-frame-pointer, and a frame-pointer
 * walk from frameless code skips its caller (the tests also pass
 * -fno-shrink-wrap so the frame is set up at function entry). */
__attribute__((noinline)) void tick(void) { __asm__ volatile(""); }

__attribute__((noinline)) void parent_work(unsigned long n) {
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) {
        x = x * 6364136223846793005UL + 3;
        __asm__ volatile("" : "+r"(x));
        if ((i & 0xfffff) == 0) tick();
    }
    sink = x;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[1], argv + 1);
        _exit(127);
    }
    parent_work(200000000UL);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
