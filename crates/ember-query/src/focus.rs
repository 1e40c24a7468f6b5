//! Focusing a merged selection on one call path: the web UI's zoom asks the server for the
//! subtree it zooms into, so the node limit is spent on that subtree and no function under it
//! stays hidden in an `other` node.

use ember_store::Merged;

/// Where a frame stands against the focused path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Not on the path and not under it: dropped.
    Off,
    /// On the path, this many names of it matched (0 = the root).
    On(usize),
    /// Under the path's last frame.
    Under,
}

/// `merged` restricted to the stacks that begin with `path` (frame names from the root's
/// child down): the frames of the path keep no value of their own except the last, whose
/// subtree is kept whole. An empty `path` is the whole selection; a path no stack takes gives
/// an empty selection (total 0).
pub(crate) fn focus(merged: &Merged, path: &[String]) -> Merged {
    if path.is_empty() {
        return merged.clone();
    }
    let n = path.len();
    let name_of = |id: u32| merged.names.get(id as usize).map_or("", String::as_str);
    // Parents come before their children, so one pass places every frame.
    let mut place = vec![Place::Off; merged.frames.len()];
    place[0] = Place::On(0);
    for f in 1..merged.frames.len() {
        let (parent, name) = merged.frames[f];
        place[f] = match place.get(parent as usize).copied().unwrap_or(Place::Off) {
            Place::Under => Place::Under,
            Place::On(k) if k == n => Place::Under,
            Place::On(k) if name_of(name) == path[k] => Place::On(k + 1),
            _ => Place::Off,
        };
    }
    let mut out = Merged {
        profiles: merged.profiles,
        series: merged.series,
        profile_types: merged.profile_types.clone(),
        ..Merged::default()
    };
    // New ids of the kept frames and names (0 = not kept, except the root's).
    let mut frame_ids = vec![0u32; merged.frames.len()];
    let mut name_ids = vec![0u32; merged.names.len()];
    for (f, &(parent, name)) in merged.frames.iter().enumerate().skip(1) {
        let keep_value = match place[f] {
            Place::Off => continue,
            Place::On(k) => k == n,
            Place::Under => true,
        };
        let slot = &mut name_ids[name as usize];
        if *slot == 0 {
            out.names.push(name_of(name).to_string());
            *slot = out.names.len() as u32 - 1;
        }
        out.frames.push((frame_ids[parent as usize], *slot));
        frame_ids[f] = out.frames.len() as u32 - 1;
        let value = if keep_value {
            merged.self_values.get(f).copied().unwrap_or(0)
        } else {
            0
        };
        out.self_values.push(value);
        out.total = out.total.saturating_add(value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// root → a → {b (self 5) → c (self 2), a (self 1)}, root → d (self 7).
    fn sample() -> Merged {
        Merged {
            frames: vec![(0, 0), (0, 1), (1, 2), (2, 3), (1, 1), (0, 4)],
            self_values: vec![0, 0, 5, 2, 1, 7],
            names: ["", "a", "b", "c", "d"].map(String::from).to_vec(),
            total: 15,
            profiles: 1,
            ..Merged::default()
        }
    }

    fn path(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn keeps_the_path_and_the_whole_subtree_below_it() {
        let f = focus(&sample(), &path(&["a"]));
        assert_eq!(f.total, 8);
        let mut stacks = f.stacks();
        stacks.sort();
        assert_eq!(
            stacks,
            vec![
                (path(&["a", "a"]), 1),
                (path(&["a", "b"]), 5),
                (path(&["a", "b", "c"]), 2)
            ]
        );
        let deeper = focus(&sample(), &path(&["a", "b"]));
        assert_eq!(deeper.total, 7);
        assert_eq!(
            deeper.stacks(),
            vec![(path(&["a", "b"]), 5), (path(&["a", "b", "c"]), 2)]
        );
        // Recursion: `a` under `a` is its own path.
        assert_eq!(focus(&sample(), &path(&["a", "a"])).total, 1);
    }

    #[test]
    fn an_unknown_path_is_empty_and_no_path_is_everything() {
        let none = focus(&sample(), &path(&["a", "zzz"]));
        assert_eq!((none.total, none.frames.len()), (0, 2));
        assert!(none.is_empty());
        assert_eq!(focus(&sample(), &[]).total, 15);
    }
}
