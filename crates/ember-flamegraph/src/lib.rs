//! Sink: folded stacks → interactive flame graph SVG (plain and differential).
//!
//! [`render`] turns parsed folded stacks ([`ember_folded::Folded`]) into a
//! self-contained SVG: frames are merged into a tree in one pass over the
//! sorted stacks (only the current root→leaf path is kept open), narrow
//! frames are pruned as they close, and the SVG is written straight into a
//! byte buffer with hand-rolled number formatting. The layout, tooltips and
//! colour rules follow the conventions of flamegraph.pl / inferno, so the
//! output lines up with graphs people already use; the embedded JavaScript
//! (zoom, search, tooltips) is Ember's own.

#![warn(missing_docs)]
mod attrs;
mod color;
mod input;
mod out;

pub use attrs::{FrameAttrs, FrameAttrsMap};
pub use color::{BackgroundColor, Color, Palette, PaletteMap};
pub use input::{InputBytes, read_input};

use color::{ColorMode, Rng};
use ember_folded::{Folded, FoldedRef};
use out::Out;
use std::io::Write;

/// Horizontal padding (pixels) left and right of the frames.
const XPAD: usize = 10;
/// Vertical gap (pixels) between stacked frames.
const FRAMEPAD: usize = 1;

/// The interaction script embedded unless [`Options::no_javascript`] is set.
const SCRIPT: &str = include_str!("flamegraph.js");

/// Which way stacks grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Root at the bottom (a flame graph).
    #[default]
    Straight,
    /// Root at the top (an icicle graph).
    Inverted,
}

/// Which end of a long frame name the interactive script cuts when it does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TextTruncateDirection {
    /// Keep the start of the name (`funct..`).
    #[default]
    Left,
    /// Keep the end of the name (`..nction`).
    Right,
}

/// Every rendering option. `Default` gives the conventional flame graph defaults.
#[derive(Debug, Clone)]
pub struct Options {
    /// Colour palette (default hot).
    pub colors: Palette,
    /// Background gradient; `None` picks one that suits the palette.
    pub bgcolors: Option<BackgroundColor>,
    /// Colour by a hash of the function name, so a name always gets the same colour.
    pub hash: bool,
    /// Colour by an FNV hash of the full name (stable across machines and runs).
    pub deterministic: bool,
    /// Persistent name → colour map; new names are added to it (see [`RenderReport::palette_map`]).
    pub palette_map: Option<PaletteMap>,
    /// Per-function SVG attributes (`--nameattr`).
    pub frame_attrs: Option<FrameAttrsMap>,
    /// Highlight colour for search matches (default `rgb(230,0,230)`).
    pub search_color: Color,
    /// Outline colour for frames; `None` draws no outline.
    pub stroke_color: Option<Color>,
    /// Colour of the title, details and button texts (default black).
    pub ui_color: Color,
    /// Title (default "Flame Graph").
    pub title: String,
    /// Optional second title line.
    pub subtitle: Option<String>,
    /// Text stored in an XML comment inside the SVG.
    pub notes: String,
    /// Image width in pixels; `None` means 1200 and lets the script treat the layout as fluid.
    pub image_width: Option<usize>,
    /// Height of one frame row in pixels (default 16).
    pub frame_height: usize,
    /// Frames narrower than this percentage of the total are omitted (default 0.01).
    pub min_width: f64,
    /// Font family (default monospace).
    pub font_type: String,
    /// Font size in pixels (default 12).
    pub font_size: usize,
    /// Average glyph width as a fraction of the font size, used to fit names (default 0.59).
    pub font_width: f64,
    /// What the counts are (default "samples").
    pub count_name: String,
    /// Label before a frame's name in the details line (default "Function:").
    pub name_type: String,
    /// Multiplier applied to counts in tooltips (default 1.0).
    pub factor: f64,
    /// Flame graph (root at the bottom) or icicle graph.
    pub direction: Direction,
    /// Which end the script trims from long names.
    pub text_truncate_direction: TextTruncateDirection,
    /// Differential input: swap red (growth) and blue (shrinkage).
    pub negate_differentials: bool,
    /// Reverse each stack (leaf becomes root) before merging.
    pub reverse_stack_order: bool,
    /// Keep input order (time order) and do not merge non-adjacent stacks.
    pub flame_chart: bool,
    /// Input is already sorted: do not sort it, and fail if it is not.
    pub no_sort: bool,
    /// Colour by width instead of palette: the wider, the redder.
    pub color_diffusion: bool,
    /// Start each stack at its deepest frame named here; stacks without one are dropped.
    pub base: Vec<String>,
    /// Indent the SVG with newlines (bigger, easier to diff).
    pub pretty_xml: bool,
    /// Leave the interaction script out (static picture).
    pub no_javascript: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            colors: Palette::Hot,
            bgcolors: None,
            hash: false,
            deterministic: false,
            palette_map: None,
            frame_attrs: None,
            search_color: Color::rgb(230, 0, 230),
            stroke_color: None,
            ui_color: Color::rgb(0, 0, 0),
            title: "Flame Graph".to_owned(),
            subtitle: None,
            notes: String::new(),
            image_width: None,
            frame_height: 16,
            min_width: 0.01,
            font_type: "monospace".to_owned(),
            font_size: 12,
            font_width: 0.59,
            count_name: "samples".to_owned(),
            name_type: "Function:".to_owned(),
            factor: 1.0,
            direction: Direction::Straight,
            text_truncate_direction: TextTruncateDirection::Left,
            negate_differentials: false,
            reverse_stack_order: false,
            flame_chart: false,
            no_sort: false,
            color_diffusion: false,
            base: Vec::new(),
            pretty_xml: false,
            no_javascript: false,
        }
    }
}

