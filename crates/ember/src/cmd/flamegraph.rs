//! `ember flamegraph`: folded stacks or a pprof profile → interactive flame graph SVG.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ember_flamegraph::{
    BackgroundColor, Color, Direction, FrameAttrsMap, Options, Palette, PaletteMap,
    TextTruncateDirection, render,
};
use ember_formats::detect::{self, Kind};
use ember_formats::{FoldedRef, InputBytes};

/// Render folded stacks or a pprof profile as an interactive flame graph SVG.
#[derive(clap::Args)]
#[command(
    long_about = "Render folded stacks (`root;...;leaf count` lines, as written by `ember collapse`, \
                  stackcollapse-*.pl or inferno-collapse-*) or a pprof profile as an interactive \
                  SVG flame graph: click a frame to zoom, `Reset Zoom` to go back, `Search` \
                  (or Ctrl+F) to highlight frames matching a regular expression and see the share \
                  of samples they cover; hovering shows name, count and percentage.\n\n\
                  Several input files are concatenated. Lines with three columns \
                  (`stack before after`, as written by `ember diff`) give a differential flame \
                  graph: widths are `after`, red frames grew, blue ones shrank. A pprof profile is \
                  detected by its content (gzip or raw protobuf), or forced with --pprof / --sample-type; \
                  a `pprof -diff_base` profile draws as the differential graph of base → new. \
                  `perf script` text (folded like `ember collapse`), speedscope JSON and \
                  Perfetto traces (perf samples, else heapprofd dumps) are read too.\n\n\
                  The SVG is self-contained (no external scripts or fonts) and works offline."
)]
pub struct Args {
    /// Folded-stack files (or pprof profiles) to read; several are concatenated. Reads stdin
    /// when absent or `-`.
    #[arg(value_name = "FILE")]
    inputs: Vec<PathBuf>,

    /// Write the SVG here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Treat the input as a pprof profile (gzip or raw protobuf). Default: detected from the
    /// content (gzip magic bytes, or a raw protobuf profile), or implied by --sample-type.
    #[arg(long)]
    pprof: bool,

    /// pprof sample type to draw, by name (`cpu`, `alloc_space`) or `type/unit`. Implies --pprof.
    /// Default: the profile's default_sample_type, else its last sample type.
    #[arg(long, value_name = "NAME")]
    sample_type: Option<String>,

    /// Title text. Default: "Flame Graph" ("Icicle Graph" with --inverted, "Flame Chart" with
    /// --flamechart).
    #[arg(long)]
    title: Option<String>,

    /// Second title line. Default: none.
    #[arg(long)]
    subtitle: Option<String>,

    /// Image width in pixels. Default: 1200 (and the script may treat the layout as fluid).
    #[arg(long, value_name = "PIXELS")]
    width: Option<usize>,

