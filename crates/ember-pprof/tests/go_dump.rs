//! Cross-checks our decoding against Go's: the `Samples:`, `Locations` and
//! `Mappings` sections of `profile.Parse(file).String()` (goldens in
//! derived/go-pprof-goldens/<path>.string.txt.gz) are re-rendered from our
//! decoded profile and compared line by line. This proves that every sample
//! value, location id list, label, address, mapping reference, symbol
//! and mapping reads the same as with google/pprof.
//!
//! The rendering follows the text layout of Go's dump (a format, not code):
//! values as ` %10d` each, `: `, location ids each followed by a space; label
//! lines indented by 16 spaces with `key:[v1 v2]` entries sorted as strings.

mod common;

use std::collections::BTreeMap;

use ember_pprof::{Profile, decode, string};

fn labels_line(p: &Profile, s: &ember_pprof::Sample) -> (Option<String>, Option<String>) {
    let mut strs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut nums: BTreeMap<&str, Vec<(i64, &str)>> = BTreeMap::new();
    for l in &s.label {
        if l.str != 0 {
            strs.entry(string(p, l.key))
                .or_default()
                .push(string(p, l.str));
        } else {
            nums.entry(string(p, l.key))
                .or_default()
                .push((l.num, string(p, l.num_unit)));
        }
    }
    let render_strs = || {
        let mut parts: Vec<String> = strs
            .iter()
            .map(|(k, v)| format!("{k}:[{}]", v.join(" ")))
            .collect();
        parts.sort();
        parts.join(" ")
    };
    let render_nums = || {
        let mut parts: Vec<String> = nums
            .iter()
            .map(|(k, v)| {
                let has_units = v.iter().any(|(_, u)| !u.is_empty());
                let vals: Vec<String> = v
                    .iter()
                    .map(|(n, u)| {
                        if has_units {
                            format!("{n} {u}")
                        } else {
                            n.to_string()
                        }
                    })
                    .collect();
                format!("{k}:[{}]", vals.join(" "))
            })
            .collect();
        parts.sort();
        parts.join(" ")
    };
    (
        (!strs.is_empty()).then(render_strs),
        (!nums.is_empty()).then(render_nums),
    )
}

fn render_samples(p: &Profile) -> Vec<String> {
    let mut out = Vec::new();
    let dflt = string(p, p.default_sample_type);
    let header: Vec<String> = p
        .sample_type
        .iter()
        .map(|vt| {
            let t = string(p, vt.r#type);
            let mark = if t == dflt { "[dflt]" } else { "" };
            format!("{t}/{}{mark}", string(p, vt.unit))
        })
        .collect();
    out.push(header.join(" ").trim().to_string());
    for s in &p.sample {
        let mut line = String::new();
        for v in &s.value {
            line.push_str(&format!(" {v:10}"));
        }
        line.push_str(": ");
        for id in &s.location_id {
            line.push_str(&format!("{id} "));
        }
        out.push(line);
        let (strs, nums) = labels_line(p, s);
        if let Some(l) = strs {
            out.push(format!("                {l}"));
        }
        if let Some(l) = nums {
            out.push(format!("                {l}"));
        }
    }
    out
}

fn render_locations(p: &Profile) -> Vec<String> {
    let functions: BTreeMap<u64, &ember_pprof::Function> =
        p.function.iter().map(|f| (f.id, f)).collect();
    let mut out = Vec::new();
    for loc in &p.location {
        let mut head = format!("{:6}: {:#x} ", loc.id, loc.address);
        if loc.mapping_id != 0 {
            head.push_str(&format!("M={} ", loc.mapping_id));
        }
        if loc.is_folded {
            head.push_str("[F] ");
        }
        if loc.line.is_empty() {
            out.push(head.clone());
        }
        for line in &loc.line {
            let text = match functions.get(&line.function_id) {
                Some(f) => {
                    let (name, sys) = (string(p, f.name), string(p, f.system_name));
                    let mut t = format!(
                        "{name} {}:{}:{} s={}",
                        string(p, f.filename),
                        line.line,
                        line.column,
                        f.start_line
                    );
                    if name != sys {
                        t.push_str(&format!("({sys})"));
                    }
                    t
                }
                None => "??".to_string(),
            };
            out.push(format!("{head}{text}"));
            head = " ".repeat(13);
        }
    }
    out
}

fn render_mappings(p: &Profile) -> Vec<String> {
    p.mapping
        .iter()
        .map(|m| {
            let mut bits = String::new();
            for (on, tag) in [
                (m.has_functions, "[FN]"),
                (m.has_filenames, "[FL]"),
                (m.has_line_numbers, "[LN]"),
                (m.has_inline_frames, "[IN]"),
            ] {
                if on {
                    bits.push_str(tag);
                }
            }
            format!(
                "{}: {:#x}/{:#x}/{:#x} {} {} {bits}",
                m.id,
                m.memory_start,
                m.memory_limit,
                m.file_offset,
                string(p, m.filename),
                string(p, m.build_id)
            )
        })
        .collect()
}

fn section<'a>(lines: &'a [&'a str], start: &str, end: &str) -> &'a [&'a str] {
    let from = lines
        .iter()
        .position(|l| *l == start)
        .map(|i| i + 1)
        .unwrap_or(lines.len());
    let to = lines[from..]
        .iter()
        .position(|l| *l == end)
        .map(|i| from + i)
        .unwrap_or(lines.len());
    &lines[from..to]
}

#[test]
fn samples_and_locations_match_go_string_dump() {
    let mut checked = 0;
    for case in common::good_cases() {
        let golden_path = case
            .golden(".string.txt.gz")
            .unwrap_or_else(|| panic!("{}: no .string golden", case.path));
        let bytes = common::gunzip(&golden_path);
        let text = String::from_utf8_lossy(&bytes);
        // Names containing a newline (invalid_utf8) would split lines; that
        // file is covered by comparing whole sections as joined text.
        let lines: Vec<&str> = text.split('\n').collect();
        let p = decode(&case.bytes()).unwrap();
        let go_samples = section(&lines, "Samples:", "Locations").join("\n");
        let go_locations = section(&lines, "Locations", "Mappings").join("\n");
        // Guard against comparing two empty sections.
        assert!(
            go_samples.split('\n').count() > case.samples,
            "{}: Go samples section",
            case.path
        );
        assert!(
            go_locations.split('\n').count() >= case.locations,
            "{}: Go locations section",
            case.path
        );
        let go_mappings = section(&lines, "Mappings", "").join("\n");
        let ours_mappings = render_mappings(&p).join("\n");
        let ours_samples = render_samples(&p).join("\n");
        let ours_locations = render_locations(&p).join("\n");
        for (what, ours, go) in [
            ("samples", &ours_samples, &go_samples),
            ("locations", &ours_locations, &go_locations),
            ("mappings", &ours_mappings, &go_mappings),
        ] {
            if ours != go {
                let o: Vec<&str> = ours.split('\n').collect();
                let g: Vec<&str> = go.split('\n').collect();
                let at = o
                    .iter()
                    .zip(&g)
                    .position(|(a, b)| a != b)
                    .unwrap_or(o.len().min(g.len()));
                panic!(
                    "{}: {what} differ at line {at} (ours {} lines, Go {}): ours {:?} Go {:?}",
                    case.path,
                    o.len(),
                    g.len(),
                    o.get(at),
                    g.get(at)
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 74);
}
