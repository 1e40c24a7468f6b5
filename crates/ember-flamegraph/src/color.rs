//! Frame colours: palettes, name hashing, the seeded random source, differential
//! scales, background gradients and the `name->rgb(r,g,b)` palette map file.
//!
//! The numeric rules (hue ranges per palette, the name hash weighting early
//! characters, the seeded XorShift64 stream) follow the established
//! flame-graph conventions so that graphs drawn by Ember colour the same
//! functions the same way as graphs people already know.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

/// An RGB colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Color {
    /// Red.
    pub r: u8,
    /// Green.
    pub g: u8,
    /// Blue.
    pub b: u8,
}

impl Color {
    /// Builds a colour from components.
    pub const fn rgb(r: u8, g: u8, b: u8) -> Self {
        Color { r, g, b }
    }

    /// Parses `#rrggbb` or `rgb(r,g,b)` (spaces allowed inside the parentheses).
    pub fn parse(s: &str) -> Option<Color> {
        let s = s.trim();
        if let Some(hex) = s.strip_prefix('#') {
            if hex.len() != 6 || !hex.is_ascii() {
                return None;
            }
            let c = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok();
            return Some(Color::rgb(c(0)?, c(2)?, c(4)?));
        }
        let inner = s.strip_prefix("rgb(")?.strip_suffix(')')?;
        let mut parts = inner.split(',').map(|p| p.trim().parse::<u8>().ok());
        let color = Color::rgb(parts.next()??, parts.next()??, parts.next()??);
        if parts.next().is_some() {
            return None;
        }
        Some(color)
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rgb({},{},{})", self.r, self.g, self.b)
    }
}

/// A colour family for frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Palette {
    /// Red-yellow (the default).
    Hot,
    /// Green-blue, for memory profiles.
    Mem,
    /// Blue, for I/O profiles.
    Io,
    /// Aqua on blue, for wakeup profiles.
    Wakeup,
    /// Java semantics: JIT/Java green, C++ yellow, kernel orange, inlined aqua, native red.
    Java,
    /// JavaScript semantics.
    Js,
    /// Perl semantics.
    Perl,
    /// Python semantics.
    Python,
    /// Rust semantics: std/core orange, other paths yellow.
    Rust,
    /// Red shades.
    Red,
    /// Green shades.
    Green,
    /// Blue shades.
    Blue,
    /// Aqua shades.
    Aqua,
    /// Yellow shades.
    Yellow,
    /// Purple shades.
    Purple,
    /// Orange shades.
    Orange,
}

impl Palette {
    /// Every palette by its accepted name (`--colors`): what [`str::parse`] reads.
    pub const BY_NAME: &'static [(&'static str, Palette)] = &[
        ("hot", Palette::Hot),
        ("mem", Palette::Mem),
        ("io", Palette::Io),
        ("wakeup", Palette::Wakeup),
        ("java", Palette::Java),
        ("js", Palette::Js),
        ("perl", Palette::Perl),
        ("python", Palette::Python),
        ("rust", Palette::Rust),
        ("red", Palette::Red),
        ("green", Palette::Green),
        ("blue", Palette::Blue),
        ("aqua", Palette::Aqua),
        ("yellow", Palette::Yellow),
        ("purple", Palette::Purple),
        ("orange", Palette::Orange),
    ];

    /// The single-hue palette a (possibly semantic) palette uses for `name`.
    fn resolve(self, name: &str) -> Palette {
        match self {
            Palette::Java => java_hue(name),
            Palette::Js => js_hue(name),
            Palette::Perl => kernel_or_substring_rule(name, PERL_RULES),
            Palette::Python => kernel_or_substring_rule(name, PYTHON_RULES),
            Palette::Rust => rust_hue(name),
            Palette::Wakeup => Palette::Aqua,
            other => other,
        }
    }
}

impl FromStr for Palette {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match Palette::BY_NAME.iter().find(|(name, _)| *name == s) {
            Some(&(_, palette)) => Ok(palette),
            None => {
                let names: Vec<&str> = Palette::BY_NAME.iter().map(|(name, _)| *name).collect();
                Err(format!(
                    "unknown palette {s:?} (one of {})",
                    names.join(", ")
                ))
            }
        }
    }
}

/// The background gradient behind the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackgroundColor {
    /// `#eeeeee` → `#eeeeb0`.
    Yellow,
    /// `#eeeeee` → `#e0e0ff`.
    Blue,
    /// `#eef2ee` → `#e0ffe0`.
    Green,
    /// `#f8f8f8` → `#e8e8e8`.
    Grey,
    /// One flat colour.
    Flat(Color),
}

