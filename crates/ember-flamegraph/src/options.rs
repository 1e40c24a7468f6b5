//! The rendering options and the layout numbers derived from them.

use crate::FlameGraphError;
use crate::attrs::FrameAttrsMap;
use crate::color::{BackgroundColor, Color, Palette, PaletteMap};

/// Horizontal padding (pixels) left and right of the frames.
pub(crate) const XPAD: usize = 10;
/// Vertical gap (pixels) between stacked frames.
pub(crate) const FRAMEPAD: usize = 1;

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
    /// Persistent name → colour map; new names are added to it (see [`crate::RenderReport::palette_map`]).
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
    pub(crate) fn width(&self) -> usize {
        self.image_width.unwrap_or(1200)
    }

    /// Space above the frames: title (and subtitle); in icicle mode also the details line.
    pub(crate) fn ypad1(&self) -> usize {
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
    pub(crate) fn ypad2(&self) -> usize {
        match self.direction {
            Direction::Straight => self.font_size * 2 + 10,
            Direction::Inverted => self.font_size + 10,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), FlameGraphError> {
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