    /// Height of one frame row in pixels. Default: 16.
    #[arg(
        long,
        value_name = "PIXELS",
        default_value_t = 16,
        hide_default_value = true
    )]
    height: usize,

    /// Omit frames narrower than this percentage of the total width. Default: 0.01.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 0.01,
        hide_default_value = true
    )]
    minwidth: f64,

    /// What the counts are, shown in tooltips. Default: "samples" (for pprof input: the sample
    /// type's unit, e.g. "nanoseconds" or "bytes", or for a count its type, e.g.
    /// "alloc_objects"), the names the server's SVGs use too.
    #[arg(long, value_name = "NAME")]
    countname: Option<String>,

    /// Label before the frame name in the details line. Default: "Function:".
    #[arg(
        long,
        value_name = "LABEL",
        default_value = "Function:",
        hide_default_value = true
    )]
    nametype: String,

    /// Icicle graph: root at the top, stacks grow downwards. Default: off.
    #[arg(long)]
    inverted: bool,

    /// Reverse every stack (leaf becomes root) before merging, to see callers of hot leaves.
    /// Default: off.
    #[arg(long)]
    reverse: bool,

    /// Flame chart: keep input (time) order instead of sorting, and only merge adjacent equal
    /// stacks. The input is taken as newest-first and drawn left (old) to right (new).
    /// Default: off.
    #[arg(long)]
    flamechart: bool,

    /// Multiply counts by this factor in tooltips (e.g. to undo a pre-scaling). Default: 1.0.
    #[arg(long, default_value_t = 1.0, hide_default_value = true)]
    factor: f64,

    /// Differential input: swap the hues, so red means the count fell and blue that it rose.
    /// Default: off.
    #[arg(long)]
    negate: bool,

    /// Colour palette: hot, mem, io, wakeup, java, js, perl, python, rust, red, green, blue,
    /// aqua, yellow, purple, orange. Default: hot.
    #[arg(
        short = 'c',
        long,
        value_name = "PALETTE",
        default_value = "hot",
        hide_default_value = true
    )]
    colors: String,

    /// Background: yellow, blue, green, grey or #rrggbb. Default: chosen by the palette
    /// (yellow for hot and the semantic palettes, green for mem, blue for io/wakeup, grey for
    /// the single-hue ones).
    #[arg(long, value_name = "COLOR")]
    bgcolors: Option<String>,

    /// Colour by a hash of the function name, so a function gets the same colour everywhere.
    /// Default: off (colours come from a fixed-seed random sequence).
    #[arg(long)]
    hash: bool,

    /// Colour by an FNV hash of the full function name: stable across runs and machines.
    /// Default: off.
    #[arg(long)]
    deterministic: bool,

    /// Keep colours consistent across graphs with this `name->rgb(r,g,b)` file: colours found
    /// there are reused, new ones are added and the file is rewritten. Default: none.
    #[arg(long, value_name = "FILE")]
    palette_map: Option<PathBuf>,

    /// Font family. Default: monospace.
    #[arg(
        long,
        value_name = "FAMILY",
        default_value = "monospace",
        hide_default_value = true
    )]
    font_type: String,

    /// Font size in pixels. Default: 12.
    #[arg(
        long,
        value_name = "PIXELS",
        default_value_t = 12,
        hide_default_value = true
    )]
    font_size: usize,

    /// Average glyph width as a fraction of the font size, used to fit names into frames.
    /// Default: 0.59.
    #[arg(
        long,
        value_name = "RATIO",
        default_value_t = 0.59,
        hide_default_value = true
    )]
    font_width: f64,

    /// The input is already sorted: skip sorting and fail if it is not. Default: off (sort).
    #[arg(long)]
    no_sort: bool,

    /// Text stored in an XML comment inside the SVG. Default: empty.
    #[arg(long, default_value = "", hide_default_value = true)]
    notes: String,

    /// Highlight colour of search matches, #rrggbb. Default: #e600e6.
    #[arg(
        long,
        value_name = "COLOR",
        default_value = "#e600e6",
        hide_default_value = true
    )]
    search_color: String,

    /// Outline colour of frames, #rrggbb or `none`. Default: none.
    #[arg(
        long,
        value_name = "COLOR",
        default_value = "none",
        hide_default_value = true
    )]
    stroke_color: String,

    /// Colour of the title, details and buttons, #rrggbb. Default: #000000.
    #[arg(
        long,
        value_name = "COLOR",
        default_value = "#000000",
        hide_default_value = true
    )]
    uicolor: String,

    /// Re-root each stack at its deepest frame with this name; stacks without it are dropped.
    /// Repeatable. Default: none.
    #[arg(long, value_name = "FRAME")]
    base: Vec<String>,

    /// Colour by width instead of palette: the wider the frame, the redder. Default: off.
    #[arg(long)]
    color_diffusion: bool,

    /// Which end the interactive script trims from names that do not fit: left keeps the start
    /// (`func..`), right keeps the end (`..tion`). Default: left.
    #[arg(long, value_name = "DIR", default_value = "left", value_parser = ["left", "right"], hide_default_value = true)]
    text_truncate_direction: String,

    /// Indent the SVG over many lines (bigger, easier to diff). Default: off.
    #[arg(long)]
    pretty_xml: bool,

    /// Leave out the interaction script (static picture). Default: off.
    #[arg(long)]
    no_javascript: bool,

    /// Per-function SVG attributes: lines of `name<TAB>key=value<TAB>...` with keys title,
    /// href, target, class, style, id, onmouseover, onmouseout, onclick, g_extra, a_extra.
    /// Default: none.
    #[arg(long, value_name = "FILE")]
    nameattr: Option<PathBuf>,
}