impl Options {
    fn width(&self) -> usize {
        self.image_width.unwrap_or(1200)
    }

    /// Space above the frames: title (and subtitle); in icicle mode also the details line.
    fn ypad1(&self) -> usize {
        let subtitle = if self.subtitle.is_some() {
            self.font_size * 2
        } else {
            0
        };
        match self.direction {
            Direction::Straight => self.font_size * 3 + subtitle,
            Direction::Inverted => self.font_size * 4 + subtitle + 4,
        }
    }

    /// Space below the frames: the details and match lines (only the match line when inverted).
    fn ypad2(&self) -> usize {
        match self.direction {
            Direction::Straight => self.font_size * 2 + 10,
            Direction::Inverted => self.font_size + 10,
        }
    }

    fn validate(&self) -> Result<(), FlameGraphError> {
        let bad = |m: &str| Err(FlameGraphError::InvalidOption(m.to_owned()));
        if self.width() <= 2 * XPAD {
            return bad("width must be more than 20 pixels");
        }
        if self.width() > 1_000_000 || self.frame_height > 100_000 || self.font_size > 100_000 {
            return bad(
                "width, height and font size must be reasonable (at most 1,000,000 / 100,000)",
            );
        }
        if self.frame_height < 2 {
            return bad("frame height must be at least 2 pixels");
        }
        if self.font_size == 0 {
            return bad("font size must be at least 1");
        }
        if !(self.font_width.is_finite() && self.font_width > 0.0) {
            return bad("font width must be a positive number");
        }
        if !(self.factor.is_finite() && self.factor > 0.0) {
            return bad("factor must be a positive number");
        }
        if !(self.min_width.is_finite() && self.min_width >= 0.0) {
            return bad("minimum width must be a non-negative number");
        }
        Ok(())
    }
}

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

fn line_order(a: &Line<'_>, b: &Line<'_>) -> std::cmp::Ordering {
    (a.stack, a.count, a.delta).cmp(&(b.stack, b.count, b.delta))
}

/// Sorts stacks by bytes. Large inputs are sorted in chunks on scoped threads and then merged:
/// comparing long stacks scattered over a big buffer is memory-bound, so a second core helps.
fn sort_lines(lines: &mut Vec<Line<'_>>) {
    const PARALLEL_FROM: usize = 32 * 1024;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(4);
    if lines.len() < PARALLEL_FROM || threads < 2 {
        lines.sort_unstable_by(line_order);
        return;
    }
    let chunk = lines.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for part in lines.chunks_mut(chunk) {
            scope.spawn(move || part.sort_unstable_by(line_order));
        }
    });
    // Pairwise merges of the sorted runs until one remains.
    let mut runs: Vec<Vec<Line<'_>>> = Vec::with_capacity(threads);
    let mut rest = std::mem::take(lines);
    while rest.len() > chunk {
        let tail = rest.split_off(chunk);
        runs.push(rest);
        rest = tail;
    }
    runs.push(rest);
    while runs.len() > 1 {
        let b = runs.pop().unwrap_or_default();
        let a = runs.pop().unwrap_or_default();
        let mut merged = Vec::with_capacity(a.len() + b.len());
        let (mut ia, mut ib) = (a.into_iter().peekable(), b.into_iter().peekable());
        loop {
            let take_a = match (ia.peek(), ib.peek()) {
                (Some(x), Some(y)) => line_order(x, y) != std::cmp::Ordering::Greater,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            merged.extend(if take_a { ia.next() } else { ib.next() });
        }
        runs.push(merged);
    }
    *lines = runs.pop().unwrap_or_default();
}

