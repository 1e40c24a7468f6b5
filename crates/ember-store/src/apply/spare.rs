//! The emptied tables of parsed profiles, kept for the next parse.
//!
//! Every ingest parses its profiles into a [`ProfileView`] whose columns take a few hundred
//! kilobytes for a usual profile; built from nothing each time they cost reallocations and
//! freshly zeroed pages (measured: ~11 page faults a profile and most of the parse's
//! reallocation copies on the realistic workload). The views of an ingest hand their
//! tables back here once applied, and the next parse fills them again.
//!
//! Bounded: at most [`KEPT`] sets, each of at most [`MAX_BYTES`] of capacity (the tables of
//! one unusually large profile are dropped rather than kept for ever), so this holds at most
//! 32 MiB and typically a few MiB. Shared by every store of the process: the tables hold no
//! data once given back.

use std::sync::Mutex;

use ember_pprof::{PprofError, ProfileView, ViewTables};

/// Sets of tables kept: enough for the ingest threads and the log replay at once.
const KEPT: usize = 8;

/// Largest capacity, in bytes, of a set worth keeping.
const MAX_BYTES: usize = 4 << 20;

static SPARE: Mutex<Vec<ViewTables>> = Mutex::new(Vec::new());

/// [`ProfileView::parse_within`] into spare tables when there are some.
pub(crate) fn parse<'r>(raw: &'r [u8], max_bytes: u64) -> Result<ProfileView<'r>, PprofError> {
    let tables = SPARE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pop()
        .unwrap_or_default();
    ProfileView::parse_reusing(raw, max_bytes, tables)
}

/// Keeps `view`'s tables for a later [`parse`] (or drops them when enough are kept).
pub(crate) fn give_back(view: ProfileView<'_>) {
    let tables = view.into_tables();
    if tables.capacity_bytes() > MAX_BYTES {
        return;
    }
    let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
    if spare.len() < KEPT {
        spare.push(tables);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ember_pprof::ProfileBuilder;

    fn profile(frames: u64, value: i64) -> Vec<u8> {
        let mut b = ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let m = b.mapping(0x1000, 0x9000, 0, "/bin/app", "abc");
        let f = b.function("main", "main", "main.go");
        let locs: Vec<u64> = (0..frames)
            .map(|i| b.location(m, 0x1100 + i, &[(f, i as i64)]))
            .collect();
        b.add_sample(&locs, &[value], &[]);
        ember_pprof::encode(&b.build())
    }

    #[test]
    fn a_parse_into_spare_tables_equals_a_fresh_parse() {
        // A large profile first, so the spare tables hold more than the next one needs:
        // none of it may show through.
        let big = profile(50, 7);
        let v = parse(&big, u64::MAX).unwrap();
        assert_eq!(
            v.to_profile(),
            ProfileView::parse(&big).unwrap().to_profile()
        );
        give_back(v);
        let small = profile(3, 9);
        let reused = parse(&small, u64::MAX).unwrap();
        let fresh = ProfileView::parse(&small).unwrap();
        assert_eq!(reused.to_profile(), fresh.to_profile());
        assert_eq!(reused.decoded_bytes(), fresh.decoded_bytes());
        assert_eq!(reused.sample_location_ids.len(), 3);
        give_back(reused);
    }

    #[test]
    fn the_decoded_size_bound_holds_with_spare_tables() {
        let raw = profile(200, 1);
        let fresh = ProfileView::parse_within(&raw, 64).unwrap_err();
        give_back(ProfileView::parse(&raw).unwrap());
        let reused = parse(&raw, 64).unwrap_err();
        assert_eq!(reused.to_string(), fresh.to_string());
    }
}
