//! Renders every row of `tests/data/corpora/flamegraph-svg-cases.tsv` and compares the SVG with the
//! reference line by line (trailing whitespace trimmed), as the reference harness does. Each row
//! is classified as an exact match or a match of everything but frame colours; rows whose
//! colours are fully determined by the options (hash / deterministic / differential) must be exact.
//! Every rendered SVG, with and without the script, must also parse as XML.

use ember_flamegraph::{
    BackgroundColor, Color, Direction, FlameGraphError, FrameAttrsMap, Options, Palette,
    PaletteMap, TextTruncateDirection, render,
};
use ember_formats::Folded;
use std::path::{Path, PathBuf};

fn corpora() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/corpora")
}

/// A palette map or `--nameattr` file as text (the renderer reads no files itself).
fn read_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    String::from_utf8_lossy(&bytes).into_owned()
}

fn read_folded(paths: &[PathBuf]) -> Folded {
    let mut all = Folded::default();
    for p in paths {
        let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        all.extend(ember_formats::parse_bytes(&bytes));
    }
    all
}

/// One `key=value` option of the manifest, plus free-text comments in parentheses.
struct RowOptions {
    pairs: Vec<(String, Vec<String>)>,
    comments: Vec<String>,
}

fn parse_options(s: &str) -> RowOptions {
    let mut pairs = Vec::new();
    let mut comments = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == ':' || c == ';' {
            i += 1;
            continue;
        }
        if c == '(' {
            let mut depth = 0;
            let start = i;
            while i < chars.len() {
                match chars[i] {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            comments.push(chars[start + 1..i.min(chars.len())].iter().collect());
            i += 1;
            continue;
        }
        let key_start = i;
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            i += 1;
        }
        let key: String = chars[key_start..i].iter().collect();
        if key == "with" {
            // "with no_sort=true must ERROR" describes a second check, not an option of this row.
            comments.push(chars[key_start..].iter().collect());
            break;
        }
        if i >= chars.len() || chars[i] != '=' {
            comments.push(key);
            continue;
        }
        i += 1;
        let mut values = Vec::new();
        match chars.get(i) {
            Some('\'') => {
                let end = chars[i + 1..].iter().position(|&c| c == '\'').unwrap() + i + 1;
                values.push(chars[i + 1..end].iter().collect());
                i = end + 1;
            }
            Some('"') => {
                let mut v = String::new();
                i += 1;
                while chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    v.push(chars[i]);
                    i += 1;
                }
                values.push(v);
                i += 1;
            }
            Some('[') => {
                let end = chars[i..].iter().position(|&c| c == ']').unwrap() + i;
                let inner: String = chars[i + 1..end].iter().collect();
                values.extend(inner.split(',').map(|s| s.trim().to_owned()));
                i = end + 1;
            }
            _ => {
                let start = i;
                while i < chars.len() && !chars[i].is_whitespace() {
                    i += 1;
                }
                values.push(chars[start..i].iter().collect());
            }
        }
        pairs.push((key, values));
    }
    RowOptions { pairs, comments }
}