struct Line<'a> {
    stack: &'a str,
    count: u64,
    delta: Option<i64>,
}

/// One merged frame: a function at a depth spanning `[start, end)` in sample units.
struct Frame<'a> {
    name: &'a str,
    depth: usize,
    start: u64,
    end: u64,
    delta: Option<i64>,
}

struct Open<'a> {
    name: &'a str,
    start: u64,
    delta: Option<i64>,
    /// Byte offset just past this frame's name in the stack that opened it.
    end: usize,
}

fn truncate_count(c: f64) -> u64 {
    // Saturating cast: NaN → 0, huge → u64::MAX; counts are never negative after parsing.
    c.trunc() as u64
}

/// Renders a flame graph (differential automatically when lines carry second_count).
pub fn render(
    folded: &Folded,
    options: &Options,
    out: impl Write,
) -> Result<RenderReport, FlameGraphError> {
    let input = folded
        .lines
        .iter()
        .map(|l| (l.stack.as_str(), l.count, l.second_count));
    render_lines(
        input,
        folded.ignored_lines,
        folded.has_fractional,
        options,
        out,
    )
}

/// [`render`] for input parsed with [`ember_folded::parse_borrowed`] (no per-line allocation;
/// the fast path for large files).
pub fn render_borrowed(
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
    let reversed: Vec<String> = if options.reverse_stack_order {
        input
            .clone()
            .map(|(stack, _, _)| {
                let mut s = String::with_capacity(stack.len());
                for (i, f) in stack.split(';').rev().enumerate() {
                    if i > 0 {
                        s.push(';');
                    }
                    s.push_str(f);
                }
                s.trim().to_owned()
            })
            .collect()
    } else {
        Vec::new()
    };

    let mut lines: Vec<Line<'_>> = Vec::with_capacity(input.len());
    for (i, (stack, first, second)) in input.enumerate() {
        let stack: &str = if options.reverse_stack_order {
            &reversed[i]
        } else {
            stack
        };
        let (count, delta) = match second {
            Some(after) => {
                let (a, b) = (truncate_count(after), truncate_count(first));
                (
                    a,
                    Some((a as i128 - b as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64),
                )
            }
            None => (truncate_count(first), None),
        };
        let stack = if options.base.is_empty() || options.reverse_stack_order || options.flame_chart
        {
            stack
        } else {
            match rebase(stack, &options.base) {
                Some(s) => s,
                None => continue,
            }
        };
        lines.push(Line {
            stack,
            count,
            delta,
        });
    }

    let sorted = |lines: &[Line<'_>]| lines.windows(2).all(|w| w[0].stack <= w[1].stack);
    if options.reverse_stack_order {
        sort_lines(&mut lines);
    } else if options.flame_chart {
        // Input is newest-first; drawing runs left (old) to right (new).
        lines.reverse();
    } else if options.no_sort {
        if let Some(i) = lines.windows(2).position(|w| w[0].stack > w[1].stack) {
            return Err(FlameGraphError::Unsorted { line: i + 2 });
        }
    } else if !sorted(&lines) {
        // Collapsers already emit sorted output; checking first makes that case O(n).
        // Equal stacks merge into one frame path, so their relative order does not matter.
        sort_lines(&mut lines);
    }

    let total: u64 = lines.iter().fold(0u64, |t, l| t.saturating_add(l.count));
    let mut w = Out::new(out, options.pretty_xml);
    if total == 0 {
        write_error_svg(&mut w, options)?;
        w.finish()?;
        return Err(FlameGraphError::NoStacks);
    }
    let delta_max = lines
        .iter()
        .filter_map(|l| l.delta)
        .fold(1u64, |m, d| m.max(d.unsigned_abs()));

    let widthpertime_pct = 100.0 / total as f64;
    let minwidth_time = options.min_width / widthpertime_pct;
    let frames = merge(&lines, minwidth_time);
    let depth_max = frames.iter().map(|f| f.depth).max().unwrap_or(0);

    let image_height = (depth_max + 1) * options.frame_height + options.ypad1() + options.ypad2();
    write_header(&mut w, options, image_height, total)?;

    let mut palette_map = options.palette_map.clone();
    let mut rng = Rng::new();
    let mode = ColorMode {
        palette: options.colors,
        hash: options.hash,
        deterministic: options.deterministic,
    };
    let image_width = options.width() as f64;
    let char_pct = 100.0 * options.font_size as f64 * options.font_width / image_width;
    let text_offset_pct = 100.0 * 3.0 / image_width;

    for f in &frames {
        let x1_pct = f.start as f64 * widthpertime_pct;
        let x2_pct = f.end as f64 * widthpertime_pct;
        let width_pct = x2_pct - x1_pct;
        let (y1, y2) = match options.direction {
            Direction::Straight => {
                let y2 = image_height - options.ypad2() - f.depth * options.frame_height;
                (y2 - options.frame_height + FRAMEPAD, y2)
            }
            Direction::Inverted => {
                let y1 = options.ypad1() + f.depth * options.frame_height;
                (y1, y1 + options.frame_height - FRAMEPAD)
            }
        };
        let display = deannotate(f.name);
        let attrs = options.frame_attrs.as_ref().and_then(|m| m.get(f.name));
        let link = attrs.is_some_and(FrameAttrs::is_link);

        w.nl(2);
        w.raw(if link { "<a" } else { "<g" });
        if let Some(a) = attrs {
            for (k, v) in &a.attrs {
                w.raw(" ");
                w.raw(k);
                w.raw("=\"");
                w.esc(v);
                w.raw("\"");
            }
        }
        w.raw(">");
        w.nl(3);
        w.raw("<title>");
        match attrs.and_then(|a| a.title.as_deref()) {
            Some(t) => w.esc(t),
            None => write_tooltip(&mut w, f, display, total, options),
        }
        w.raw("</title>");

        let color = if f.name == "--" {
            Color::rgb(160, 160, 160)
        } else if f.name == "-" {
            Color::rgb(200, 200, 200)
        } else if options.color_diffusion {
            color::color_scale(((width_pct / 100.0).sqrt() * 2000.0) as i64, 2000)
        } else if let Some(d) = f.delta {
            color::color_scale(
                if options.negate_differentials {
                    d.saturating_neg()
                } else {
                    d
                },
                delta_max,
            )
        } else if let Some(map) = palette_map.as_mut() {
            match map.get(f.name) {
                Some(c) => c,
                None => {
                    let c = color::color_for(mode, f.name, &mut rng);
                    map.insert(f.name, c);
                    c
                }
            }
        } else {
            color::color_for(mode, f.name, &mut rng)
        };

        w.nl(3);
        w.raw("<rect x=\"");
        w.fixed(x1_pct, 4);
        w.raw("%\" y=\"");
        w.uint(y1 as u64);
        w.raw("\" width=\"");
        w.fixed(width_pct, 4);
        w.raw("%\" height=\"");
        w.uint((y2 - y1) as u64);
        w.raw("\" fill=\"rgb(");
        w.uint(color.r.into());
        w.raw(",");
        w.uint(color.g.into());
        w.raw(",");
        w.uint(color.b.into());
        w.raw(")\" fg:x=\"");
        w.uint(f.start);
        w.raw("\" fg:w=\"");
        w.uint(f.end - f.start);
        w.raw("\"/>");

        w.nl(3);
        w.raw("<text x=\"");
        w.fixed(x1_pct + text_offset_pct, 4);
        w.raw("%\" y=\"");
        write_half(&mut w, y1 + y2 + 6);
        w.raw("\">");
        let fit = (width_pct / char_pct).trunc() as usize;
        if fit >= 3 {
            if display.len() < fit {
                w.esc(display);
            } else {
                let cut = display
                    .char_indices()
                    .nth(fit - 2)
                    .map_or(display.len(), |(i, _)| i);
                w.esc(&display[..cut]);
                w.raw("..");
            }
        }
        w.raw("</text>");
        w.nl(2);
        w.raw(if link { "</a>" } else { "</g>" });
        w.maybe_flush()?;
    }
    w.nl(1);
    w.raw("</svg>");
    w.nl(0);
    w.raw("</svg>\n");
    w.finish()?;

    report.palette_map = palette_map;
    report.total_samples = total;
    report.frames_drawn = frames.len();
    Ok(report)
}

/// Writes `v / 2` with two decimals (`v` is a small integer, so only `.00` or `.50` occur).
fn write_half<W: Write>(w: &mut Out<W>, v: usize) {
    w.uint((v / 2) as u64);
    w.raw(if v.is_multiple_of(2) { ".00" } else { ".50" });
}

fn write_tooltip<W: Write>(w: &mut Out<W>, f: &Frame<'_>, display: &str, total: u64, o: &Options) {
    let samples = ((f.end - f.start) as f64 * o.factor).round() as u64;
    if f.depth == 0 && f.name.is_empty() {
        w.raw("all (");
        w.grouped(samples);
        w.raw(" ");
        w.esc(&o.count_name);
        w.raw(", 100%)");
        return;
    }
    let scaled_total = total as f64 * o.factor;
    w.esc(display);
    w.raw(" (");
    w.grouped(samples);
    w.raw(" ");
    w.esc(&o.count_name);
    w.raw(", ");
    w.fixed(samples.saturating_mul(100) as f64 / scaled_total, 2);
    w.raw("%");
    match f.delta {
        None => {}
        Some(0) => w.raw("; 0.00%"),
        Some(d) => {
            let d = if o.negate_differentials {
                d.saturating_neg()
            } else {
                d
            };
            w.raw("; ");
            w.fixed_signed(d.saturating_mul(100) as f64 / scaled_total, 2);
            w.raw("%");
        }
    }
    w.raw(")");
}

/// Cuts a stack so it starts at its deepest frame listed in `base` (the leaf itself does not
/// count, and a base at the root leaves nothing to re-root); stacks without one are dropped.
fn rebase<'a>(stack: &'a str, base: &[String]) -> Option<&'a str> {
    let leaf_start = stack.rfind(';').map_or(0, |i| i + 1);
    let mut end = leaf_start.checked_sub(1)?;
    loop {
        let start = stack[..end].rfind(';').map_or(0, |i| i + 1);
        if base.iter().any(|b| b == &stack[start..end]) {
            return if start == 0 {
                None
            } else {
                Some(&stack[start..])
            };
        }
        end = start.checked_sub(1)?;
    }
}

