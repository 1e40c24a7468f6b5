//! Frame filters: the web UI's "hide frames", "collapse recursion", "drop below" and "focus on
//! this function" controls, applied by the server to the merged selection before the node
//! limit, so a hidden wrapper never spends a node of the limit and the frames around it are
//! shown in full.
//!
//! A filter only moves values between frames, so the selection's total does not change (what
//! a hidden frame had as self goes to its caller, as `go tool pprof -hide` does; what lies
//! below a "drop below" frame becomes its self, as `-prune_from` does). A focus function is
//! the exception: only the stacks through it count, re-rooted at its outermost call.

use ember_store::Merged;
use rustc_hash::FxHashMap;

use crate::QueryError;

/// Largest compiled `hide` pattern, bytes: a request cannot make the server build a huge
/// automaton.
const HIDE_PATTERN_LIMIT: usize = 1 << 20;

/// Filters on the frames of a merged selection; the default filters nothing.
#[derive(Debug, Clone, Default)]
pub struct FrameFilters {
    /// Frames whose name matches are removed from every stack: their callees attach to their
    /// caller, which also takes their self value. Default: none.
    pub hide: Option<regex::Regex>,
    /// Direct recursion folded: a frame named like its (shown) caller merges into it, so
    /// `a;a;a;b` reads `a;b`. Default: off.
    pub collapse_recursion: bool,
    /// A function name (exact): everything below its frames folds into them, each frame's
    /// total becoming its self value. Default: none.
    pub drop_below: Option<String>,
    /// A function name (exact) to focus on: only the stacks through it count, each re-rooted
    /// at its outermost call of the function, so every call site adds up under one root frame
    /// (the selection's total becomes the function's). Default: none.
    pub focus_function: Option<String>,
}

impl FrameFilters {
    /// Whether these filters leave every selection as it is.
    pub fn is_empty(&self) -> bool {
        self.hide.is_none()
            && !self.collapse_recursion
            && self.drop_below.is_none()
            && self.focus_function.is_none()
    }

    /// The `hide` pattern from its text (Rust `regex` syntax, matched anywhere in a frame's
    /// name; `(?i)` for case-insensitive); a clear error when it does not compile or is too
    /// large.
    pub fn parse_hide(pattern: &str) -> Result<regex::Regex, QueryError> {
        regex::RegexBuilder::new(pattern)
            .size_limit(HIDE_PATTERN_LIMIT)
            .build()
            .map_err(|e| {
                QueryError::Invalid(format!("hide={pattern:?} is not a usable regex: {e}"))
            })
    }