fn parse_color(what: &str, s: &str) -> anyhow::Result<Color> {
    Color::parse(s).with_context(|| format!("--{what}: expected #rrggbb or rgb(r,g,b), got {s:?}"))
}

fn warn(msg: &str) {
    eprintln!("ember: warning: {msg}");
}

/// Reads a palette map or `--nameattr` file as text; `None` when it does not exist.
fn read_text(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Folded view of a pprof profile (decoded from gunzipped bytes); also returns the unit of
/// the chosen sample type.
fn pprof_folded(
    bytes: &[u8],
    sample_type: Option<&str>,
    name: &Path,
) -> anyhow::Result<(FoldedRef<'static>, String)> {
    let profile =
        ember_pprof::decode(bytes).with_context(|| format!("decoding pprof {}", name.display()))?;
    profile_folded(&profile, sample_type, name)
}

/// Folded view of a decoded profile, and the unit of the chosen sample type.
fn profile_folded(
    profile: &ember_pprof::Profile,
    sample_type: Option<&str>,
    name: &Path,
) -> anyhow::Result<(FoldedRef<'static>, String)> {
    let index = ember_pprof::sample_index(profile, sample_type)
        .with_context(|| format!("choosing the sample type of {}", name.display()))?;
    // What the tooltips call the values: one vocabulary with every other Ember flame graph.
    let unit = profile
        .sample_type
        .get(index)
        .map(|t| {
            ember_formats::units::value_name(
                ember_pprof::string(profile, t.r#type),
                ember_pprof::string(profile, t.unit),
            )
        })
        .unwrap_or_default();
    // A `-diff_base` profile is a difference of two profiles: drawn as the differential
    // flame graph of base → new, nothing negative to leave out.
    if let Some(diff) = ember_formats::convert::pprof_diff_folded_ref(profile, index) {
        return Ok((diff, unit));
    }
    let (folded, negative) = ember_formats::convert::pprof_folded_ref(profile, index);
    if negative > 0 {
        warn(&format!(
            "{}: skipped {negative} stacks with negative values",
            name.display()
        ));
    }
    Ok((folded, unit))
}

/// The inputs, read one at a time: pprof profiles are folded as they are read and their
/// buffers dropped, so memory follows the merged stacks rather than the inputs (thousands of
/// profiles of one day merge into one map); folded text is kept, to be parsed in place.
struct Inputs<'p> {
    /// Folded-text buffers, parsed later borrowing from them.
    text: Vec<(&'p Path, InputBytes)>,
    /// Stacks of the pprof inputs merged by stack (`stack → count`), or, for a flame chart,
    /// of every input in input order.
    pprof: PprofStacks,
    /// Unit of the first pprof input.
    unit: Option<String>,
    /// Malformed lines of folded text already parsed (flame charts).
    ignored_lines: usize,
    /// Whether a folded text already parsed had fractional counts (flame charts).
    has_fractional: bool,
}

/// pprof stacks, merged or in order.
enum PprofStacks {
    /// `stack → (count, second count)`: the second only for differential stacks.
    Merged(std::collections::HashMap<String, (f64, Option<f64>)>),
    InOrder(Vec<ember_formats::FoldedLineRef<'static>>),
}

/// Reads and classifies every input (stdin at most once), folding pprof ones right away.
fn read_inputs<'p>(args: &Args, inputs: &'p [PathBuf]) -> anyhow::Result<Inputs<'p>> {
    let mut out = Inputs {
        text: Vec::new(),
        pprof: if args.flamechart {
            // A flame chart keeps input (time) order: nothing may be merged across inputs.
            PprofStacks::InOrder(Vec::new())
        } else {
            PprofStacks::Merged(std::collections::HashMap::new())
        },
        unit: None,
        ignored_lines: 0,
        has_fractional: false,
    };
    let mut stdin_read = false;
    let mut progress = super::progress::Progress::new(
        "reading",
        super::progress::Unit::Files,
        Some(inputs.len() as u64),
    );
    for path in inputs {
        progress.add(1, &path.display());
        if path == Path::new("-") {
            if stdin_read {
                continue;
            }
            stdin_read = true;
        }
        let bytes = ember_formats::input::read_bytes(path)?;
        let kind = if args.pprof || args.sample_type.is_some() {
            Kind::Pprof
        } else {
            detect::classify(&bytes)
        };
        // Every kind becomes folded lines, merged or kept in order below, but for folded text
        // to be merged: kept whole, to be parsed in place once every input is read.
        let f = match kind {
            Kind::Pprof => {
                let (f, unit) = pprof_folded(&bytes, args.sample_type.as_deref(), path)?;
                out.unit.get_or_insert(unit);
                f
            }
            Kind::Folded => {
                if let PprofStacks::Merged(_) = out.pprof {
                    out.text.push((path.as_path(), bytes));
                    continue;
                }
                let part = ember_formats::parse_borrowed(&bytes).into_owned();
                out.ignored_lines += part.ignored_lines;
                out.has_fractional |= part.has_fractional;
                part
            }
            // Read by the one detector (perf script folded like `ember collapse`, speedscope
            // and Perfetto traces into a profile), then merged like the other inputs.
            Kind::PerfScript | Kind::Speedscope | Kind::Perfetto => {
                match detect::decode_as(&bytes, kind, path)? {
                    ember_formats::Input::Pprof(profile) => {
                        let (f, unit) =
                            profile_folded(&profile, args.sample_type.as_deref(), path)?;
                        out.unit.get_or_insert(unit);
                        f
                    }
                    ember_formats::Input::Folded(f) => f,
                }
            }
        };
        for line in f.lines {
            match &mut out.pprof {
                PprofStacks::Merged(m) => add_line(m, line),
                PprofStacks::InOrder(v) => v.push(line),
            }
        }
    }
    Ok(out)
}

/// Adds a folded line to the merged pprof stacks (both counts of a differential line).
fn add_line(
    m: &mut std::collections::HashMap<String, (f64, Option<f64>)>,
    line: ember_formats::FoldedLineRef<'_>,
) {
    let entry = m.entry(line.stack.into_owned()).or_insert((0.0, None));
    entry.0 += line.count;
    if let Some(second) = line.second_count {
        entry.1 = Some(entry.1.unwrap_or(0.0) + second);
    }
}

/// Every input's stacks as one folded input: the pprof stacks, then the folded text parsed in
/// place.
fn fold_inputs<'i>(inputs: &'i Inputs<'_>) -> FoldedRef<'i> {
    let mut folded = FoldedRef {
        ignored_lines: inputs.ignored_lines,
        has_fractional: inputs.has_fractional,
        ..FoldedRef::default()
    };
    fn line(
        stack: &str,
        count: f64,
        second_count: Option<f64>,
    ) -> ember_formats::FoldedLineRef<'_> {
        ember_formats::FoldedLineRef {
            stack: stack.into(),
            count,
            second_count,
        }
    }
    match &inputs.pprof {
        PprofStacks::Merged(m) => folded
            .lines
            .extend(m.iter().map(|(s, &(c, second))| line(s, c, second))),
        PprofStacks::InOrder(v) => {
            folded
                .lines
                .extend(v.iter().map(|l| ember_formats::FoldedLineRef {
                    stack: l.stack.as_ref().into(),
                    ..*l
                }))
        }
    }
    for (_, bytes) in &inputs.text {
        let part = ember_formats::parse_borrowed(bytes);
        folded.lines.extend(part.lines);
        folded.ignored_lines += part.ignored_lines;
        folded.has_fractional |= part.has_fractional;
    }
    folded
}

