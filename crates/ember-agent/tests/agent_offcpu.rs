//! The agent (in-process) with `profiling.off_cpu`: a real C program blocks 300 ms at a time
//! in `sleep_long` and 20 ms at a time in `sleep_short`; with `min_duration: 100ms` the real
//! server receives `process_cpu:off_cpu:nanoseconds:cpu:nanoseconds` profiles of the
//! program with `sleep_long` blocked for about the time it slept, and no `sleep_short` (but
//! for the naps a loaded host kept it off the CPU 100 ms or more, which the program measures
//! itself); after a reload with `min_duration: 5ms` the short naps are counted too.
//!
//! The program's name is unique to this run: the agent profiles every process whose comm
//! matches and the service name is the executable's name, so a sleeper of another run (a
//! concurrent one in another checkout, or one orphaned by a killed test binary) would add its
//! own sleeps to the same series: that doubled `sleep_long` in a CI run on a shared machine.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;
use support::{
    RunningAgent, Server, folded_count, host_perf_allowed, metric, query_folded, temp_dir, wait_for,
};

const SLEEPER: &str = r#"#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* Not inlined, and not a tail call: a frame-pointer walk from inside libc (built without
 * frame pointers) skips the leaf's caller, which must be this shared helper and not the
 * functions the test looks for. */
__attribute__((noinline)) void nap(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, 0);
    __asm__ volatile("");
}

__attribute__((noinline)) void sleep_long(void) {
    nap(300);
    __asm__ volatile("");
}

__attribute__((noinline)) void sleep_short(void) {
    nap(20);
    __asm__ volatile("");
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* argv[1]: the test's pid; argv[2]: where to write the total time of the short naps that took
 * 100 ms or more (a wait for a CPU on a loaded host is off-CPU time too). */
int main(int argc, char **argv) {
    /* Die with the test (even a killed one) rather than sleep on as an orphan; argv[1] is
     * checked in case the test died before the request. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (argc < 3 || getppid() != (pid_t)atol(argv[1])) exit(1);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    long long slow = 0;
    for (;;) {
        sleep_long();
        for (int i = 0; i < 5; i++) {
            long long began = now_ns();
            sleep_short();
            long long took = now_ns() - began;
            if (took >= 100000000LL) {
                slow += took;
                FILE *f = fopen(tmp, "w");
                if (f) {
                    fprintf(f, "%lld\n", slow);
                    fclose(f);
                    rename(tmp, argv[2]);
                }
            }
        }
    }
}
"#;

const OFF_CPU: &str = "process_cpu:off_cpu:nanoseconds:cpu:nanoseconds";

/// Folded off-CPU stacks of a service ("" until the server has some).
fn folded(server: &str, service: &str) -> String {
    query_folded(server, &format!("{{service_name=\"{service}\"}}"), OFF_CPU)
}

/// A child process killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn off_cpu_time_above_the_threshold_reaches_the_server() {
    if !host_perf_allowed() {
        return;
    }
    let dir = temp_dir("agent-offcpu");
    let dir = dir.path();
    let src = dir.join("sleeper.c");
    std::fs::write(&src, SLEEPER).unwrap();
    // At most 15 bytes, the kernel's comm: "ofsleep" and a pid of up to 7 digits.
    let name = format!("ofsleep{}", std::process::id());
    let bin = dir.join(&name);
    let ok = Command::new("gcc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("gcc must be installed");
    assert!(ok.success());
    let server = Server::start(&dir.join("data"), &[]);
    let config = format!(
        "admin: {{listen: 127.0.0.1:0}}\n\
         profiling:\n  upload_interval: 2s\n  targets: {{all: false, comm: {name}}}\n  \
         off_cpu: {{enabled: true, min_duration: 100ms}}\n\
         exporters:\n  server: {{url: 'http://{}'}}\n",
        server.addr
    );
    let agent = RunningAgent::start(&config);
    // Start the program once the sampler runs, so its sleeps are all seen.
    assert!(wait_for(Duration::from_secs(20), || {
        metric(&agent.metrics(), "ember_agent_profiler_running") == Some(1.0)
    }));
    let slow_file = dir.join("slow_naps");
    let started = std::time::Instant::now();
    let sleeper = Killed(
        Command::new(&bin)
            .arg(std::process::id().to_string())
            .arg(&slow_file)
            .stdout(Stdio::null())
            .spawn()
            .expect("start the sleeper"),
    );
    let mut text = String::new();
    let arrived = wait_for(Duration::from_secs(40), || {
        text = folded(&server.addr, &name);
        folded_count(&text, "sleep_long") >= 2_000_000_000
    });
    let elapsed = started.elapsed().as_nanos() as u64;
    assert!(
        arrived,
        "sleep_long off-CPU time did not reach 2 s ({:?} records lost):\n{text}\n{}",
        metric(&agent.metrics(), "ember_agent_lost_samples_total"),
        agent.log()
    );
    let long = folded_count(&text, "sleep_long");
    // The program sleeps 300 ms of every 400 ms in sleep_long: never more than the elapsed time.
    assert!(
        long <= elapsed,
        "sleep_long {long} ns > {elapsed} ns elapsed"
    );
    // 20 ms naps are under the 100 ms threshold: none of them is counted, unless the host kept
    // the program off the CPU 100 ms or more in one. Those the program measured (on its side,
    // a nap is longer than the time off the CPU; a nap in progress at the cut is written when
    // it ends, hence the wait).
    let short = folded_count(&text, "sleep_short");
    let mut slow = 0;
    let measured = wait_for(Duration::from_secs(5), || {
        slow = std::fs::read_to_string(&slow_file)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .unwrap_or(0);
        short <= slow
    });
    assert!(
        measured,
        "sleep_short {short} ns counted, the naps of 100 ms or more took {slow} ns ({:?} records \
         lost):\n{text}",
        metric(&agent.metrics(), "ember_agent_lost_samples_total")
    );
    // Lower the threshold under 20 ms (hot reload): the short naps now count.
    agent.reload(&config.replace("min_duration: 100ms", "min_duration: 5ms"));
    let short = wait_for(Duration::from_secs(30), || {
        text = folded(&server.addr, &name);
        folded_count(&text, "sleep_short") >= 200_000_000
    });
    assert!(
        short,
        "sleep_short never counted under a 5 ms threshold:\n{text}"
    );
    drop(sleeper);
    let stopped = agent.terminate();
    assert!(stopped.flushed && stopped.secs < 5.0, "{stopped:?}");
}
