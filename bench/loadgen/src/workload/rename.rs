//! Deploys: every deploy renames a share of a service's functions the way new builds do
//! (Go closures renumbered, `funcN` to `funcM`; module major versions bumped, `/v2/` to
//! `/v3/`; compiler-generated suffixes on other languages), so stacks through renamed
//! functions become new distinct stacks from the deploy on.

use super::base::Language;
use super::rng::{hash, tag, unit};

/// How many epochs back a function's last rename is looked for (older renames are
/// treated as the base name: after 64 deploys at 10 % a function keeps its base name with
/// probability 0.1 %).
const LOOKBACK: u64 = 64;

/// The deploy epoch (0 before the first deploy of the run) at which function `function_id`
/// of service `service` was last renamed, as of `epoch`; `None`: never (base name).
/// Epoch 0 counts as a deploy, so services sharing a base differ from the start.
pub(crate) fn last_rename(
    seed: u64,
    service: usize,
    function_id: u64,
    epoch: u64,
    share: f64,
) -> Option<u64> {
    (epoch.saturating_sub(LOOKBACK)..=epoch)
        .rev()
        .find(|&e| unit(hash(&[seed, tag::RENAME, service as u64, function_id, e])) < share)
}

/// The name `base` takes when renamed at deploy `epoch` by service `service`.
pub(crate) fn renamed(base: &str, language: Language, service: usize, epoch: u64) -> String {
    // Numbers the build would produce: growing with the epoch (so each deploy's name is
    // new), spread per service (so services on the same base differ).
    let n = 2 + epoch * 7 + hash(&[service as u64, epoch]) % 7;
    if let Some(at) = version_segment(base) {
        // `/vN` followed by `/` or `.` (a major version of a Go module path).
        let digits_end = at
            + 2
            + base[at + 2..]
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
        return format!("{}/v{}{}", &base[..at], n, &base[digits_end..]);
    }
    if let Some(stem) = closure_stem(base) {
        return format!("{stem}{n}");
    }
    match language {
        Language::Go if base.contains('/') => {
            // Insert a major version before the last path segment: module v2+.
            let slash = base.rfind('/').unwrap_or(0);
            format!("{}/v{}{}", &base[..slash], n, &base[slash..])
        }
        Language::Go => format!("{base}.func{n}"),
        Language::Java => format!("{base}$lambda${n}"),
        Language::DotNet => format!("{base}b__{n}_0"),
        Language::JavaScript => format!("{base}~{n}"),
        Language::Python | Language::Ruby => format!("{base}_v{n}"),
        Language::Rust => format!("{base}::{{{{closure}}}}#{n}"),
    }
}

/// Byte offset of a `/vN/` or `/vN.` segment (N ≥ 2 digits allowed), if any.
fn version_segment(name: &str) -> Option<usize> {
    let b = name.as_bytes();
    (0..b.len().saturating_sub(3)).find(|&i| {
        b[i] == b'/' && b[i + 1] == b'v' && b[i + 2].is_ascii_digit() && {
            let end = i + 2 + b[i + 2..].iter().take_while(|c| c.is_ascii_digit()).count();
            end < b.len() && (b[end] == b'/' || b[end] == b'.')
        }
    })
}

/// For a Go closure name ending in `funcN` (or `funcN.M`), everything before the final
/// number.
fn closure_stem(name: &str) -> Option<&str> {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    (stem.len() < name.len()
        && (stem.ends_with("func") || stem.ends_with('.'))
        && name.contains(".func"))
    .then_some(stem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_look_like_new_builds() {
        let go = Language::Go;
        let r = renamed("main.handler.func1", go, 0, 3);
        assert!(
            r.starts_with("main.handler.func") && r != "main.handler.func1",
            "{r}"
        );
        let r = renamed("github.com/x/y/v2/pkg.F", go, 0, 1);
        assert!(
            r.starts_with("github.com/x/y/v") && r.ends_with("/pkg.F") && !r.contains("/v2/"),
            "{r}"
        );
        let r = renamed("github.com/x/y/pkg.F", go, 0, 1);
        assert!(
            r.starts_with("github.com/x/y/v") && r.ends_with("/pkg.F"),
            "{r}"
        );
        assert_eq!(
            renamed("runtime.mallocgc", go, 0, 0),
            format!("runtime.mallocgc.func{}", 2 + hash(&[0, 0]) % 7)
        );
        assert!(renamed("a.B.c", Language::Java, 1, 2).contains("$lambda$"));
        assert_ne!(
            renamed("f", Language::Python, 1, 2),
            renamed("f", Language::Python, 1, 3)
        );
    }

    #[test]
    fn about_the_share_is_renamed_per_epoch() {
        let renamed_at = |e| {
            (0..10_000u64)
                .filter(|&f| last_rename(1, 0, f, e, 0.1) == Some(e))
                .count()
        };
        for e in [0, 1, 5] {
            let n = renamed_at(e);
            assert!((800..1200).contains(&n), "epoch {e}: {n}");
        }
        // A rename sticks until the next one.
        let f = (0..1000u64)
            .find(|&f| last_rename(1, 0, f, 2, 0.1) == Some(2))
            .unwrap();
        let next = (3..100)
            .find(|&e| last_rename(1, 0, f, e, 0.1) != Some(2))
            .unwrap();
        assert_eq!(last_rename(1, 0, f, next, 0.1), Some(next));
    }
}
