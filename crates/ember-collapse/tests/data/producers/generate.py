#!/usr/bin/env python3
"""Writes the producer samples of this folder (see README.md): each file is printed with the
exact printf formats of the producer named in its file name, over made-up but realistic
threads, symbols and modules. Deterministic (fixed seeds): re-running gives the same bytes.

    python3 generate.py            # in this folder
    ./expected.sh                  # then the expected folded files, from stackcollapse-perf.pl
"""
import random

# --- Android simpleperf, scripts/report_sample.py -------------------------------------------
# Current (2019 onwards, platform/system/extras simpleperf/scripts/report_sample.py):
#   '%s\t%d/%d [%03d] %d.%06d: %d %s:'   comm, pid, tid, cpu, sec, usec, period, event
#   '\t%16x %s (%s)'                       ip, symbol, dso
# First version (2016-2017, same file):
#   '%s\t%d [%03d] %d.%d:\t\t%d %s:'     comm, tid, cpu, sec, usec, period, event
#   '%16x\t%s (%s)'                        ip, symbol, dso
# Both print an empty line after each sample. ShowIpForUnknownSymbol() makes unknown symbols
# `<dso file name>[+<offset>]`; `--header` prints `# key : value` lines first.


def simpleperf_current(comm, pid, tid, cpu, t_ns, period, event, frames):
    sec = t_ns // 1000000000
    usec = (t_ns - sec * 1000000000) // 1000
    out = '%s\t%d/%d [%03d] %d.%06d: %d %s:\n' % (comm, pid, tid, cpu, sec, usec, period, event)
    for ip, sym, dso in frames:
        out += '\t%16x %s (%s)\n' % (ip, sym, dso)
    return out + '\n'


def simpleperf_2017(comm, tid, cpu, t_ns, period, event, frames):
    sec = t_ns // 1000000000
    usec = (t_ns - sec * 1000000000) // 1000
    out = '%s\t%d [%03d] %d.%d:\t\t%d %s:\n' % (comm, tid, cpu, sec, usec, period, event)
    for ip, sym, dso in frames:
        out += '%16x\t%s (%s)\n' % (ip, sym, dso)
    return out + '\n'


def android():
    random.seed(14)
    art = '/apex/com.android.art/lib64/libart.so'
    libc = '/apex/com.android.runtime/lib64/bionic/libc.so'
    hwui = '/system/lib64/libhwui.so'
    apk = ('/data/app/~~Qx3bV9k1nTQ==/com.example.app-7fGh2Lw==/base.apk!'
           '/lib/arm64-v8a/libnative.so')
    oat = '/system/framework/arm64/boot-framework.oat'
    kernel = '[kernel.kallsyms]'
    jit = '[JIT app cache]'
    start = (0x7a1b2c1000, '__pthread_start(void*)', libc)
    stacks = [
        ('com.example.app', [
            (0xffffffc0100a1234, 'el0_svc_common', kernel),
            (0x7a1b2c3d40, '__epoll_pwait', libc),
            (0x7a1c000100, 'android::Looper::pollInner(int)', '/system/lib64/libutils.so'),
            (0x7a1d000200, 'android.os.MessageQueue.next', oat),
            (0x7a1d000300, 'android.os.Looper.loop', oat),
            (0x7a1e000400, 'com.android.internal.os.ZygoteInit.main', oat),
            (0x7a1b2c0000, '__libc_init', libc)]),
        ('RenderThread', [
            (0x7a2a000010, 'android::uirenderer::renderthread::CanvasContext::draw()', hwui),
            (0x7a2a000020, 'android::uirenderer::renderthread::DrawFrameTask::run()', hwui),
            (0x7a2a000030, 'android::uirenderer::renderthread::RenderThread::threadLoop()',
             hwui),
            start, (0x7a1b2c1100, '__start_thread', libc)]),
        ('Jit thread pool', [
            (0x7a3a000010, 'art::jit::JitCompiler::CompileMethod(art::Thread*, '
             'art::jit::JitMemoryRegion*, art::ArtMethod*, art::CompilationKind)', art),
            (0x7a3a000020, 'art::ThreadPoolWorker::Run()', art), start]),
        ('Binder:1234_2', [
            (0x7a4a000010, 'libart.so[+2d4c10]', art),
            (0x7a4a000020, 'android::IPCThreadState::joinThreadPool(bool)',
             '/system/lib64/libbinder.so'),
            start]),
        ('com.example.app', [
            (0x7b0000a000, 'Java_com_example_app_Native_compute', apk),
            (0x7b0000b000, 'com.example.app.MainActivity.onClick', jit),
            (0x7b0000c000, '[unknown]', '[unknown]'),
            (0x7b0000d000, 'libnative.so[+1f00]', apk)]),
        ('HeapTaskDaemon', [
            (0x7a5a000010, 'art::gc::collector::ConcurrentCopying::MarkingPhase()', art),
            (0x7a5a000020, 'art::gc::Heap::CollectGarbageInternal(art::gc::collector::GcType, '
             'art::gc::GcCause, bool, unsigned int)', art),
            start]),
        ('mali-cmar-backe', [
            (0x7a6a000010, '[unknown]', '/vendor/lib64/egl/libGLES_mali.so'),
            (0x7a6a000020, '[unknown]', '//anon'),
            start]),
    ]
    ids = {'com.example.app': (1234, 1234), 'RenderThread': (1234, 1262),
           'Jit thread pool': (1234, 1241), 'Binder:1234_2': (1234, 1250),
           'HeapTaskDaemon': (1234, 1245), 'mali-cmar-backe': (1234, 1290)}
    t = 5123456789012
    current = ('# ========\n'
               '# cmdline : /data/local/tmp/simpleperf record --app com.example.app -g '
               '--duration 10 -o /data/local/tmp/perf.data\n'
               '# arch : arm64\n# ========\n#\n')
    first = ''
    for i in range(60):
        comm, frames = stacks[random.randrange(len(stacks))]
        pid, tid = ids[comm]
        period = random.choice([250000, 251000, 249876, 1000000])
        # A few samples of a second event: only the first event type seen is folded.
        event = 'cpu-cycles' if i % 17 == 5 else 'cpu-clock'
        current += simpleperf_current(comm, pid, tid, random.randrange(8), t, period, event,
                                      frames)
        first += simpleperf_2017(comm, tid, random.randrange(8), t, period, event, frames)
        t += 1000000 + random.randrange(99999)
    open('simpleperf-report-sample.txt', 'w').write(current)
    open('simpleperf-report-sample-2017.txt', 'w').write(first)