impl FromStr for BackgroundColor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "yellow" => BackgroundColor::Yellow,
            "blue" => BackgroundColor::Blue,
            "green" => BackgroundColor::Green,
            "grey" | "gray" => BackgroundColor::Grey,
            other => BackgroundColor::Flat(Color::parse(other).ok_or_else(|| {
                format!("unknown background {other:?} (yellow, blue, green, grey or #rrggbb)")
            })?),
        })
    }
}

/// The two gradient stops for a background, given the palette when none was chosen.
pub(crate) fn background_stops(bg: Option<BackgroundColor>, palette: Palette) -> (String, String) {
    let bg = bg.unwrap_or(match palette {
        Palette::Mem => BackgroundColor::Green,
        Palette::Io | Palette::Wakeup => BackgroundColor::Blue,
        Palette::Red
        | Palette::Green
        | Palette::Blue
        | Palette::Aqua
        | Palette::Yellow
        | Palette::Purple
        | Palette::Orange => BackgroundColor::Grey,
        _ => BackgroundColor::Yellow,
    });
    let (a, b) = match bg {
        BackgroundColor::Yellow => ("#eeeeee", "#eeeeb0"),
        BackgroundColor::Blue => ("#eeeeee", "#e0e0ff"),
        BackgroundColor::Green => ("#eef2ee", "#e0ffe0"),
        BackgroundColor::Grey => ("#f8f8f8", "#e8e8e8"),
        BackgroundColor::Flat(c) => {
            let hex = format!("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
            return (hex.clone(), hex);
        }
    };
    (a.to_owned(), b.to_owned())
}

/// `_[k]`-style annotation letter at the end of a frame name, if any.
pub(crate) fn annotation(name: &str) -> Option<u8> {
    let b = name.as_bytes();
    let n = b.len();
    if n >= 4 && b[n - 4] == b'_' && b[n - 3] == b'[' && b[n - 1] == b']' {
        Some(b[n - 2])
    } else {
        None
    }
}

fn java_hue(name: &str) -> Palette {
    match annotation(name) {
        Some(b'k') => return Palette::Orange,
        Some(b'i') => return Palette::Aqua,
        Some(b'j') => return Palette::Green,
        _ => {}
    }
    let unprefixed = name.strip_prefix('L').unwrap_or(name);
    if name.contains("::") || name.starts_with("-[") || name.starts_with("+[") {
        Palette::Yellow
    } else if unprefixed.contains('/')
        || (unprefixed.contains('.') && !unprefixed.starts_with('['))
        || unprefixed.starts_with(|c: char| c.is_ascii_uppercase())
    {
        Palette::Green
    } else {
        Palette::Red
    }
}

fn js_hue(name: &str) -> Palette {
    if !name.is_empty() && name.trim().is_empty() {
        return Palette::Green;
    }
    match annotation(name) {
        Some(b'k') => return Palette::Orange,
        Some(b'j') if name.contains('/') => return Palette::Green,
        Some(b'j') => return Palette::Aqua,
        _ => {}
    }
    if name.contains("::") {
        Palette::Yellow
    } else if name.contains(':') {
        Palette::Aqua
    } else if name.find('/').is_some_and(|i| name[i..].contains(".js")) {
        Palette::Green
    } else {
        Palette::Red
    }
}

/// Perl palette rules for [`kernel_or_substring_rule`].
const PERL_RULES: &[(&[&str], Palette)] = &[
    (&["Perl", ".pl"], Palette::Green),
    (&["::"], Palette::Yellow),
];

/// Python palette rules for [`kernel_or_substring_rule`].
const PYTHON_RULES: &[(&[&str], Palette)] = &[
    (&["site-packages", "dist-packages"], Palette::Aqua),
    (&["<frozen", "<built-in", "/lib/python"], Palette::Yellow),
    (&[".py"], Palette::Green),
];

/// The Perl and Python palettes: orange for kernel frames (`_[k]`), else the palette of the
/// first rule with a substring in `name` (rules are tried in order), else red.
fn kernel_or_substring_rule(name: &str, rules: &[(&[&str], Palette)]) -> Palette {
    if name.ends_with("_[k]") {
        return Palette::Orange;
    }
    rules
        .iter()
        .find(|(needles, _)| needles.iter().any(|n| name.contains(n)))
        .map_or(Palette::Red, |&(_, palette)| palette)
}

fn rust_hue(name: &str) -> Palette {
    if name.starts_with("core::")
        || name.starts_with("std::")
        || name.starts_with("alloc::")
        || name.contains("as core::")
        || name.contains("as std::")
        || name.contains("as alloc::")
    {
        Palette::Orange
    } else if name.contains("::") {
        Palette::Yellow
    } else {
        Palette::Red
    }
}

/// Accumulates the name hash over at most three characters, weighting earlier ones more.
struct NameHash {
    vector: f32,
    weight: f32,
    max: f32,
    modulo: u8,
    used: u8,
}

impl NameHash {
    fn new() -> Self {
        NameHash {
            vector: 0.0,
            weight: 1.0,
            max: 1.0,
            modulo: 10,
            used: 0,
        }
    }
    fn feed(&mut self, c: u8) {
        if self.used == 3 {
            return;
        }
        self.used += 1;
        let i = f32::from(c % self.modulo);
        self.vector += i / f32::from(self.modulo - 1) * self.weight;
        self.modulo += 1;
        self.max += self.weight;
        self.weight *= 0.70;
    }
    fn value(&self) -> f32 {
        1.0 - self.vector / self.max
    }
}

/// Hash in [0, 1] of a name's first characters; a "module`" prefix (a backtick after the first
/// character) is skipped, so the same function in different modules gets the same colour.
fn namehash(bytes: impl Iterator<Item = u8>) -> f32 {
    let mut h = NameHash::new();
    let mut after_module: Option<NameHash> = None;
    for (i, c) in bytes.enumerate() {
        match after_module.as_mut() {
            Some(m) => {
                m.feed(c);
                if m.used == 3 {
                    break;
                }
            }
            None if i > 0 && c == b'`' => after_module = Some(NameHash::new()),
            None => h.feed(c),
        }
    }
    after_module.unwrap_or(h).value()
}

/// The XorShift64 stream used for random colours, seeded like the reference tools so that
/// non-hashed graphs are reproducible.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new() -> Self {
        Rng(1234)
    }
    pub(crate) fn next_f32(&mut self) -> f32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        // Top 53 bits → [0, 1).
        ((x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)) as f32
    }
}

