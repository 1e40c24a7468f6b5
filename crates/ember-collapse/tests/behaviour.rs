//! Behaviour beyond the golden files: options without goldens (`skip_after`, `event_filter`),
//! gzip handling and limits, thread/chunk invariance and robustness on arbitrary bytes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use ember_collapse::{CollapseError, CollapseOptions, Collapsed, collapse_bytes};

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

fn read(rel: &str) -> Vec<u8> {
    fs::read(corpora().join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
}

fn folded(c: &Collapsed) -> String {
    let mut out = Vec::new();
    c.write_folded(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn decompressed_example() -> Vec<u8> {
    let gz = read("FlameGraph/example-perf-stacks.txt.gz");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out).unwrap();
    out
}

#[test]
fn skip_after_starts_stacks_at_the_frame() {
    let input = read("inferno/tests/data/collapse-perf/go-stacks.txt");
    let plain = collapse_bytes(&input, &CollapseOptions::default()).unwrap();
    assert!(
        plain.stacks.iter().any(|(s, _)| s.contains(";main.init;")),
        "go-stacks must have main.init below the root for this test to mean anything"
    );
    for skip in [vec!["main.init"], vec!["main.init", "regexp.compile"]] {
        let options = CollapseOptions {
            skip_after: skip.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let cut = collapse_bytes(&input, &options).unwrap();
        let mut seen = 0;
        for (stack, _) in &cut.stacks {
            if let Some(first) = skip
                .iter()
                .rev()
                .find(|f| stack.split(';').any(|x| x == **f))
            {
                assert!(stack.starts_with(&format!("{first};")), "{stack}");
                seen += 1;
            }
        }
        assert!(seen > 0);
        // Cutting frames never loses weight.
        let total = |c: &Collapsed| c.stacks.iter().map(|(_, n)| n).sum::<u64>();
        assert_eq!(total(&plain), total(&cut));
    }
}

#[test]
fn first_event_type_wins_unless_filtered() {
    let input = read("FlameGraph/test/perf-cycles-instructions-01.txt");
    let text = String::from_utf8_lossy(&input);
    let first_event_line = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap();
    let default = collapse_bytes(&input, &CollapseOptions::default()).unwrap();
    let first = default.event.clone().expect("an event type");
    assert!(first_event_line.trim_end().ends_with(&format!(" {first}:")));
    let other = if first == "cycles" {
        "instructions"
    } else {
        "cycles"
    };
    assert!(text.contains(&format!(" {other}:")));
    let filtered = collapse_bytes(
        &input,
        &CollapseOptions {
            event_filter: Some(other.into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(filtered.event.as_deref(), Some(other));
    assert!(!filtered.stacks.is_empty());
    assert_ne!(folded(&default), folded(&filtered));
    let explicit_first = collapse_bytes(
        &input,
        &CollapseOptions {
            event_filter: Some(first),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(folded(&default), folded(&explicit_first));
}

#[test]
fn periods_weight_samples() {
    // empty-line.txt: two `250000 cpu-clock` samples of the same stack, one malformed.
    let input = read("inferno/tests/data/collapse-perf/empty-line.txt");
    let c = collapse_bytes(&input, &CollapseOptions::default()).unwrap();
    assert_eq!(c.stacks, vec![("inline-counter;main".to_string(), 250000)]);
    assert_eq!(c.warnings.len(), 1);
    assert_eq!(c.warnings[0].line, 6);
}

#[test]
fn gzip_single_and_multi_member_match_plain() {
    let plain = decompressed_example();
    let expected = collapse_bytes(&plain, &CollapseOptions::default()).unwrap();
    assert!(!expected.stacks.is_empty());
    let one = gzip(&plain);
    let half = plain.len() / 2;
    let mut two = gzip(&plain[..half]);
    two.extend(gzip(&plain[half..]));
    for gz in [one, two] {
        for threads in [1, 2] {
            let o = CollapseOptions {
                threads,
                chunk_bytes: 8192,
                ..Default::default()
            };
            assert_eq!(collapse_bytes(&gz, &o).unwrap(), expected);
        }
    }
}

#[test]
fn input_limit_applies_after_decompression() {
    let plain = read("FlameGraph/test/perf-dd-stacks-01.txt");
    let gz = gzip(&plain);
    let len = plain.len() as u64;
    for data in [&plain, &gz] {
        let at = |limit| CollapseOptions {
            max_input_bytes: Some(limit),
            ..Default::default()
        };
        assert!(collapse_bytes(data, &at(len)).is_ok());
        match collapse_bytes(data, &at(len - 1)) {
            Err(CollapseError::InputTooLarge { limit }) => assert_eq!(limit, len - 1),
            other => panic!("expected InputTooLarge, got {other:?}"),
        }
    }
    // A truncated gzip stream is an error, not a panic.
    assert!(matches!(
        collapse_bytes(&gz[..gz.len() / 2], &CollapseOptions::default()),
        Err(CollapseError::Io(_))
    ));
}

#[test]
fn threads_and_chunk_sizes_never_change_the_result() {
    let input = decompressed_example();
    let reference = collapse_bytes(
        &input,
        &CollapseOptions {
            threads: 1,
            ..Default::default()
        },
    )
    .unwrap();
    // 1_000_000 threads is capped (never a panic from failing to spawn them).
    for (threads, chunk) in [
        (2, 1),
        (2, 333),
        (3, 4096),
        (4, 65536),
        (0, 1 << 20),
        (1_000_000, 4096),
    ] {
        let o = CollapseOptions {
            threads,
            chunk_bytes: chunk,
            ..Default::default()
        };
        assert_eq!(
            collapse_bytes(&input, &o).unwrap(),
            reference,
            "{threads} {chunk}"
        );
    }
}

/// Deterministic xorshift so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn arbitrary_bytes_never_panic_and_stay_thread_invariant() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = [
        read("FlameGraph/test/perf-java-stacks-01.txt"),
        read("inferno/tests/data/collapse-perf/java-inline.txt"),
        read("inferno/tests/data/collapse-perf/single-line-stacks.txt"),
        read("FlameGraph/test/perf-rust-Yamakaky-dcpu.txt"),
    ];
    let interesting = b"\n\n \t()[]<>{};:/-+0x'\"$h.\xff\xc3\xe3\x80\x80";
    for round in 0..300 {
        let seed = &seeds[round % seeds.len()];
        let mut data = seed[..seed.len().min(4000)].to_vec();
        for _ in 0..(rng.next() % 40) {
            let at = (rng.next() as usize) % (data.len() + 1);
            let byte = match rng.next() % 3 {
                0 => interesting[(rng.next() as usize) % interesting.len()],
                _ => rng.next() as u8,
            };
            if rng.next().is_multiple_of(2) && at < data.len() {
                data[at] = byte;
            } else {
                data.insert(at, byte);
            }
        }
        let one = collapse_bytes(
            &data,
            &CollapseOptions {
                threads: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let two = collapse_bytes(
            &data,
            &CollapseOptions {
                threads: 2,
                chunk_bytes: 64,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(one, two, "round {round}");
    }
    // Pure noise, including a fake gzip header.
    for len in [0usize, 1, 2, 3, 17, 1000] {
        let noise: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let _ = collapse_bytes(&noise, &CollapseOptions::default());
        let mut fake_gz = vec![0x1f, 0x8b];
        fake_gz.extend(&noise);
        assert!(collapse_bytes(&fake_gz, &CollapseOptions::default()).is_err());
    }
}

#[test]
fn invalid_utf8_is_replaced_not_fatal() {
    let mut input = read("inferno/tests/data/collapse-perf/java-inline.txt");
    let text = String::from_utf8_lossy(&input).into_owned();
    let at = text.find("__GI___libc_write").expect("symbol present");
    input.insert(at + 2, 0xff);
    let c = collapse_bytes(&input, &CollapseOptions::default()).unwrap();
    assert!(
        c.stacks
            .iter()
            .any(|(s, _)| s.contains("__\u{fffd}GI___libc_write"))
    );
}

#[test]
fn empty_input_gives_nothing() {
    let c = collapse_bytes(b"", &CollapseOptions::default()).unwrap();
    assert_eq!(c, Collapsed::default());
    let c = collapse_bytes(b"\n\n# comment\n", &CollapseOptions::default()).unwrap();
    assert!(c.stacks.is_empty() && c.warnings.is_empty());
}

#[test]
fn unknown_symbols_take_the_module_file_name() {
    // `[unknown]` frames in the shapes that have their own fast path in the folder, and a
    // module name that must fall back to the general tidy rules (`(` and `;`). Expected
    // output: what the general path alone produced before the fast path existed.
    let input = b"\
prog 1/1 [000] 1.0: 1 cycles:
\t    7f0001 [unknown] (/usr/lib/libfoo.so.1)
\t    7f0002 [unknown] ([unknown])
\t    7f0003 [unknown] (/opt/odd;dir/lib(x)y;z.so)
\t    7f0004 [unknown] (/tmp/perf-1.map)
\t    7f0005 [unknown] ([kernel.kallsyms])
\t    7f0006 [unknown] (plainname)
\t    7f0007 main+0x1 (/bin/prog)
";
    let stack = |options: &CollapseOptions| {
        let collapsed = collapse_bytes(input, options).unwrap();
        assert_eq!(collapsed.stacks.len(), 1);
        collapsed.stacks[0].0.clone()
    };
    assert_eq!(
        stack(&CollapseOptions::default()),
        "prog;main;[plainname];[[kernel.kallsyms]];[perf-1.map];[lib(x)y:z.so];[unknown];[libfoo.so.1]"
    );
    let annotated = CollapseOptions {
        annotate_kernel: true,
        annotate_jit: true,
        ..Default::default()
    };
    assert_eq!(
        stack(&annotated),
        "prog;main;[plainname];[[kernel.kallsyms]]_[k];[perf-1.map]_[j];[lib(x)y:z.so];[unknown];\
         [libfoo.so.1]"
    );
    let addrs = CollapseOptions {
        include_addrs: true,
        ..Default::default()
    };
    assert_eq!(
        stack(&addrs),
        "prog;main;[plainname <7f0006>];[[kernel.kallsyms] <7f0005>];[perf-1.map <7f0004>];\
         [lib(x)y:z.so <7f0003>];[unknown <7f0002>];[libfoo.so.1 <7f0001>]"
    );
}