    /// `merged` with the filters applied: a new frame tree (parents still before children)
    /// with the same total, profiles and series.
    pub(crate) fn apply(&self, merged: &Merged) -> Merged {
        let n = merged.frames.len();
        let hidden: Vec<bool> = merged
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| i != 0 && self.hide.as_ref().is_some_and(|r| r.is_match(name)))
            .collect();
        let mut out = Merged {
            profiles: merged.profiles,
            series: merged.series,
            profile_types: merged.profile_types.clone(),
            total: 0,
            ..Merged::default()
        };
        let keep_rest = !merged.rest.is_empty();
        if keep_rest {
            out.rest = vec![0];
        }
        // Output name id of each input name (u32::MAX: not used yet); the root's is 0.
        let mut name_ids = vec![u32::MAX; merged.names.len()];
        if let Some(root) = name_ids.first_mut() {
            *root = 0;
        }
        let mut children: FxHashMap<(u32, u32), u32> = FxHashMap::default();
        // Output frame of each input frame, and whether it lies at or below a "drop below"
        // frame (then everything under it maps to the same output frame).
        let mut to = vec![0u32; n];
        let mut sealed = vec![false; n];
        // With a focus function: whether each frame is at or below its outermost call (the
        // frames above it are left out, and so is every stack that never calls it).
        let mut inside = vec![self.focus_function.is_none(); n];
        for f in 1..n {
            let (parent, name) = merged.frames[f];
            let (p, name) = (parent as usize, name as usize);
            let name_str = merged.names.get(name).map_or("", String::as_str);
            if !inside.get(p).copied().unwrap_or(false)
                && self.focus_function.as_deref() != Some(name_str)
            {
                continue; // above the function, or off its stacks: not counted
            }
            inside[f] = true;
            // The outermost call of the focus function hangs from the root.
            let up = if inside.get(p).copied().unwrap_or(false) {
                to.get(p).copied().unwrap_or(0)
            } else {
                0
            };
            let is_hidden = hidden.get(name).copied().unwrap_or(false);
            let target = if sealed.get(p).copied().unwrap_or(false) {
                sealed[f] = true;
                up
            } else if is_hidden {
                up
            } else {
                let id = match name_ids.get(name).copied() {
                    Some(id) if id != u32::MAX => id,
                    _ => {
                        out.names.push(name_str.to_string());
                        let id = out.names.len() as u32 - 1;
                        if let Some(slot) = name_ids.get_mut(name) {
                            *slot = id;
                        }
                        id
                    }
                };
                let same_as_caller =
                    up != 0 && out.frames.get(up as usize).is_some_and(|c| c.1 == id);
                if self.collapse_recursion && same_as_caller {
                    up
                } else {
                    *children.entry((up, id)).or_insert_with(|| {
                        out.frames.push((up, id));
                        out.self_values.push(0);
                        if keep_rest {
                            out.rest.push(0);
                        }
                        out.frames.len() as u32 - 1
                    })
                }
            };
            // A hidden frame is not shown, so nothing is dropped below it.
            if !is_hidden && self.drop_below.as_deref() == Some(name_str) {
                sealed[f] = true;
            }
            to[f] = target;
            let t = target as usize;
            let value = merged.self_values.get(f).copied().unwrap_or(0);
            out.self_values[t] = out.self_values[t].saturating_add(value);
            out.total = out.total.saturating_add(value);
            if keep_rest {
                out.rest[t] = out.rest[t].saturating_add(merged.rest.get(f).copied().unwrap_or(0));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A merged selection of folded stacks (`a;b;c`, value).
    fn merged(stacks: &[(&str, i64)]) -> Merged {
        let mut m = Merged::default();
        let mut ids: FxHashMap<(u32, String), u32> = FxHashMap::default();
        for (stack, v) in stacks {
            let mut at = 0u32;
            for name in stack.split(';') {
                at = *ids.entry((at, name.to_string())).or_insert_with(|| {
                    let id = m.names.iter().position(|n| n == name).unwrap_or_else(|| {
                        m.names.push(name.to_string());
                        m.names.len() - 1
                    });
                    m.frames.push((at, id as u32));
                    m.self_values.push(0);
                    m.frames.len() as u32 - 1
                });
            }
            m.self_values[at as usize] += v;
            m.total += v;
        }
        m
    }

    fn stacks(m: &Merged) -> Vec<(String, i64)> {
        let mut s: Vec<(String, i64)> = m
            .stacks()
            .into_iter()
            .map(|(f, v)| (f.join(";"), v))
            .collect();
        s.sort();
        s
    }

    fn owned(s: &[(&str, i64)]) -> Vec<(String, i64)> {
        s.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    const STACKS: &[(&str, i64)] = &[
        ("main;runtime.mcall;work;work;work;leaf", 5),
        ("main;runtime.mcall;work", 2),
        ("main;runtime.mcall", 1),
        ("main;serve;json.Marshal;reflect.Value", 4),
        ("main;serve;work;leaf", 3),
    ];

    #[test]
    fn hidden_frames_give_their_value_to_the_caller_and_callees_join_it() {
        let f = FrameFilters {
            hide: Some(FrameFilters::parse_hide("^runtime\\.").unwrap()),
            ..Default::default()
        };
        let out = f.apply(&merged(STACKS));
        assert_eq!(out.total, 15);
        assert_eq!(
            stacks(&out),
            owned(&[
                ("main", 1),
                ("main;serve;json.Marshal;reflect.Value", 4),
                ("main;serve;work;leaf", 3),
                ("main;work", 2),
                ("main;work;work;work;leaf", 5),
            ])
        );
    }

    #[test]
    fn recursion_collapses_into_the_outermost_call() {
        let f = FrameFilters {
            collapse_recursion: true,
            ..Default::default()
        };
        let out = f.apply(&merged(STACKS));
        assert_eq!(out.total, 15);
        assert_eq!(
            stacks(&out),
            owned(&[
                ("main;runtime.mcall", 1),
                ("main;runtime.mcall;work", 2),
                ("main;runtime.mcall;work;leaf", 5),
                ("main;serve;json.Marshal;reflect.Value", 4),
                ("main;serve;work;leaf", 3),
            ])
        );
    }

    #[test]
    fn everything_below_a_dropped_function_becomes_its_self() {
        let f = FrameFilters {
            drop_below: Some("work".into()),
            ..Default::default()
        };
        let out = f.apply(&merged(STACKS));
        assert_eq!(out.total, 15);
        assert_eq!(
            stacks(&out),
            owned(&[
                ("main;runtime.mcall", 1),
                ("main;runtime.mcall;work", 7),
                ("main;serve;json.Marshal;reflect.Value", 4),
                ("main;serve;work", 3),
            ])
        );
    }

    #[test]
    fn a_focus_function_roots_every_call_of_it_together() {
        let f = FrameFilters {
            focus_function: Some("work".into()),
            ..Default::default()
        };
        let out = f.apply(&merged(STACKS));
        assert_eq!(out.total, 2 + 5 + 3);
        assert_eq!(
            stacks(&out),
            owned(&[("work", 2), ("work;leaf", 3), ("work;work;work;leaf", 5)])
        );
    }

    #[test]
    fn filters_combine_and_a_bad_pattern_is_an_error() {
        let f = FrameFilters {
            hide: Some(FrameFilters::parse_hide("mcall|serve").unwrap()),
            collapse_recursion: true,
            drop_below: Some("json.Marshal".into()),
            focus_function: None,
        };
        let out = f.apply(&merged(STACKS));
        assert_eq!(
            stacks(&out),
            owned(&[
                ("main", 1),
                ("main;json.Marshal", 4),
                ("main;work", 2),
                ("main;work;leaf", 8),
            ])
        );
        assert!(FrameFilters::default().is_empty());
        let err = FrameFilters::parse_hide("(unclosed").unwrap_err();
        assert!(err.to_string().contains("hide="), "{err}");
    }
}
