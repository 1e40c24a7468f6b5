//! Per-function SVG attributes (`--nameattr FILE`): custom tooltips, classes, links.
//!
//! File format: one function per line, the name, a tab, then tab-separated `key=value` pairs.
//! Keys: `title` (replaces the tooltip), `href` (wraps the frame in a link), `target`, `class`,
//! `style`, `id`, `onmouseover`, `onmouseout`, `onclick`, and `g_extra` / `a_extra` holding
//! several space-separated `name="value"` attributes. Unknown keys and repeated attributes are
//! reported as warnings; a repeated attribute keeps its first position and its last value.

use std::collections::HashMap;

/// The attributes of one function's frames.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameAttrs {
    /// Replacement tooltip text.
    pub title: Option<String>,
    /// Attributes in output order (`href` is stored as `xlink:href`).
    pub attrs: Vec<(String, String)>,
}

impl FrameAttrs {
    /// True when the frame must be wrapped in a link (`<a>`) rather than a group (`<g>`).
    pub fn is_link(&self) -> bool {
        self.attrs.iter().any(|(k, _)| k == "xlink:href")
    }

    fn set(&mut self, func: &str, key: &str, value: &str, warnings: &mut Vec<String>) {
        if let Some(slot) = self.attrs.iter_mut().find(|(k, _)| k == key) {
            warnings.push(format!("duplicate attribute {key} found for {func}"));
            slot.1 = value.to_owned();
        } else {
            self.attrs.push((key.to_owned(), value.to_owned()));
        }
    }
}

/// Function name → frame attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameAttrsMap {
    map: HashMap<String, FrameAttrs>,
}

impl FrameAttrsMap {
    /// Parses a nameattr file; returns the map and the warnings found.
    pub fn parse(text: &str) -> (FrameAttrsMap, Vec<String>) {
        let mut map: HashMap<String, FrameAttrs> = HashMap::new();
        let mut warnings = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            let mut fields = line.split('\t');
            let func = match fields.next() {
                Some(f) if !f.is_empty() => f,
                _ => continue,
            };
            let entry = map.entry(func.to_owned()).or_default();
            for field in fields {
                let Some((key, value)) = field.split_once('=') else {
                    continue;
                };
                let key = key.trim();
                if key.is_empty() {
                    continue;
                }
                let value = unquote(value.trim());
                match key {
                    "title" => entry.title = Some(value.to_owned()),
                    "href" => entry.set(func, "xlink:href", value, &mut warnings),
                    "class" | "style" | "id" | "target" | "onmouseover" | "onmouseout"
                    | "onclick" => entry.set(func, key, value, &mut warnings),
                    "g_extra" | "a_extra" => {
                        for (k, v) in extra_attrs(value, &mut warnings) {
                            entry.set(func, k, v, &mut warnings);
                        }
                    }
                    other => warnings.push(format!("invalid attribute {other} found for {func}")),
                }
            }
        }
        for attrs in map.values_mut() {
            if attrs.is_link() && !attrs.attrs.iter().any(|(k, _)| k == "target") {
                attrs.attrs.push(("target".to_owned(), "_top".to_owned()));
            }
        }
        (FrameAttrsMap { map }, warnings)
    }

    /// The attributes for a function, if the file named it.
    pub fn get(&self, func: &str) -> Option<&FrameAttrs> {
        self.map.get(func)
    }
}

fn unquote(v: &str) -> &str {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

/// Splits `a=1 b="two words"` into pairs.
fn extra_attrs<'a>(mut s: &'a str, warnings: &mut Vec<String>) -> Vec<(&'a str, &'a str)> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            break;
        }
        let Some((name, rest)) = s.split_once('=') else {
            warnings.push(format!("extra attribute {s} has no value"));
            break;
        };
        // Bare words before the last one have no value of their own.
        let mut words = name.split_whitespace().rev();
        let Some(name) = words.next() else {
            warnings.push("\"=\" found with no name in extra attributes".to_owned());
            break;
        };
        for w in words {
            warnings.push(format!("extra attribute {w} has no value"));
        }
        let (value, rest) = if let Some(quoted) = rest.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => {
                    warnings.push(format!("no end quote found for extra attribute {name}"));
                    break;
                }
            }
        } else {
            match rest.find(char::is_whitespace) {
                Some(end) => (&rest[..end], &rest[end..]),
                None => (rest, ""),
            }
        };
        out.push((name, value));
        s = rest;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_links_extras_and_duplicates() {
        let text = "main\tclass=a\ttitle=foo\tg_extra=w=\"1\" s=\"g\"\thref=u\tclass=b\n\nx\tid=1\tbogus=2\n";
        let (map, warnings) = FrameAttrsMap::parse(text);
        let main = map.get("main").unwrap();
        assert_eq!(main.title.as_deref(), Some("foo"));
        let keys: Vec<_> = main.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            keys,
            ["class=b", "w=1", "s=g", "xlink:href=u", "target=_top"]
        );
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].contains("duplicate attribute class"));
        assert!(warnings[1].contains("invalid attribute bogus"));
    }
}
