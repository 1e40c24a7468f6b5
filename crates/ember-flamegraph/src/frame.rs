//! Drawing one merged frame: its element, tooltip, rectangle, colour and fitted label.

use std::io::Write;

use crate::attrs::FrameAttrs;
use crate::color::{self, Color, ColorMode, PaletteMap, Rng};
use crate::merge::Frame;
use crate::options::{Direction, FRAMEPAD, Options};
use crate::out::Out;

/// The numbers every frame's position depends on, computed once per graph.
pub(crate) struct Layout {
    /// Sum of all counts (the root's width).
    pub(crate) total: u64,
    /// Percentage of the width one sample takes.
    pub(crate) widthpertime_pct: f64,
    /// Height of the whole image in pixels.
    pub(crate) image_height: usize,
    /// Percentage of the width one character of a label takes.
    pub(crate) char_pct: f64,
    /// Offset of a label from its frame's left edge, in percent.
    pub(crate) text_offset_pct: f64,
    /// Largest absolute differential (at least 1), the full saturation of the diff colours.
    pub(crate) delta_max: u64,
}

impl Layout {
    /// The top and bottom pixel rows of a frame at `depth`.
    fn rows(&self, depth: usize, o: &Options) -> (usize, usize) {
        match o.direction {
            Direction::Straight => {
                let y2 = self.image_height - o.ypad2() - depth * o.frame_height;
                (y2 - o.frame_height + FRAMEPAD, y2)
            }
            Direction::Inverted => {
                let y1 = o.ypad1() + depth * o.frame_height;
                (y1, y1 + o.frame_height - FRAMEPAD)
            }
        }
    }
}

/// Frame colouring state that changes as frames are drawn: the palette map grows and the
/// random sequence advances.
pub(crate) struct Painter {
    /// The persistent name → colour map, when one is used.
    pub(crate) palette_map: Option<PaletteMap>,
    /// The fixed-seed sequence behind unhashed palette colours.
    pub(crate) rng: Rng,
    /// Palette and hashing choice.
    pub(crate) mode: ColorMode,
}

impl Painter {
    /// The colour of `f`, whose width is `width_pct` percent of the image.
    fn color(&mut self, f: &Frame<'_>, width_pct: f64, delta_max: u64, o: &Options) -> Color {
        if f.name == "--" {
            Color::rgb(160, 160, 160)
        } else if f.name == "-" {
            Color::rgb(200, 200, 200)
        } else if o.color_diffusion {
            color::color_scale(((width_pct / 100.0).sqrt() * 2000.0) as i64, 2000)
        } else if let Some(d) = f.delta {
            color::color_scale(
                if o.negate_differentials {
                    d.saturating_neg()
                } else {
                    d
                },
                delta_max,
            )
        } else if let Some(map) = self.palette_map.as_mut() {
            match map.get(f.name) {
                Some(c) => c,
                None => {
                    let c = color::color_for(self.mode, f.name, &mut self.rng);
                    map.insert(f.name, c);
                    c
                }
            }
        } else {
            color::color_for(self.mode, f.name, &mut self.rng)
        }
    }
}

/// Writes one frame: a `<g>` (or `<a>` when its attributes make it a link) holding the
/// tooltip, the rectangle and the label.
pub(crate) fn write_frame<W: Write>(
    w: &mut Out<W>,
    f: &Frame<'_>,
    layout: &Layout,
    painter: &mut Painter,
    o: &Options,
) -> std::io::Result<()> {
    let x1_pct = f.start as f64 * layout.widthpertime_pct;
    let x2_pct = f.end as f64 * layout.widthpertime_pct;
    let width_pct = x2_pct - x1_pct;
    let (y1, y2) = layout.rows(f.depth, o);
    let display = deannotate(f.name);
    let attrs = o.frame_attrs.as_ref().and_then(|m| m.get(f.name));
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
        None => write_tooltip(w, f, display, layout.total, o),
    }
    w.raw("</title>");

    let color = painter.color(f, width_pct, layout.delta_max, o);
    write_rect(w, f, (x1_pct, width_pct), (y1, y2), color);
    let fit = (width_pct / layout.char_pct).trunc() as usize;
    write_label(
        w,
        x1_pct + layout.text_offset_pct,
        y1 + y2 + 6,
        display,
        fit,
    );
    w.nl(2);
    w.raw(if link { "</a>" } else { "</g>" });
    w.maybe_flush()
}

/// The frame's rectangle; `x` is (left edge, width) in percent, `y` (top, bottom) in pixels.
fn write_rect<W: Write>(
    w: &mut Out<W>,
    f: &Frame<'_>,
    (x1_pct, width_pct): (f64, f64),
    (y1, y2): (usize, usize),
    color: Color,
) {
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
}

/// The frame's label at `x_pct` percent and `y2x / 2` pixels: the name when at least `fit`
/// characters fit, cut with `..` when it is longer, nothing below three characters.
fn write_label<W: Write>(w: &mut Out<W>, x_pct: f64, y2x: usize, display: &str, fit: usize) {
    w.nl(3);
    w.raw("<text x=\"");
    w.fixed(x_pct, 4);
    w.raw("%\" y=\"");
    write_half(w, y2x);
    w.raw("\">");
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
}

/// Writes `v / 2` with two decimals (`v` is a small integer, so only `.00` or `.50` occur).
fn write_half<W: Write>(w: &mut Out<W>, v: usize) {
    w.uint((v / 2) as u64);
    w.raw(if v.is_multiple_of(2) { ".00" } else { ".50" });
}

/// The default tooltip: `name (count unit, share%)`, plus the differential share.
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

/// Strips a trailing `_[k]`, `_[w]`, `_[i]` or `_[j]` annotation for display.
fn deannotate(name: &str) -> &str {
    match color::annotation(name) {
        Some(b'k' | b'w' | b'i' | b'j') => &name[..name.len() - 4],
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deannotate_strips_known_suffixes_only() {
        assert_eq!(deannotate("read_[k]"), "read");
        assert_eq!(deannotate("read_[x]"), "read_[x]");
        assert_eq!(deannotate("_[j]"), "");
    }
}