# --- Linux perf script ----------------------------------------------------------------------
# tools/perf/builtin-script.c, with a call graph: comm '%s ', PID/TID '%7d/%-7d ' (TID alone
# '%7d '), cpu '[%03d] ', time '%5lu.%06lu: ', period '%10llu ', event '%s:', then one
# '\t%16llx %s+0x%llx (%s)' line per frame (the offset only for known symbols) and an empty
# line. Comm is the kernel's 15-byte thread name, spaces and digits included.

def perf_event(comm, pid, tid, cpu, t_ns, period, event):
    sec, nsec = divmod(t_ns, 1000000000)
    if pid is None:
        return '%s %7d %5d.%06d: %10d %s:\n' % (comm, tid, sec, nsec // 1000, period, event)
    return '%s %7d/%-7d [%03d] %5d.%06d: %10d %s:\n' % (comm, pid, tid, cpu, sec, nsec // 1000,
                                                      period, event)


def perf_frame(ip, sym, dso, off):
    name = sym if off is None else '%s+0x%x' % (sym, off)
    return '\t%16x %s (%s)\n' % (ip, name, dso)


def linux():
    random.seed(7)
    kernel = '[kernel.kallsyms]'
    libc = '/usr/lib/x86_64-linux-gnu/libc.so.6'
    xul = '/usr/lib/firefox/libxul.so'
    stacks = [
        ('DOM Worker 12', 4100, 4133, [
            (0x7f01a2b3c4d5, 'js::RunScript', xul, 0x5a),
            # A JIT's double-mapped memfd: a module with a space and parentheses.
            (0x7f01a2b3c4d6, '[unknown]', '/memfd:doublemapper (deleted)', None),
            (0x7f01a2b3c4d7, 'start_thread', libc, 0x2c)]),
        ('worker 1', 5000, 5001, [
            (0x55d1e2f30001, 'compute', '/opt/app/bin/app', 0x10),
            (0x7ffd3c5f0a12, '[unknown]', '[vdso]', None),
            (0x7f3c2b1a0003, 'clone3', libc, 0x2b)]),
        ('Pool 3 thread', 5000, 5007, [
            (0x7f3c2b1a1001, '[unknown]', '//anon', None),
            (0x7f3c2b1a1002, '[unknown]', '[unknown]', None),
            (0x7f3c2b1a1003, '[unknown]', '/tmp/perf-5000.map', None)]),
        ('node', 6000, 6000, [
            # perf's jitdump injection names the module after the thread.
            (0x3a1c2b0001, '[unknown]', '[JIT] tid 6000', None),
            (0x3a1c2b0002, 'LazyCompile:*fib /srv/app.js:3', '/tmp/perf-6000.map', None),
            (0x55e0a1b20003, 'v8::internal::Execution::Call', '/usr/bin/node', 0x7a)]),
        ('swapper', 0, 0, [
            (0xffffffff81a0c0de, 'native_safe_halt', kernel, 5),
            (0xffffffff81000000, '[unknown]', kernel, None),
            (0xffffffff81aebbfe, 'start_kernel', '[kernel.kallsyms].init.text', 0x3fe)]),
        ('kworker/u16:2-e', 33, 33, [
            (0xffffffff81234567, 'process_one_work', kernel, 0x1e4),
            (0xffffffff81234999, 'worker_thread', kernel, 0x4d),
            (0xffffffff81111111, 'ret_from_fork', kernel, 0x22)]),
    ]
    t = 83456000123456
    pid_tid = ''
    tid_only = ''
    for i in range(80):
        comm, pid, tid, frames = stacks[random.randrange(len(stacks))]
        period = random.choice([10101010, 250000, 1, 3125000])
        event = 'instructions' if i % 13 == 7 else 'cycles'
        body = ''.join(perf_frame(*f) for f in frames)
        pid_tid += perf_event(comm, pid, tid, random.randrange(16), t, period, event) + body + '\n'
        tid_only += perf_event(comm, None, tid, 0, t, period, 'cpu-clock') + body + '\n'
        t += 1000000 + random.randrange(5000)
    open('perf-script-pid-tid-cpu-period.txt', 'w').write(pid_tid)
    # Cut by a pipe or a crash: no empty line after the last sample, no final newline.
    open('perf-script-tid-no-trailing-blank.txt', 'w').write(tid_only.rstrip('\n'))


android()
linux()