fn fnv_unit(hash: u64) -> f32 {
    (hash as f64 / u64::MAX as f64) as f32
}

/// How a frame's colour variables are chosen.
#[derive(Clone, Copy)]
pub(crate) struct ColorMode {
    pub palette: Palette,
    pub hash: bool,
    pub deterministic: bool,
}

/// Picks the colour for a frame name.
pub(crate) fn color_for(mode: ColorMode, name: &str, rng: &mut Rng) -> Color {
    let (v1, v2, v3) = if mode.hash {
        let forward = namehash(name.bytes());
        let backward = namehash(name.bytes().rev());
        (forward, backward, backward)
    } else if mode.deterministic {
        const PRIME: u64 = 0x100000001b3;
        let mut h: u64 = 0xcbf29ce484222325;
        for &b in name.as_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
        let a = fnv_unit(h);
        h = h.wrapping_mul(PRIME);
        let b = fnv_unit(h);
        h = h.wrapping_mul(PRIME);
        (a, b, fnv_unit(h))
    } else {
        let a = rng.next_f32();
        let b = rng.next_f32();
        (a, b, rng.next_f32())
    };
    // Saturating float→int casts keep every channel in range.
    let t = |base: u8, span: f32, v: f32| base.wrapping_add((span * v) as u8);
    match mode.palette.resolve(name) {
        Palette::Hot => Color::rgb(t(205, 50., v3), t(0, 230., v1), t(0, 55., v2)),
        Palette::Mem => Color::rgb(0, t(190, 50., v2), t(0, 210., v1)),
        Palette::Io => Color::rgb(t(80, 60., v1), t(80, 60., v1), t(190, 55., v2)),
        Palette::Red => Color::rgb(t(200, 55., v1), t(50, 80., v1), t(50, 80., v1)),
        Palette::Green => Color::rgb(t(50, 60., v1), t(200, 55., v1), t(50, 60., v1)),
        Palette::Blue => Color::rgb(t(80, 60., v1), t(80, 60., v1), t(205, 50., v1)),
        Palette::Yellow => Color::rgb(t(175, 55., v1), t(175, 55., v1), t(50, 20., v1)),
        Palette::Purple => Color::rgb(t(190, 65., v1), t(80, 60., v1), t(190, 65., v1)),
        Palette::Aqua => Color::rgb(t(50, 60., v1), t(165, 55., v1), t(165, 55., v1)),
        Palette::Orange => Color::rgb(t(190, 65., v1), t(90, 65., v1), 0),
        // resolve() only returns single-hue palettes.
        _ => Color::rgb(0, 0, 0),
    }
}

/// Differential colour: red for growth, blue for shrinkage, near-white for no change.
pub(crate) fn color_scale(value: i64, max: u64) -> Color {
    let max = max.max(1) as i128;
    let value = i128::from(value).clamp(-max, max);
    if value == 0 {
        return Color::rgb(250, 250, 250);
    }
    let c = (100 + 150 * (max - value.abs()) / max) as u8;
    if value > 0 {
        Color::rgb(255, c, c)
    } else {
        Color::rgb(c, c, 255)
    }
}

/// A persistent name → colour map, so one function keeps its colour across graphs
/// (file lines look like `name->rgb(r,g,b)`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaletteMap {
    map: HashMap<String, Color>,
}

