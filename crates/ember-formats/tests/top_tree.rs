//! `top_of_tree` writes the table `top` writes of the same stacks as a pprof profile (a
//! function and a location per frame name): recursion counted once per stack, names that
//! repeat under other ids, a root with a value of its own, negative values (diffs), ties, and
//! every option that changes the rows. The same on real profiles is checked in ember-query's
//! tests, through the store.

use ember_formats::{FrameTree, SortBy, TopOptions, top, top_of_tree};

/// A call tree built from folded stacks, and the pprof profile of the same stacks.
struct Case {
    frames: Vec<(u32, u32)>,
    self_values: Vec<i64>,
    names: Vec<String>,
    profile: ember_pprof::Profile,
}

impl Case {
    /// `stacks` are `("a;b;c", value)`; `""` is the root's own value. Names get ids in the
    /// order given by `names` (which may repeat a text under two ids: the second id is used
    /// for frames under a parent named `"dup-parent"`).
    fn new(stacks: &[(&str, i64)], names: &[&str]) -> Case {
        let mut b = ember_pprof::ProfileBuilder::new(&[("cpu", "nanoseconds")]);
        let mut frames = vec![(0u32, 0u32)];
        let mut self_values = vec![0i64];
        for (stack, v) in stacks {
            let path: Vec<&str> = stack.split(';').filter(|f| !f.is_empty()).collect();
            b.add_folded_stack(&path, &[*v]);
            let mut at = 0u32;
            for name in path {
                let ids: Vec<u32> = (0..names.len() as u32)
                    .filter(|&i| names[i as usize] == name)
                    .collect();
                let parent_name = names[frames[at as usize].1 as usize];
                let id = if ids.len() > 1 && parent_name == "dup-parent" {
                    ids[1]
                } else {
                    ids[0]
                };
                at = match frames.iter().position(|&f| f == (at, id)) {
                    Some(p) => p as u32,
                    None => {
                        frames.push((at, id));
                        self_values.push(0);
                        frames.len() as u32 - 1
                    }
                };
            }
            self_values[at as usize] += v;
        }
        Case {
            frames,
            self_values,
            names: names.iter().map(|s| (*s).to_owned()).collect(),
            profile: b.build(),
        }
    }

    fn check(&self, options: &TopOptions) {
        let tree = FrameTree {
            frames: &self.frames,
            self_values: &self.self_values,
            names: &self.names,
            sample_type: "cpu",
            sample_unit: "nanoseconds",
        };
        let expected = top(&self.profile, options).unwrap();
        let table = top_of_tree(&tree, options);
        assert_eq!(table.render(), expected.render(), "{options:?}");
        assert_eq!(table, expected, "{options:?}");
        // The same tree with its frames in reverse order (children before parents) takes
        // the depth-first walk, not the parent-first passes: the same table.
        let (frames, self_values) = self.reversed();
        let reversed = FrameTree {
            frames: &frames,
            self_values: &self_values,
            ..tree
        };
        assert_eq!(
            top_of_tree(&reversed, options).render(),
            expected.render(),
            "reversed, {options:?}"
        );
    }

    /// The frames renumbered last to first (the root stays 0).
    fn reversed(&self) -> (Vec<(u32, u32)>, Vec<i64>) {
        let n = self.frames.len() as u32;
        let id = |f: u32| if f == 0 { 0 } else { n - f };
        let mut frames = vec![(0, 0); self.frames.len()];
        let mut values = vec![0; self.frames.len()];
        for (f, &(p, name)) in self.frames.iter().enumerate() {
            frames[id(f as u32) as usize] = (id(p), name);
            values[id(f as u32) as usize] = self.self_values[f];
        }
        (frames, values)
    }
}

fn all_options() -> Vec<TopOptions> {
    let mut out = Vec::new();
    for sort in [SortBy::Flat, SortBy::Cum] {
        for node_count in [0, 1, 3] {
            for node_fraction in [0.0, 0.005, 0.2] {
                for profile_labels in [true, false] {
                    out.push(TopOptions {
                        sort,
                        node_count,
                        node_fraction,
                        profile_labels,
                        ..Default::default()
                    });
                }
            }
        }
    }
    out
}

#[test]
fn recursion_is_counted_once_per_stack() {
    let case = Case::new(
        &[
            ("main;a;b;a;b", 7_000_000),
            ("main;a;a;a", 3_000_000),
            ("main;b", 1_000_000),
            ("main;c;a;c", 500_000),
            ("main", 250_000),
        ],
        &["", "main", "a", "b", "c"],
    );
    let table = top_of_tree(
        &FrameTree {
            frames: &case.frames,
            self_values: &case.self_values,
            names: &case.names,
            sample_type: "cpu",
            sample_unit: "nanoseconds",
        },
        &TopOptions::default(),
    );
    let a = table.rows.iter().find(|r| r.name == "a").unwrap();
    assert_eq!((a.flat, a.cum), (3_000_000, 10_500_000));
    for options in all_options() {
        case.check(&options);
    }
}

#[test]
fn repeated_names_root_values_negatives_and_ties() {
    let case = Case::new(
        &[
            ("", 40),
            ("dup-parent;x;y", 10),
            ("z;x;y", 10),
            ("z;x", -25),
            ("w;v", 10),
            ("w;u", -10),
            ("t", 1),
            ("s", 1),
        ],
        &[
            "",
            "dup-parent",
            "x",
            "y",
            "z",
            "x",
            "w",
            "v",
            "u",
            "t",
            "s",
            "unused",
        ],
    );
    // The text "x" has two ids; the tree uses both.
    assert!(case.frames.iter().any(|&(_, n)| n == 2));
    assert!(case.frames.iter().any(|&(_, n)| n == 5));
    for options in all_options() {
        case.check(&options);
    }
}

#[test]
fn empty_tree_and_names_out_of_range() {
    for (frames, values) in [
        (vec![(0, 0)], vec![0]),
        (vec![(0, 0), (0, 99), (1, 99)], vec![0, 5, 6]),
    ] {
        let names = vec![String::new()];
        let tree = FrameTree {
            frames: &frames,
            self_values: &values,
            names: &names,
            sample_type: "cpu",
            sample_unit: "nanoseconds",
        };
        let table = top_of_tree(&tree, &TopOptions::default());
        let total: i64 = values.iter().sum();
        assert_eq!(table.total, total);
        if total > 0 {
            // An unknown name is one `<unknown>` function, recursive here: counted once.
            assert_eq!(table.rows.len(), 1);
            assert_eq!(table.rows[0].name, "<unknown>");
            assert_eq!((table.rows[0].flat, table.rows[0].cum), (11, 11));
        } else {
            assert!(table.rows.is_empty());
        }
    }
}

/// Deep random stacks over four names recurse everywhere (direct, indirect, many levels):
/// both ways of summing a tree agree with `top` of the pprof on every table.
#[test]
fn random_recursive_trees() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let names = ["", "a", "b", "c", "d"];
    for _ in 0..20 {
        let stacks: Vec<(String, i64)> = (0..1 + next(40))
            .map(|_| {
                let depth = 1 + next(12);
                let path: Vec<&str> = (0..depth).map(|_| names[1 + next(4) as usize]).collect();
                (path.join(";"), 1 + next(100) as i64)
            })
            .collect();
        let stacks: Vec<(&str, i64)> = stacks.iter().map(|(s, v)| (s.as_str(), *v)).collect();
        let case = Case::new(&stacks, &names);
        case.check(&TopOptions::default());
        case.check(&TopOptions {
            sort: SortBy::Cum,
            ..Default::default()
        });
    }
}