fn build_options(row: &RowOptions, root: &Path) -> (Options, Vec<String>) {
    let mut o = Options {
        pretty_xml: true,
        no_javascript: true,
        ..Options::default()
    };
    let mut load_warnings = Vec::new();
    for (key, values) in &row.pairs {
        let v = values.first().map(String::as_str).unwrap_or("");
        let flag = v == "true";
        match key.as_str() {
            "deterministic" => o.deterministic = flag,
            "hash" => o.hash = flag,
            "colors" => o.colors = v.parse::<Palette>().unwrap(),
            "bgcolors" => o.bgcolors = Some(v.parse::<BackgroundColor>().unwrap()),
            "negate_differentials" => o.negate_differentials = flag,
            "color_diffusion" => o.color_diffusion = flag,
            "factor" => o.factor = v.parse().unwrap(),
            "func_frameattrs" => {
                let (map, w) = FrameAttrsMap::parse(&read_text(&root.join(v)));
                o.frame_attrs = Some(map);
                load_warnings.extend(w);
            }
            "palette_map" => {
                let (map, w) = PaletteMap::parse(&read_text(&root.join(v)));
                o.palette_map = Some(map);
                load_warnings.extend(w);
            }
            "direction" => {
                assert_eq!(v, "inverted");
                o.direction = Direction::Inverted;
            }
            "title" => o.title = v.to_owned(),
            "subtitle" => o.subtitle = Some(v.to_owned()),
            "notes" => o.notes = v.to_owned(),
            "count_name" => o.count_name = v.to_owned(),
            "name_type" => o.name_type = v.to_owned(),
            "font_type" => o.font_type = v.to_owned(),
            "search_color" => o.search_color = Color::parse(v).unwrap(),
            "stroke_color" => o.stroke_color = Some(Color::parse(v).unwrap()),
            "uicolor" => o.ui_color = Color::parse(v).unwrap(),
            "reverse_stack_order" => o.reverse_stack_order = flag,
            "text_truncate_direction" => {
                assert_eq!(v, "right");
                o.text_truncate_direction = TextTruncateDirection::Right;
            }
            "flame_chart" => o.flame_chart = flag,
            "base" => o.base = values.clone(),
            "no_sort" => o.no_sort = flag,
            other => panic!("unknown option {other} in manifest"),
        }
    }
    (o, load_warnings)
}

/// Expected warnings written as "(N 'text' warnings)" or "(N fractional-samples warning)".
fn expected_warnings(comments: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for c in comments {
        let mut words = c.split_whitespace();
        let Some(n) = words.next().and_then(|w| w.parse::<usize>().ok()) else {
            continue;
        };
        if let Some(q) = c.split('\'').nth(1) {
            out.push((n, q.to_owned()));
        } else if c.contains("fractional-samples") {
            out.push((n, "fractional sample counts".to_owned()));
        }
    }
    out
}

fn lines(s: &str) -> Vec<&str> {
    s.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect()
}

fn strip_fill(line: &str) -> String {
    match line.find(" fill=\"rgb(") {
        Some(i) if line.trim_start().starts_with("<rect x=\"") && !line.contains("url(#") => {
            let end = line[i + 11..].find(')').unwrap() + i + 11;
            format!("{}{}", &line[..i], &line[end + 2..])
        }
        _ => line.to_owned(),
    }
}

fn assert_well_formed(svg: &str, what: &str) {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    if let Err(e) = roxmltree::Document::parse_with_options(svg, opts) {
        panic!("{what}: not well-formed XML: {e}");
    }
}

#[derive(Debug, PartialEq)]
enum Level {
    Exact,
    AllButColours,
}

fn compare(actual: &str, expected: &str) -> Result<Level, String> {
    let (a, e) = (lines(actual), lines(expected));
    if a == e {
        return Ok(Level::Exact);
    }
    let a2: Vec<String> = a.iter().map(|l| strip_fill(l)).collect();
    let e2: Vec<String> = e.iter().map(|l| strip_fill(l)).collect();
    if a2 == e2 {
        return Ok(Level::AllButColours);
    }
    let i = a2
        .iter()
        .zip(&e2)
        .position(|(x, y)| x != y)
        .unwrap_or(a2.len().min(e2.len()));
    Err(format!(
        "first difference at line {} (actual {} lines, expected {}):\n  actual:   {:?}\n  expected: {:?}",
        i + 1,
        a.len(),
        e.len(),
        a2.get(i),
        e2.get(i)
    ))
}