impl PaletteMap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a palette map (`name->rgb(r,g,b)` lines); lines of another shape are skipped and
    /// reported as one warning. Blank lines are skipped silently. An empty name is valid (it
    /// is the root frame). A palette file that does not exist yet is the empty text.
    pub fn parse(text: &str) -> (PaletteMap, Vec<String>) {
        let mut map = HashMap::new();
        let mut invalid = 0;
        for line in text.lines() {
            if line.trim().is_empty() {
                continue;
            }
            let mut parts = line.split("->");
            let parsed = match (parts.next(), parts.next(), parts.next()) {
                (Some(name), Some(color), None) => Color::parse(color).map(|c| (name, c)),
                _ => None,
            };
            match parsed {
                Some((name, color)) => {
                    map.insert(name.to_owned(), color);
                }
                None => invalid += 1,
            }
        }
        let warnings = if invalid > 0 {
            vec![format!("Ignored {invalid} lines with invalid format")]
        } else {
            Vec::new()
        };
        (PaletteMap { map }, warnings)
    }

    /// Serialises the map sorted by name, one `name->rgb(r,g,b)` line per entry.
    pub fn to_text(&self) -> String {
        let mut entries: Vec<_> = self.map.iter().collect();
        entries.sort();
        let mut out = String::new();
        for (name, c) in entries {
            out.push_str(name);
            out.push_str("->");
            out.push_str(&c.to_string());
            out.push('\n');
        }
        out
    }

    /// The colour stored for `name`, if any.
    pub fn get(&self, name: &str) -> Option<Color> {
        self.map.get(name).copied()
    }

    /// Stores a colour for `name`.
    pub fn insert(&mut self, name: &str, color: Color) {
        self.map.insert(name.to_owned(), color);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_frame_hashes_to_top_of_hot_range() {
        let mode = ColorMode {
            palette: Palette::Hot,
            hash: true,
            deterministic: false,
        };
        assert_eq!(
            color_for(mode, "", &mut Rng::new()),
            Color::rgb(255, 230, 55)
        );
    }

    #[test]
    fn module_prefix_is_ignored_by_hash() {
        assert_eq!(namehash("libc`read".bytes()), namehash("read".bytes()));
        assert_ne!(namehash("read".bytes()), namehash("write".bytes()));
    }

    #[test]
    fn palette_names_parse_from_the_one_table() {
        for &(name, palette) in Palette::BY_NAME {
            assert_eq!(name.parse::<Palette>(), Ok(palette));
        }
        let distinct: std::collections::HashSet<String> = (Palette::BY_NAME.iter())
            .map(|(_, p)| format!("{p:?}"))
            .collect();
        assert_eq!(distinct.len(), Palette::BY_NAME.len());
        assert_eq!(
            "Hot".parse::<Palette>(),
            Err(
                "unknown palette \"Hot\" (one of hot, mem, io, wakeup, java, js, perl, python, \
                 rust, red, green, blue, aqua, yellow, purple, orange)"
                    .to_string()
            )
        );
    }

    #[test]
    fn colors_parse() {
        assert_eq!(Color::parse("#7d7d7d"), Some(Color::rgb(125, 125, 125)));
        assert_eq!(Color::parse("rgb(1, 2,3)"), Some(Color::rgb(1, 2, 3)));
        assert_eq!(Color::parse("rgb(1,2)"), None);
        assert_eq!(Color::parse("#7d7d7"), None);
    }

    #[test]
    fn perl_and_python_hues_follow_their_rules_in_order() {
        use Palette::{Aqua, Green, Orange, Perl, Python, Red, Yellow};
        let cases: [(Palette, &str, Palette); 11] = [
            (Perl, "Perl_pp_entersub_[k]", Orange),
            (Perl, "Perl_pp_entersub", Green),
            (Perl, "main::run /srv/app.pl", Green),
            (Perl, "Foo::bar", Yellow),
            (Perl, "main", Red),
            (Python, "do_syscall_64_[k]", Orange),
            (
                Python,
                "get (/usr/lib/python3/site-packages/req/api.py:7)",
                Aqua,
            ),
            (Python, "<frozen importlib._bootstrap>", Yellow),
            (Python, "join (/usr/lib/python3.11/posixpath.py:71)", Yellow),
            (Python, "main (app.py:3)", Green),
            (Python, "main", Red),
        ];
        for (palette, name, hue) in cases {
            assert_eq!(palette.resolve(name), hue, "{palette:?} {name:?}");
        }
    }

    #[test]
    fn scale_extremes() {
        assert_eq!(color_scale(10, 10), Color::rgb(255, 100, 100));
        assert_eq!(color_scale(-10, 10), Color::rgb(100, 100, 255));
        assert_eq!(color_scale(0, 10), Color::rgb(250, 250, 250));
    }
}
