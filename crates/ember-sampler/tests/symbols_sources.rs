//! Every symbol source on real recordings: kernel frames named from
//! `/proc/kallsyms`, JIT code named from the `/tmp/perf-PID.map` its program
//! writes, Rust names in both manglings (legacy and v0) and C++ names
//! demangled. (Split debug files, stripped binaries and `--inline` are
//! covered in `record.rs`, debuginfod in `symbols_debuginfod.rs`.)
//!
//! Needs perf_event_open (root in CI), gcc, g++ and rustc.

use ember_pprof::{Profile, string};
use ember_sampler::{CallGraph, Options, Target};
use ember_samples::{Recording, Symbolizer, build_profile};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn work_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("symbols-sources-{test}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `source` to `dir/name.ext` and builds it with `compiler args`.
fn build(
    dir: &Path,
    name: &str,
    ext: &str,
    source: &str,
    compiler: &str,
    args: &[&str],
) -> PathBuf {
    let src = dir.join(format!("{name}.{ext}"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let status = Command::new(compiler)
        .args(args)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("{compiler} must be installed: {e}"));
    assert!(status.success(), "{compiler} failed for {name}");
    out
}

fn record(bin: &Path, arg: &str, call_graph: CallGraph) -> (Recording, Profile) {
    let mut opts = Options::new(Target::Command(vec![bin.into(), arg.into()]));
    opts.call_graph = call_graph;
    opts.frequency = 999;
    let rec = ember_sampler::record(&opts, |_| {}).expect("recording");
    assert!(rec.samples >= 100, "too few samples: {}", rec.samples);
    let (profile, _) = build_profile(&rec, &mut Symbolizer::new());
    ember_pprof::validate(&profile).expect("valid profile");
    (rec, profile)
}

/// (name, system name, mapping file) of the leaf frame of every sample,
/// with the sample count.
fn leaves(profile: &Profile) -> Vec<(String, String, String, i64)> {
    let mut out = Vec::new();
    for s in &profile.sample {
        let Some(loc) = s
            .location_id
            .first()
            .and_then(|id| profile.location.iter().find(|l| l.id == *id))
        else {
            continue;
        };
        let Some(line) = loc.line.first() else {
            continue;
        };
        let Some(f) = profile.function.iter().find(|f| f.id == line.function_id) else {
            continue;
        };
        let file = profile
            .mapping
            .iter()
            .find(|m| m.id == loc.mapping_id)
            .map(|m| string(profile, m.filename).to_string())
            .unwrap_or_default();
        out.push((
            string(profile, f.name).to_string(),
            string(profile, f.system_name).to_string(),
            file,
            s.value[0],
        ));
    }
    out
}

/// (name, system name) of every function of the profile.
fn functions(profile: &Profile) -> Vec<(String, String)> {
    profile
        .function
        .iter()
        .map(|f| {
            (
                string(profile, f.name).to_string(),
                string(profile, f.system_name).to_string(),
            )
        })
        .collect()
}

const SYSCALLS_C: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    unsigned long n = strtoul(argv[1], 0, 10);
    int fd = open("/dev/null", O_WRONLY);
    char c = 'x';
    for (unsigned long i = 0; i < n; i++) write(fd, &c, 1);
    return 0;
}
"#;

#[test]
fn kernel_frames_are_named_from_kallsyms() {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let kernel_names: HashSet<&str> = text
        .lines()
        .filter_map(|l| {
            let mut p = l.split_whitespace();
            let (addr, kind, name) = (p.next()?, p.next()?, p.next()?);
            (u64::from_str_radix(addr, 16).ok()? != 0 && "tTwW".contains(kind)).then_some(name)
        })
        .collect();
    assert!(
        !kernel_names.is_empty(),
        "kallsyms hides addresses (kptr_restrict)"
    );
    let dir = work_dir("kernel");
    let bin = build(dir.as_path(), "syscalls", "c", SYSCALLS_C, "gcc", &["-O2"]);
    let (_, profile) = record(&bin, "3000000", CallGraph::Fp);

    let mut kernel_frames = 0;
    let mut named = 0;
    let mut write_path = false;
    for loc in &profile.location {
        let Some(m) = profile.mapping.iter().find(|m| m.id == loc.mapping_id) else {
            continue;
        };
        if string(&profile, m.filename) != "[kernel.kallsyms]" {
            continue;
        }
        for line in &loc.line {
            let Some(f) = profile.function.iter().find(|f| f.id == line.function_id) else {
                continue;
            };
            let name = string(&profile, f.name);
            kernel_frames += 1;
            if kernel_names.contains(name) {
                named += 1;
                write_path |= name.contains("write");
            } else {
                assert!(name.starts_with("[unknown]"), "{name} is not in kallsyms");
            }
        }
    }
    assert!(kernel_frames >= 5, "{kernel_frames} kernel frames");
    assert!(
        named * 10 >= kernel_frames * 9,
        "{named} of {kernel_frames} named"
    );
    assert!(
        write_path,
        "no kernel function of the write path was sampled"
    );
}

/// A "JIT": copies a counting loop into executable anonymous memory,
/// announces it in /tmp/perf-PID.map like real JITs do, and runs it.
const JIT_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    unsigned long n = strtoul(argv[1], 0, 10);
    /* mov rcx, imm64; 1: dec rcx; jnz 1b; ret */
    unsigned char code[] = {0x48, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0, 0x48, 0xff, 0xc9, 0x75, 0xfb, 0xc3};
    memcpy(code + 2, &n, 8);
    unsigned char *mem = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 2;
    memcpy(mem + 0x40, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *f = fopen(path, "w");
    if (!f) return 3;
    fprintf(f, "%lx %zx jitted_count_down\n", (unsigned long)(mem + 0x40), sizeof code);
    fclose(f);
    ((void (*)(void))(mem + 0x40))();
    return 0;
}
"#;

#[test]
fn jit_code_is_named_from_the_perf_map() {
    let dir = work_dir("jit");
    let bin = build(dir.as_path(), "jit", "c", JIT_C, "gcc", &["-O2"]);
    let (rec, profile) = record(&bin, "1500000000", CallGraph::Fp);
    for pid in rec.stacks().keys().map(|k| k.pid) {
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
    }
    let leaves = leaves(&profile);
    let jit: i64 = leaves
        .iter()
        .filter(|(name, _, _, _)| name == "jitted_count_down")
        .map(|l| l.3)
        .sum();
    assert!(
        jit * 2 > rec.samples as i64,
        "{jit} of {} samples in the JIT code: {leaves:?}",
        rec.samples
    );
}

const SPIN_RS: &str = r#"
use std::hint::black_box;
#[inline(never)]
fn spin_for_symbols(n: u64) -> u64 {
    let mut x = 1u64;
    for i in 0..n {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    x
}
fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    println!("{}", spin_for_symbols(n));
}
"#;

#[test]
fn rust_names_are_demangled_in_both_manglings() {
    let dir = work_dir("rust");
    // Legacy is stable's default (naming it needs -Z unstable-options).
    for (mangling, prefix, flags) in [
        ("legacy", "_ZN", &[][..]),
        ("v0", "_R", &["-C", "symbol-mangling-version=v0"][..]),
    ] {
        let name = format!("spin_{mangling}");
        let bin = build(
            dir.as_path(),
            &name,
            "rs",
            SPIN_RS,
            "rustc",
            &[&["--edition", "2021", "-C", "opt-level=2"], flags].concat(),
        );
        let (_, profile) = record(&bin, "400000000", CallGraph::Dwarf);
        let want = format!("{name}::spin_for_symbols");
        let found = functions(&profile);
        let hit = found.iter().find(|(n, _)| *n == want);
        let Some((_, system)) = hit else {
            panic!("{want} not among {found:?}");
        };
        assert!(system.starts_with(prefix), "{mangling}: {system}");
        assert!(
            leaves(&profile)
                .iter()
                .filter(|l| l.0 == want)
                .map(|l| l.3)
                .sum::<i64>()
                > 50
        );
    }
}

const SPIN_CPP: &str = r#"
#include <cstdlib>
namespace ember_test {
template <typename T> struct Spinner {
    __attribute__((noinline)) T spin(T n) {
        volatile T x = 0;
        for (T i = 0; i < n; i++) x = x + i;
        return x;
    }
};
}
int main(int argc, char **argv) {
    ember_test::Spinner<unsigned long> s;
    return (int)(s.spin(std::strtoul(argv[1], 0, 10)) & 1);
}
"#;

#[test]
fn cpp_names_are_demangled() {
    let dir = work_dir("cpp");
    let bin = build(
        dir.as_path(),
        "spin_cpp",
        "cpp",
        SPIN_CPP,
        "g++",
        &["-O2", "-fno-omit-frame-pointer"],
    );
    let (_, profile) = record(&bin, "600000000", CallGraph::Fp);
    let want = "ember_test::Spinner<unsigned long>::spin(unsigned long)";
    let found = functions(&profile);
    // gcc may specialise it into a clone: "... [clone .isra.0]", as perf shows.
    let Some((_, system)) = found.iter().find(|(n, _)| n.starts_with(want)) else {
        panic!("{want} not among {found:?}");
    };
    assert!(system.starts_with("_ZN10ember_test"), "{system}");
}