/// Loads `--palette-map` and `--nameattr`, printing their warnings.
fn load_maps(args: &Args) -> anyhow::Result<(Option<PaletteMap>, Option<FrameAttrsMap>)> {
    let palette_map = match &args.palette_map {
        Some(path) => {
            // A palette file that does not exist yet starts empty (the first consistent run).
            let text = read_text(path)?.unwrap_or_default();
            let (map, warnings) = PaletteMap::parse(&text);
            warnings
                .iter()
                .for_each(|w| warn(&format!("{}: {w}", path.display())));
            Some(map)
        }
        None => None,
    };
    let frame_attrs = match &args.nameattr {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let text = String::from_utf8_lossy(&bytes);
            let (map, warnings) = FrameAttrsMap::parse(&text);
            warnings
                .iter()
                .for_each(|w| warn(&format!("{}: {w}", path.display())));
            Some(map)
        }
        None => None,
    };
    Ok((palette_map, frame_attrs))
}

/// Runs `ember flamegraph`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let colors: Palette = args
        .colors
        .parse()
        .map_err(anyhow::Error::msg)
        .context("--colors")?;
    let bgcolors = match &args.bgcolors {
        Some(s) => Some(
            s.parse::<BackgroundColor>()
                .map_err(anyhow::Error::msg)
                .context("--bgcolors")?,
        ),
        None => None,
    };
    let stroke_color = match args.stroke_color.as_str() {
        "none" => None,
        s => Some(parse_color("stroke-color", s)?),
    };
    if args.hash && args.deterministic {
        bail!("--hash and --deterministic are alternatives; pick one");
    }

    let inputs = if args.inputs.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        args.inputs.clone()
    };
    let read = read_inputs(&args, &inputs)?;
    let folded = fold_inputs(&read);
    let pprof_unit = read.unit.clone();
    let (palette_map, frame_attrs) = load_maps(&args)?;

    let direction = if args.inverted {
        Direction::Inverted
    } else {
        Direction::Straight
    };
    let default_title = if args.inverted {
        "Icicle Graph"
    } else if args.flamechart {
        "Flame Chart"
    } else {
        "Flame Graph"
    };
    let count_name = args
        .countname
        .clone()
        .or_else(|| pprof_unit.filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "samples".to_owned());
    let options = Options {
        colors,
        bgcolors,
        hash: args.hash,
        deterministic: args.deterministic,
        palette_map,
        frame_attrs,
        search_color: parse_color("search-color", &args.search_color)?,
        stroke_color,
        ui_color: parse_color("uicolor", &args.uicolor)?,
        title: args
            .title
            .clone()
            .unwrap_or_else(|| default_title.to_owned()),
        subtitle: args.subtitle.clone(),
        notes: args.notes.clone(),
        image_width: args.width,
        frame_height: args.height,
        min_width: args.minwidth,
        font_type: args.font_type.clone(),
        font_size: args.font_size,
        font_width: args.font_width,
        count_name,
        name_type: args.nametype.clone(),
        factor: args.factor,
        direction,
        text_truncate_direction: if args.text_truncate_direction == "right" {
            TextTruncateDirection::Right
        } else {
            TextTruncateDirection::Left
        },
        negate_differentials: args.negate,
        reverse_stack_order: args.reverse,
        flame_chart: args.flamechart,
        no_sort: args.no_sort,
        color_diffusion: args.color_diffusion,
        base: args.base.clone(),
        pretty_xml: args.pretty_xml,
        no_javascript: args.no_javascript,
    };

    let sink: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(File::create(path).with_context(|| format!("creating {}", path.display()))?)
        }
        None => Box::new(io::stdout().lock()),
    };
    let report = render(&folded, &options, BufWriter::with_capacity(1 << 16, sink))?;
    for w in &report.warnings {
        warn(w);
    }
    if let (Some(path), Some(map)) = (&args.palette_map, &report.palette_map) {
        std::fs::write(path, map.to_text())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
