//! The parts of the SVG document around the frames: the XML prologue, comments, styles, the
//! embedded script and the title/details/search texts, and the error picture.

use std::io::Write;

use crate::color;
use crate::options::{Direction, Options, TextTruncateDirection, XPAD};
use crate::out::Out;

/// The interaction script embedded unless [`Options::no_javascript`] is set.
const SCRIPT: &str = include_str!("flamegraph.js");

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

pub(crate) fn write_error_svg<W: Write>(w: &mut Out<W>, o: &Options) -> std::io::Result<()> {
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

pub(crate) fn write_header<W: Write>(
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