/// Strips a trailing `_[k]`, `_[w]`, `_[i]` or `_[j]` annotation for display.
fn deannotate(name: &str) -> &str {
    match color::annotation(name) {
        Some(b'k' | b'w' | b'i' | b'j') => &name[..name.len() - 4],
        _ => name,
    }
}

/// Length of the common prefix of two byte strings, compared eight bytes at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// Merges consecutive stacks into frames. Frames are emitted as they close, parents before
/// children among those closing together; frames narrower than `min_time` are dropped.
///
/// Only the open root→leaf path is kept. The frames a stack shares with the previous one are
/// found from the byte-level common prefix of the two stacks and the recorded end offset of
/// each open frame, so shared frames are never split or compared again.
fn merge<'a>(lines: &[Line<'a>], min_time: f64) -> Vec<Frame<'a>> {
    let mut frames = Vec::new();
    // path[0] is the root; path[i].end is where frame i ends in the stack that opened it.
    let mut path: Vec<Open<'a>> = Vec::new();
    let mut prev: &str = "";
    let mut time = 0u64;
    let close = |path: &mut Vec<Open<'a>>, keep: usize, time: u64, frames: &mut Vec<Frame<'a>>| {
        for (i, o) in path.drain(keep..).enumerate() {
            if ((time - o.start) as f64) >= min_time {
                frames.push(Frame {
                    name: o.name,
                    depth: keep + i,
                    start: o.start,
                    end: time,
                    delta: o.delta,
                });
            }
        }
    };
    for (n, line) in lines.iter().enumerate() {
        // After an unsorted input was sorted, consecutive stacks live far apart in memory; touching
        // a later stack now lets its cache misses overlap with the work on this one.
        if let Some(ahead) = lines.get(n + 8) {
            let b = ahead.stack.as_bytes();
            std::hint::black_box(
                b.first().copied().unwrap_or(0) ^ b.get(b.len() / 2).copied().unwrap_or(0),
            );
        }
        let cur = line.stack;
        let first_new = if path.is_empty() {
            let delta = line.delta.map(|_| 0);
            path.push(Open {
                name: "",
                start: time,
                delta,
                end: 0,
            });
            Some(0)
        } else {
            let lcp = common_prefix(prev.as_bytes(), cur.as_bytes());
            let mut shared = 1 + path[1..].partition_point(|o| o.end < lcp);
            if let Some(o) = path.get(shared) {
                // A frame ending exactly at the divergence point is shared when `cur` also has
                // a frame boundary there.
                if o.end == lcp && cur.as_bytes().get(lcp).is_none_or(|&b| b == b';') {
                    shared += 1;
                }
            }
            close(&mut path, shared, time, &mut frames);
            match path.last() {
                Some(o) if shared > 1 && o.end >= cur.len() => None,
                Some(o) if shared > 1 => Some(o.end + 1),
                _ => Some(0),
            }
        };
        if let Some(from) = first_new {
            // One vectorised scan for all the separators of the new part (frames are short,
            // so a per-frame byte loop dominated this function).
            let mut begin = from;
            let rest = &cur.as_bytes()[from..];
            // Only the leaf carries the line's differential; new intermediate frames start at 0.
            let inner_delta = line.delta.map(|_| 0);
            for sep in memchr::memchr_iter(b';', rest) {
                let end = from + sep;
                path.push(Open {
                    name: &cur[begin..end],
                    start: time,
                    delta: inner_delta,
                    end,
                });
                begin = end + 1;
            }
            path.push(Open {
                name: &cur[begin..],
                start: time,
                delta: line.delta,
                end: cur.len(),
            });
        }
        prev = cur;
        time = time.saturating_add(line.count);
    }
    close(&mut path, 0, time, &mut frames);
    frames
}

