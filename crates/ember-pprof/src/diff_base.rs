//! Differential profiles written by `pprof -diff_base` (and `-base` with labels kept): the
//! samples of the base profile are stored negated and carry the label `pprof::base=true`.
//!
//! `go tool pprof` reports such a profile against the total of the base samples alone (its
//! `computeTotal`): a function that grew from nothing to the base's size shows 100 %, not 50 %
//! of "everything". [`report_total`] is that total, the one every Ember report of a profile
//! (top tables, flame graphs, conversions) divides by.

use crate::proto::{Profile, Sample};
use crate::query::string;

/// The sample label key `pprof` puts on the (negated) samples of the diff base.
pub const DIFF_BASE_LABEL: &str = "pprof::base";

/// Whether `sample` belongs to the diff base: it has the string label `pprof::base` = `true`
/// (Go's `Sample.DiffBaseSample`).
pub fn is_diff_base_sample(profile: &Profile, sample: &Sample) -> bool {
    sample
        .label
        .iter()
        .any(|l| string(profile, l.key) == DIFF_BASE_LABEL && string(profile, l.str) == "true")
}

/// Whether any sample of `profile` belongs to a diff base (see [`is_diff_base_sample`]).
pub fn has_diff_base(profile: &Profile) -> bool {
    profile
        .sample
        .iter()
        .any(|s| is_diff_base_sample(profile, s))
}

/// The total that reports of sample type `index` are relative to, as `go tool pprof`
/// computes it: the sum of |value| over the diff-base samples when the profile has any (and
/// their sum is not zero), else over every sample. Missing values count 0; sums wrap like
/// Go's `int64`.
pub fn report_total(profile: &Profile, index: usize) -> i64 {
    let mut total = 0i64;
    let mut base_total = 0i64;
    for sample in &profile.sample {
        let v = sample.value.get(index).copied().unwrap_or(0).wrapping_abs();
        total = total.wrapping_add(v);
        if v != 0 && is_diff_base_sample(profile, sample) {
            base_total = base_total.wrapping_add(v);
        }
    }
    if base_total > 0 { base_total } else { total }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ProfileBuilder, SampleLabel};

    #[test]
    fn the_base_total_wins_when_there_is_one() {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let main = b.function("main", "main", "main.go");
        let work = b.function("work", "work", "main.go");
        let l_main = b.location(0, 1, &[(main, 1)]);
        let l_work = b.location(0, 2, &[(work, 1)]);
        let base = [SampleLabel::Str(DIFF_BASE_LABEL, "true")];
        b.add_sample(&[l_work, l_main], &[70], &[]);
        b.add_sample(&[l_main], &[30], &[]);
        b.add_sample(&[l_work, l_main], &[-40], &base);
        b.add_sample(&[l_main], &[-10], &base);
        let diff = b.build();
        assert!(has_diff_base(&diff));
        assert_eq!(report_total(&diff, 0), 50);

        // Without the label (or with another value) every sample counts.
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let main = b.function("main", "main", "main.go");
        let l_main = b.location(0, 1, &[(main, 1)]);
        b.add_sample(&[l_main], &[70], &[]);
        b.add_sample(
            &[l_main],
            &[-40],
            &[SampleLabel::Str(DIFF_BASE_LABEL, "false")],
        );
        let plain = b.build();
        assert!(!has_diff_base(&plain));
        assert_eq!(report_total(&plain, 0), 110);
        assert_eq!(report_total(&plain, 3), 0);
    }
}