#[test]
fn manifest_rows_match_reference_svgs() {
    let root = corpora();
    let manifest = std::fs::read_to_string(root.join("flamegraph-svg-cases.tsv")).unwrap();
    let mut summary = Vec::new();
    let mut failures = Vec::new();
    let (mut exact, mut geometry, mut errors_ok) = (0, 0, 0);
    for (n, row) in manifest.lines().skip(1).enumerate() {
        let cols: Vec<&str> = row.split('\t').collect();
        assert_eq!(cols.len(), 3, "row {}: {row}", n + 2);
        let inputs: Vec<PathBuf> = match cols[0].split_once(" + ") {
            Some((first, second_suffix)) => {
                let stem = first.rsplit_once('-').unwrap().0;
                vec![
                    root.join(first),
                    root.join(format!("{stem}{second_suffix}")),
                ]
            }
            None => vec![root.join(cols[0])],
        };
        let row_opts = parse_options(cols[2]);
        let (options, load_warnings) = build_options(&row_opts, &root);
        let folded = read_folded(&inputs);
        let label = format!(
            "row {} {}",
            n + 2,
            cols[1].split_whitespace().next().unwrap()
        );

        if cols[1].starts_with("(error expected") {
            let mut out = Vec::new();
            match render(&folded, &options, &mut out) {
                Err(e @ FlameGraphError::NoStacks) if cols[2].contains(&e.to_string()) => {
                    assert_well_formed(std::str::from_utf8(&out).unwrap(), &label);
                    errors_ok += 1;
                    summary.push(format!("{label}: error as expected ({e})"));
                }
                other => failures.push(format!("{label}: expected an error, got {other:?}")),
            }
            continue;
        }

        let mut out = Vec::new();
        let report = match render(&folded, &options, &mut out) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{label}: render failed: {e}"));
                continue;
            }
        };
        let svg = String::from_utf8(out).unwrap();
        assert_well_formed(&svg, &label);
        let expected = std::fs::read_to_string(root.join(cols[1])).unwrap();

        let all_warnings: Vec<String> = load_warnings
            .iter()
            .chain(&report.warnings)
            .cloned()
            .collect();
        for (count, text) in expected_warnings(&row_opts.comments) {
            let got = all_warnings.iter().filter(|w| w.contains(&text)).count();
            if got != count {
                failures.push(format!(
                    "{label}: expected {count} '{text}' warnings, got {got}: {all_warnings:?}"
                ));
            }
        }

        // The same options with the script embedded must also be well-formed.
        let mut with_js = Vec::new();
        let js_options = Options {
            no_javascript: false,
            pretty_xml: false,
            ..options.clone()
        };
        render(&folded, &js_options, &mut with_js).unwrap();
        assert_well_formed(
            std::str::from_utf8(&with_js).unwrap(),
            &format!("{label} (script)"),
        );

        let colours_determined = options.hash
            || options.deterministic
            || folded.is_differential() && !options.color_diffusion;
        match compare(&svg, &expected) {
            Ok(Level::Exact) => {
                exact += 1;
                summary.push(format!("{label}: exact"));
            }
            Ok(Level::AllButColours) if !colours_determined => {
                geometry += 1;
                summary.push(format!(
                    "{label}: geometry/text/titles match, colours differ"
                ));
            }
            Ok(Level::AllButColours) => failures.push(format!(
                "{label}: colours differ although they are determined"
            )),
            Err(diff) => failures.push(format!("{label}: {diff}")),
        }

        if row_opts
            .comments
            .iter()
            .any(|c| c.contains("no_sort=true must ERROR"))
            || cols[2].contains("with no_sort=true must ERROR")
        {
            let o = Options {
                no_sort: true,
                ..options.clone()
            };
            match render(&folded, &o, std::io::sink()) {
                Err(FlameGraphError::Unsorted { .. }) => {
                    errors_ok += 1;
                    summary.push(format!("{label}: no_sort=true errors as expected"));
                }
                other => failures.push(format!("{label}: no_sort should error, got {other:?}")),
            }
        }
    }
    println!("{}", summary.join("\n"));
    println!("exact: {exact}, all-but-colours: {geometry}, expected errors: {errors_ok}");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(exact + geometry >= 40, "too few rows compared");
}

fn flamegraph_data(rel: &str) -> PathBuf {
    corpora().join("inferno/tests/data/flamegraph").join(rel)
}

fn warnings_for(rel: &str) -> Vec<String> {
    let folded = read_folded(&[flamegraph_data(rel)]);
    render(&folded, &Options::default(), std::io::sink())
        .unwrap()
        .warnings
}

#[test]
fn fractional_warnings_follow_index() {
    let w = warnings_for("fractional-samples/fractional.txt");
    assert_eq!(
        w.iter().filter(|w| w.contains("fractional")).count(),
        1,
        "{w:?}"
    );
    for clean in [
        "fractional-samples/zero-fractionals.txt",
        "fractional-samples/tricky-stack.txt",
    ] {
        let w = warnings_for(clean);
        assert!(w.is_empty(), "{clean}: {w:?}");
    }
}