/// Quotes a string for a JavaScript literal inside CDATA.
fn js_quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('\'');
    for c in s.chars() {
        match c {
            '\'' => q.push_str("\\'"),
            '\\' => q.push_str("\\\\"),
            // Keeps "]]>" from ever closing the CDATA section.
            '>' => q.push_str("\\x3e"),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            c => q.push(c),
        }
    }
    q.push('\'');
    q
}

fn css_font(font: &str) -> String {
    const GENERIC: &[&str] = &["cursive", "fantasy", "monospace", "serif", "sans-serif"];
    if GENERIC.contains(&font) {
        return font.to_owned();
    }
    let mut q = String::from("\"");
    for c in font.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// Escapes only what would break the surrounding XML (used for CSS text, where quotes are literal).
fn xml_text_min(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn write_svg_open<W: Write>(w: &mut Out<W>, width: usize, height: usize, fg_ns: bool) {
    w.raw(r#"<?xml version="1.0" standalone="no"?>"#);
    w.nl(0);
    w.raw(r#"<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">"#);
    w.nl(0);
    w.raw(r#"<svg version="1.1" width=""#);
    w.uint(width as u64);
    w.raw(r#"" height=""#);
    w.uint(height as u64);
    w.raw(r#"" onload="init(evt)" viewBox="0 0 "#);
    w.uint(width as u64);
    w.raw(" ");
    w.uint(height as u64);
    w.raw(r#"" xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink""#);
    if fg_ns {
        w.raw(r#" xmlns:fg="http://github.com/jonhoo/inferno""#);
    }
    w.raw(">");
}

fn write_comments<W: Write>(w: &mut Out<W>, notes: &str) {
    w.nl(1);
    w.raw("<!--Flame graph stack visualization. See https://github.com/brendangregg/FlameGraph for latest version, and http://www.brendangregg.com/flamegraphs.html for examples.-->");
    w.nl(1);
    w.raw("<!--NOTES: ");
    // "--" may not appear inside an XML comment.
    let mut prev_dash = false;
    let mut buf = [0u8; 4];
    for c in notes.chars() {
        if c == '-' && prev_dash {
            w.raw(" ");
        }
        prev_dash = c == '-';
        w.esc(c.encode_utf8(&mut buf));
    }
    if prev_dash {
        w.raw(" ");
    }
    w.raw("-->");
}

fn write_error_svg<W: Write>(w: &mut Out<W>, o: &Options) -> std::io::Result<()> {
    write_svg_open(w, o.width(), o.font_size * 5, false);
    write_comments(w, &o.notes);
    w.nl(1);
    w.raw(r#"<text x="50.0000%" y=""#);
    w.fixed((o.font_size * 2) as f64, 2);
    w.raw(r#"">ERROR: No valid input provided to flamegraph</text>"#);
    w.nl(0);
    w.raw("</svg>\n");
    Ok(())
}

const CSS_REST: &str = "#matched { text-anchor:end; }
#search { text-anchor:end; opacity:0.1; cursor:pointer; }
#search:hover, #search.show { opacity:1; }
#subtitle { text-anchor:middle; font-color:rgb(160,160,160); }
#unzoom { cursor:pointer; }
#frames > *:hover { stroke:black; stroke-width:0.5; cursor:pointer; }
.hide { display:none; }
.parent { opacity:0.5; }
";

fn write_header<W: Write>(
    w: &mut Out<W>,
    o: &Options,
    image_height: usize,
    total: u64,
) -> std::io::Result<()> {
    let width = o.width();
    write_svg_open(w, width, image_height, true);
    write_comments(w, &o.notes);
    let (bg1, bg2) = color::background_stops(o.bgcolors, o.colors);
    w.nl(1);
    w.raw("<defs>");
    w.nl(2);
    w.raw(r#"<linearGradient id="background" y1="0" y2="1" x1="0" x2="0">"#);
    w.nl(3);
    w.raw(r#"<stop stop-color=""#);
    w.esc(&bg1);
    w.raw(r#"" offset="5%"/>"#);
    w.nl(3);
    w.raw(r#"<stop stop-color=""#);
    w.esc(&bg2);
    w.raw(r#"" offset="95%"/>"#);
    w.nl(2);
    w.raw("</linearGradient>");
    w.nl(1);
    w.raw("</defs>");
    w.nl(1);
    w.raw(r#"<style type="text/css">"#);
    w.raw("\ntext { font-family:");
    w.raw(&xml_text_min(&css_font(&o.font_type)));
    w.raw("; font-size:");
    w.uint(o.font_size as u64);
    w.raw("px }\n#title { text-anchor:middle; font-size:");
    w.uint(o.font_size as u64 + 5);
    w.raw("px; }\n");
    if let Some(c) = o.stroke_color {
        w.raw("#frames > g > rect { stroke:");
        w.raw(&c.to_string());
        w.raw("; stroke-width:1; }\n");
    }
    w.raw(CSS_REST);
    w.raw("</style>");
    w.nl(1);
    w.raw(r#"<script type="text/ecmascript"><![CDATA["#);
    let vars = format!(
        "\n        var nametype = {};\n        var fontsize = {};\n        var fontwidth = {};\n        var xpad = {};\n        var inverted = {};\n        var searchcolor = '{}';\n        var fluiddrawing = {};\n        var truncate_text_right = {};\n",
        js_quote(&o.name_type),
        o.font_size,
        o.font_width,
        XPAD,
        o.direction == Direction::Inverted,
        o.search_color,
        o.image_width.is_none(),
        o.text_truncate_direction == TextTruncateDirection::Right,
    );
    w.raw(&vars);
    if !o.no_javascript {
        w.raw(SCRIPT);
    }
    w.raw("    ]]></script>");

    let ui = o.ui_color.to_string();
    let details_y = match o.direction {
        Direction::Straight => image_height - o.ypad2() / 2,
        Direction::Inverted => o.ypad1() - o.font_size,
    };
    let bottom_y = image_height - o.ypad2() / 2;
    let top_y = o.font_size * 2;
    w.nl(1);
    w.raw(r#"<rect x="0" y="0" width="100%" height=""#);
    w.uint(image_height as u64);
    w.raw(r#"" fill="url(#background)"/>"#);
    let text = |w: &mut Out<W>,
                id: &str,
                class: bool,
                fill: bool,
                x: Option<usize>,
                y: usize,
                body: &str| {
        w.nl(1);
        w.raw(r#"<text id=""#);
        w.raw(id);
        w.raw("\"");
        if class {
            w.raw(r#" class="hide""#);
        }
        if fill {
            w.raw(r#" fill=""#);
            w.raw(&ui);
            w.raw("\"");
        }
        w.raw(" x=\"");
        match x {
            Some(px) => w.uint(px as u64),
            None => w.raw("50.0000%"),
        }
        w.raw("\" y=\"");
        w.uint(y as u64);
        w.raw(".00\">");
        w.esc(body);
        w.raw("</text>");
    };
    text(w, "title", false, true, None, top_y, &o.title);
    if let Some(sub) = &o.subtitle {
        text(w, "subtitle", false, false, None, o.font_size * 4, sub);
    }
    text(w, "details", false, true, Some(XPAD), details_y, " ");
    text(w, "unzoom", true, true, Some(XPAD), top_y, "Reset Zoom");
    text(
        w,
        "search",
        false,
        true,
        Some(width - XPAD),
        top_y,
        "Search",
    );
    text(w, "matched", false, true, Some(width - XPAD), bottom_y, " ");
    w.nl(1);
    w.raw(r#"<svg id="frames" x=""#);
    w.uint(XPAD as u64);
    w.raw(r#"" width=""#);
    w.uint((width - 2 * XPAD) as u64);
    w.raw(r#"" total_samples=""#);
    w.uint(total);
    w.raw("\">");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straightforward frame-by-frame merge used as the reference for the prefix-based one.
    fn naive_merge<'a>(lines: &[Line<'a>]) -> Vec<(String, usize, u64, u64, Option<i64>)> {
        let mut out = Vec::new();
        let mut path: Vec<(&str, u64, Option<i64>)> = Vec::new();
        let mut time = 0;
        for line in lines {
            let cur: Vec<&str> = std::iter::once("").chain(line.stack.split(';')).collect();
            let shared = path
                .iter()
                .zip(&cur)
                .take_while(|(p, c)| p.0 == **c)
                .count();
            for (i, p) in path.drain(shared..).enumerate() {
                out.push((p.0.to_owned(), shared + i, p.1, time, p.2));
            }
            for (i, name) in cur.iter().enumerate().skip(shared) {
                let d = line.delta.map(|d| if i + 1 == cur.len() { d } else { 0 });
                path.push((name, time, d));
            }
            time += line.count;
        }
        for (i, p) in path.drain(..).enumerate() {
            out.push((p.0.to_owned(), i, p.1, time, p.2));
        }
        out
    }

    #[test]
    fn prefix_merge_matches_naive_merge() {
        let alphabet = ["a", "ab", "a;b", "", "b", "a b", "ba"];
        let mut state = 12345u64;
        for round in 0..300 {
            let mut stacks = Vec::new();
            for _ in 0..(round % 12 + 1) {
                let mut s = String::new();
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                for k in 0..((state >> 60) % 5 + 1) {
                    if k > 0 {
                        s.push(';');
                    }
                    s.push_str(alphabet[((state >> (8 * k)) % alphabet.len() as u64) as usize]);
                }
                stacks.push(s);
            }
            stacks.sort();
            let lines: Vec<Line<'_>> = stacks
                .iter()
                .enumerate()
                .map(|(i, s)| Line {
                    stack: s,
                    count: i as u64 % 3 + 1,
                    delta: Some(i as i64 - 2),
                })
                .collect();
            let fast: Vec<_> = merge(&lines, 0.0)
                .into_iter()
                .map(|f| (f.name.to_owned(), f.depth, f.start, f.end, f.delta))
                .collect();
            assert_eq!(fast, naive_merge(&lines), "{stacks:?}");
        }
    }

    #[test]
    fn chunked_parallel_sort_equals_plain_sort() {
        let mut state = 99u64;
        let stacks: Vec<String> = (0..70_000)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!(
                    "root;f{};g{};h{}",
                    state >> 60,
                    (state >> 40) % 50,
                    (state >> 8) % 1000
                )
            })
            .collect();
        let make = || -> Vec<Line<'_>> {
            stacks
                .iter()
                .enumerate()
                .map(|(i, s)| Line {
                    stack: s,
                    count: (i % 7) as u64,
                    delta: None,
                })
                .collect()
        };
        let mut fast = make();
        sort_lines(&mut fast);
        let mut plain = make();
        plain.sort_by(line_order);
        let key = |v: &[Line<'_>]| {
            v.iter()
                .map(|l| (l.stack.to_owned(), l.count))
                .collect::<Vec<_>>()
        };
        assert_eq!(fast.len(), plain.len());
        assert_eq!(key(&fast), key(&plain));
    }

    #[test]
    fn rebase_keeps_deepest_non_leaf_base() {
        let base = vec!["B".to_owned()];
        assert_eq!(rebase("A;B;C;B;D", &base), Some("B;D"));
        assert_eq!(rebase("A;C;B", &base), None);
        assert_eq!(rebase("B;C", &base), None);
        assert_eq!(rebase("A", &base), None);
    }

    #[test]
    fn deannotate_strips_known_suffixes_only() {
        assert_eq!(deannotate("read_[k]"), "read");
        assert_eq!(deannotate("read_[x]"), "read_[x]");
        assert_eq!(deannotate("_[j]"), "");
    }
}
