//! One `render` for folded input in either form: owned (`parse_bytes`) or borrowing its
//! stacks from the buffer (`parse_borrowed`, `Diff::to_folded`). Both forms are one type, so
//! the same call takes both and draws the same picture.

use ember_flamegraph::{Options, render};
use ember_formats::{Folded, FoldedRef, parse_borrowed, parse_bytes};

fn svg(folded: &FoldedRef<'_>) -> String {
    let mut out = Vec::new();
    render(folded, &Options::default(), &mut out).expect("renders");
    String::from_utf8(out).expect("SVG is UTF-8")
}

#[test]
fn owned_and_borrowed_input_draw_the_same() {
    // Includes a line of invalid UTF-8 (repaired, so owned even when borrowed) and a
    // malformed line (counted, not drawn).
    let text = b"main;work;leaf 30\nmain;idle 10\nmain;caf\xe9 5\nnot a count\n";
    let borrowed = parse_borrowed(text);
    let owned: Folded = parse_bytes(text);
    assert_eq!(owned, borrowed.clone().into_owned());
    assert_eq!(owned.ignored_lines, 1);
    let drawn = svg(&borrowed);
    assert_eq!(drawn, svg(&owned));
    assert!(drawn.contains("leaf"), "{drawn}");
}

#[test]
fn a_diff_draws_from_its_own_stacks() {
    let before = [("main;a".to_string(), 10), ("main;b".to_string(), 5)];
    let after = [("main;a".to_string(), 4), ("main;c".to_string(), 7)];
    let diff = ember_formats::diff_folded::diff_stacks(before, after, &Default::default());
    let folded = diff.to_folded();
    assert!(folded.is_differential());
    // The stacks are the diff's own, not copies.
    assert!(
        (folded.lines.iter()).all(|l| matches!(l.stack, std::borrow::Cow::Borrowed(_))),
        "{folded:?}"
    );
    assert!(svg(&folded).contains("main"));
}