#[test]
fn bad_lines_are_counted_once() {
    let path = flamegraph_data("bad-lines/bad-lines.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let w = warnings_for("bad-lines/bad-lines.txt");
    let ignored: Vec<_> = w.iter().filter(|w| w.starts_with("Ignored ")).collect();
    assert_eq!(ignored.len(), 1, "{w:?}");
    // The bad lines are the non-blank ones that do not end in a number.
    let bad = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| l.rsplit(' ').next().unwrap().parse::<f64>().is_err())
        .count();
    assert!(bad > 0);
    assert_eq!(
        ignored[0],
        &format!("Ignored {bad} lines with invalid format")
    );
}

#[test]
fn invalid_palette_map_lines_are_reported() {
    let (map, w) = PaletteMap::parse(&read_text(&flamegraph_data(
        "palette-map/palette_invalid.map",
    )));
    assert_eq!(w, ["Ignored 5 lines with invalid format"]);
    assert!(map.get("JavaThread::run").is_some());
    assert!(map.get("").is_some(), "an empty name is the root frame");
}

#[test]
fn nameattr_warnings() {
    let (_, w) = FrameAttrsMap::parse(&read_text(&flamegraph_data(
        "nameattr/nameattr_invalid_attribute.txt",
    )));
    assert_eq!(
        w.iter().filter(|w| w.contains("invalid attribute")).count(),
        1,
        "{w:?}"
    );
    let (_, w) = FrameAttrsMap::parse(&read_text(&flamegraph_data(
        "nameattr/nameattr_duplicate_attributes.txt",
    )));
    assert_eq!(
        w.iter()
            .filter(|w| w.contains("duplicate attribute"))
            .count(),
        3,
        "{w:?}"
    );
    let (_, w) = FrameAttrsMap::parse(&read_text(&flamegraph_data("nameattr/nameattr.txt")));
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn empty_input_errors() {
    let folded = read_folded(&[flamegraph_data("empty/empty.txt")]);
    let err = render(&folded, &Options::default(), std::io::sink()).unwrap_err();
    assert_eq!(err.to_string(), "No stack counts found");
}

#[test]
fn hostile_names_and_options_stay_well_formed() {
    let input = "a\u{1}b;]]>x;<&'\">;--;-;-- 3\nμs;💥;a;a;a 2\nz\t;y 1 4\n;; 1\n";
    let folded = ember_formats::parse_bytes(input.as_bytes());
    for no_javascript in [false, true] {
        for pretty_xml in [false, true] {
            let options = Options {
                no_javascript,
                pretty_xml,
                title: "]]> <!-- & \"".to_owned(),
                subtitle: Some("--><x>".to_owned()),
                notes: "a--b-".to_owned(),
                name_type: "]]>'\\".to_owned(),
                font_type: "a<b\"c".to_owned(),
                count_name: "<&>".to_owned(),
                negate_differentials: true,
                min_width: 0.0,
                ..Options::default()
            };
            let mut out = Vec::new();
            render(&folded, &options, &mut out).unwrap();
            assert_well_formed(std::str::from_utf8(&out).unwrap(), "hostile input");
        }
    }
}

#[test]
fn extreme_counts_do_not_panic() {
    let input = format!(
        "a;b {} 0\nb 0 {}\nc 99999999999999999999999999\n",
        u64::MAX,
        u64::MAX
    );
    let folded = ember_formats::parse_bytes(input.as_bytes());
    for negate in [false, true] {
        let options = Options {
            negate_differentials: negate,
            ..Options::default()
        };
        let mut out = Vec::new();
        render(&folded, &options, &mut out).unwrap();
        assert_well_formed(std::str::from_utf8(&out).unwrap(), "extreme counts");
    }
    for bad in [
        Options {
            image_width: Some(5),
            ..Options::default()
        },
        Options {
            frame_height: 0,
            ..Options::default()
        },
        Options {
            font_size: 0,
            ..Options::default()
        },
        Options {
            factor: f64::NAN,
            ..Options::default()
        },
    ] {
        assert!(matches!(
            render(&folded, &bad, std::io::sink()),
            Err(FlameGraphError::InvalidOption(_))
        ));
    }
}
