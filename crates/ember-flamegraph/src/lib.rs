//! Sink: folded stacks → interactive flame graph SVG (plain and differential).
//!
//! [`render`] turns parsed folded stacks ([`ember_formats::Folded`]) into a self-contained SVG
//! written to any [`Write`]: frames are merged into a tree in one pass over the sorted stacks
//! (only the current root→leaf path is kept open), narrow frames are pruned as they close, and
//! the SVG is written straight into a byte buffer with hand-rolled number formatting. The
//! layout, tooltips and colour rules follow the conventions of flamegraph.pl / inferno, so the
//! output lines up with graphs people already use; the embedded JavaScript (zoom, search,
//! tooltips) is Ember's own.
//!
//! The renderer is pure: it reads no files and detects no formats (reading and detecting input
//! is `ember-formats`' job, wiring them together the CLI's), and it logs nothing: warnings come
//! back in the [`RenderReport`].
//!
//! Modules: [`Options`] and the layout constants in `options`; preparing and ordering the input
//! in `stacks`; the one-pass merge into frames in `merge`; one frame's SVG in `frame`; the
//! document around the frames in `svg`; colours and palettes in `color`; `--nameattr` in
//! `attrs`; the buffered writer in `out`.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

mod attrs;
mod color;
mod frame;
mod merge;
mod options;
mod out;
mod stacks;
mod svg;

pub use attrs::{FrameAttrs, FrameAttrsMap};
pub use color::{BackgroundColor, Color, Palette, PaletteMap};
pub use options::{Direction, Options, TextTruncateDirection};

use color::{ColorMode, Rng};
use ember_formats::FoldedRef;
use frame::{Layout, Painter};
use out::Out;
use std::io::Write;

/// Non-fatal findings of a render, plus the updated palette map.
#[derive(Debug, Clone, Default)]
pub struct RenderReport {
    /// Human-readable warnings (ignored lines, truncated fractional counts, ...).
    pub warnings: Vec<String>,
    /// The palette map after rendering (with colours for new names), when one was given.
    pub palette_map: Option<PaletteMap>,
    /// Total of all counts (the width of the root frame).
    pub total_samples: u64,
    /// Frames drawn (after pruning narrow ones).
    pub frames_drawn: usize,
}

/// Errors of [`render`].
#[derive(Debug, thiserror::Error)]
pub enum FlameGraphError {
    /// The input had no positive sample counts.
    #[error("No stack counts found")]
    NoStacks,
    /// `no_sort` was set but the stacks are not in byte order.
    #[error(
        "unsorted input lines detected (line {line}); sort the input or drop the no-sort option"
    )]
    Unsorted {
        /// 1-based index among the parsed stacks of the first out-of-order stack.
        line: usize,
    },
    /// An option is out of range.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// Writing the SVG failed.
    #[error("writing SVG: {0}")]
    Io(#[from] std::io::Error),
}

/// The fractional-count warning, worded like the reference tools.
pub const FRACTIONAL_WARNING: &str = "The input data has fractional sample counts that will be truncated to integers. \
If you need to retain the extra precision you can scale up the sample data and use the --factor option to scale it back down.";

/// Renders a flame graph (differential automatically when lines carry second_count), from
/// folded input owned ([`ember_formats::Folded`]) or borrowing its stacks from the buffer it
/// was parsed from ([`ember_formats::parse_borrowed`]: no per-line allocation, the fast path
/// for large files).
pub fn render(
    folded: &FoldedRef<'_>,
    options: &Options,
    out: impl Write,
) -> Result<RenderReport, FlameGraphError> {
    let input = folded
        .lines
        .iter()
        .map(|l| (l.stack.as_ref(), l.count, l.second_count));
    render_lines(
        input,
        folded.ignored_lines,
        folded.has_fractional,
        options,
        out,
    )
}

/// Renders prepared input: `(stack, count, second count)` per line.
fn render_lines<'a>(
    input: impl ExactSizeIterator<Item = (&'a str, f64, Option<f64>)> + Clone,
    ignored_lines: usize,
    has_fractional: bool,
    options: &Options,
    out: impl Write,
) -> Result<RenderReport, FlameGraphError> {
    options.validate()?;
    let mut report = RenderReport::default();
    if has_fractional {
        report.warnings.push(FRACTIONAL_WARNING.to_owned());
    }
    if ignored_lines > 0 {
        report
            .warnings
            .push(format!("Ignored {ignored_lines} lines with invalid format"));
    }

    // Reversed stacks need new strings; everything else borrows from the input.
    let reversed = stacks::reversed_stacks(input.clone(), options);
    let mut lines = stacks::prepare(input, &reversed, options);
    stacks::order(&mut lines, options)?;

    let total: u64 = lines.iter().fold(0u64, |t, l| t.saturating_add(l.count));
    let mut w = Out::new(out, options.pretty_xml);
    if total == 0 {
        svg::write_error_svg(&mut w, options)?;
        w.finish()?;
        return Err(FlameGraphError::NoStacks);
    }
    let delta_max = lines
        .iter()
        .filter_map(|l| l.delta)
        .fold(1u64, |m, d| m.max(d.unsigned_abs()));

    let widthpertime_pct = 100.0 / total as f64;
    let minwidth_time = options.min_width / widthpertime_pct;
    let frames = merge::merge(&lines, minwidth_time);
    let depth_max = frames.iter().map(|f| f.depth).max().unwrap_or(0);

    let image_height = (depth_max + 1) * options.frame_height + options.ypad1() + options.ypad2();
    svg::write_header(&mut w, options, image_height, total)?;

    let image_width = options.width() as f64;
    let layout = Layout {
        total,
        widthpertime_pct,
        image_height,
        char_pct: 100.0 * options.font_size as f64 * options.font_width / image_width,
        text_offset_pct: 100.0 * 3.0 / image_width,
        delta_max,
    };
    let mut painter = Painter {
        palette_map: options.palette_map.clone(),
        rng: Rng::new(),
        mode: ColorMode {
            palette: options.colors,
            hash: options.hash,
            deterministic: options.deterministic,
        },
    };
    for f in &frames {
        frame::write_frame(&mut w, f, &layout, &mut painter, options)?;
    }
    w.nl(1);
    w.raw("</svg>");
    w.nl(0);
    w.raw("</svg>\n");
    w.finish()?;

    report.palette_map = painter.palette_map;
    report.total_samples = total;
    report.frames_drawn = frames.len();
    Ok(report)
}
