use super::*;

/// A decoded answer: the header, the `f64` columns, the `u32` columns and the names.
struct Decoded {
    header: serde_json::Value,
    floats: Vec<Vec<f64>>,
    ints: Vec<Vec<u32>>,
    names: Vec<String>,
}

/// Reads an answer the way the web UI does (lengths of names in UTF-16 units).
fn decode(bytes: &[u8], float_columns: usize) -> Decoded {
    assert_eq!(&bytes[..4], MAGIC);
    let h = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + h]).unwrap();
    let mut at = (8 + h).div_ceil(8) * 8;
    assert!(bytes[8 + h..at].iter().all(|b| *b == 0), "padding is zeros");
    let n: usize = header["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap() as usize)
        .sum();
    let k = header["names"].as_u64().unwrap() as usize;
    let scale = header["scale"].as_f64().unwrap();
    let width = match header["values"].as_str().unwrap() {
        "u32" => 4,
        "f64" => 8,
        other => panic!("values {other}"),
    };
    let mut floats = Vec::new();
    for _ in 0..float_columns {
        floats.push(
            bytes[at..at + width * n]
                .chunks(width)
                .map(|c| match width {
                    4 => f64::from(u32::from_le_bytes(c.try_into().unwrap())) * scale,
                    _ => f64::from_le_bytes(c.try_into().unwrap()),
                })
                .collect(),
        );
        at += width * n;
    }
    let mut u32s = |count: usize| -> Vec<u32> {
        let v = bytes[at..at + 4 * count]
            .chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        at += 4 * count;
        v
    };
    let ints = vec![u32s(n), u32s(n)];
    let lengths = u32s(k);
    let text: Vec<u16> = std::str::from_utf8(&bytes[at..])
        .unwrap()
        .encode_utf16()
        .collect();
    let mut names = Vec::new();
    let mut from = 0;
    for len in lengths {
        let to = from + len as usize;
        names.push(String::from_utf16(&text[from..to]).unwrap());
        from = to;
    }
    assert_eq!(from, text.len(), "the names use every byte");
    Decoded {
        header,
        floats,
        ints,
        names,
    }
}

/// Flamebearer levels (`[x offset, total, self, name]` per node) rebuilt from the columns:
/// a node starts where its parent starts plus its earlier siblings' totals.
fn levels_of(d: &Decoded, total: &[f64], self_value: &[f64]) -> Vec<Vec<i64>> {
    let counts: Vec<usize> = d.header["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap() as usize)
        .collect();
    let (name, parent) = (&d.ints[0], &d.ints[1]);
    let mut out = Vec::new();
    let mut start = 0;
    let mut up_x: Vec<f64> = Vec::new();
    for (depth, &count) in counts.iter().enumerate() {
        let mut xs = Vec::with_capacity(count);
        let mut row = Vec::new();
        let mut end = 0.0;
        for i in start..start + count {
            let x = if depth == 0 {
                0.0
            } else if i > start && parent[i] == parent[i - 1] {
                xs[i - start - 1] + total[i - 1]
            } else {
                up_x[parent[i] as usize]
            };
            xs.push(x);
            row.extend_from_slice(&[
                (x - end) as i64,
                total[i] as i64,
                self_value[i] as i64,
                i64::from(name[i]),
            ]);
            end = x + total[i];
        }
        out.push(row);
        up_x = xs;
        start += count;
    }
    out
}

fn stacks(lines: &[(&str, i64)]) -> Vec<(Vec<String>, i64)> {
    lines
        .iter()
        .map(|(s, v)| (s.split(';').map(str::to_string).collect(), *v))
        .collect()
}

fn typed() -> Merged {
    let mut m = Merged::default();
    m.profile_types
        .insert("process_cpu:cpu:nanoseconds:cpu:nanoseconds".into());
    m.profiles = 1;
    m
}

/// Names of every width: one UTF-16 unit per character, two for `é` in UTF-8, two UTF-16
/// units for `𝄞`, and an empty name.
const STACKS: &[(&str, i64)] = &[
    ("main;net/http.(*conn).serve;json.Encode", 5),
    ("main;net/http.(*conn).serve;json.Encode;reflect.Value", 7),
    ("main;net/http.(*conn).serve", 3),
    ("main;café::crème;𝄞::clef", 11),
    ("main;café::crème", 2),
    ("main;;leaf", 1),
    ("other;main", 4),
];

#[test]
fn single_holds_the_flamebearer_levels() {
    let tree = Tree::from_stacks(&stacks(STACKS));
    let bytes = single(&tree, &typed(), "{service_name=\"api\"}", 0.0);
    let d = decode(&bytes, 2);
    let (levels, max_self) = tree.levels();
    assert_eq!(levels_of(&d, &d.floats[0], &d.floats[1]), levels);
    assert_eq!(d.names, tree.names);
    assert_eq!(d.header["format"], "single");
    assert_eq!(d.header["numTicks"], 33);
    assert_eq!(d.header["maxSelf"], max_self);
    assert_eq!(d.header["units"], "samples");
    assert_eq!(d.header["sampleRate"], 1_000_000_000);
    assert_eq!(d.header["name"], "{service_name=\"api\"}");
}

#[test]
fn values_are_narrow_multiples_of_their_divisor_when_they_fit() {
    // CPU time: multiples of a 10 ms period, in nanoseconds.
    let ns: Vec<(&str, i64)> = STACKS.iter().map(|(s, v)| (*s, v * 10_000_000)).collect();
    let tree = Tree::from_stacks(&stacks(&ns));
    let bytes = single(&tree, &typed(), "", 0.0);
    let d = decode(&bytes, 2);
    assert_eq!(
        (d.header["values"].as_str(), d.header["scale"].as_i64()),
        (Some("u32"), Some(10_000_000))
    );
    assert_eq!(levels_of(&d, &d.floats[0], &d.floats[1]), tree.levels().0);
    // A value past u32 after the divisor: eight bytes a value, exact.
    let wide = [("main;a", 1i64 << 40), ("main;b", 3)];
    let tree = Tree::from_stacks(&stacks(&wide));
    let d = decode(&single(&tree, &typed(), "", 0.0), 2);
    assert_eq!(
        (d.header["values"].as_str(), d.header["scale"].as_i64()),
        (Some("f64"), Some(1))
    );
    assert_eq!(levels_of(&d, &d.floats[0], &d.floats[1]), tree.levels().0);
}

#[test]
fn a_truncated_tree_keeps_its_other_nodes() {
    let tree = Tree::from_stacks(&stacks(STACKS)).truncate(4);
    let d = decode(&single(&tree, &typed(), "", 0.0), 2);
    assert_eq!(levels_of(&d, &d.floats[0], &d.floats[1]), tree.levels().0);
    assert!(d.names.iter().any(|n| n == "other"));
}

#[test]
fn an_empty_selection_is_a_lone_root() {
    let tree = Tree::from_merged(&Merged::default());
    let d = decode(&single(&tree, &Merged::default(), "", 0.0), 2);
    assert_eq!(d.header["levels"], serde_json::json!([1]));
    assert_eq!(d.header["numTicks"], 0);
    assert_eq!(d.floats[0], vec![0.0]);
}

#[test]
fn double_holds_both_sides() {
    let left = stacks(&STACKS[..4]);
    let right = stacks(&STACKS[2..]);
    let tree = DiffTree::new(&left, &right);
    let d = decode(&double(&tree, &typed(), &typed(), "diff"), 4);
    let (levels, max_self) = tree.levels();
    let left_levels = levels_of(&d, &d.floats[0], &d.floats[1]);
    let right_levels = levels_of(&d, &d.floats[2], &d.floats[3]);
    // Each node of the JSON: `[left x, left total, left self, right x, right total, right
    // self, name]`.
    for (depth, row) in levels.iter().enumerate() {
        for (i, node) in row.chunks(7).enumerate() {
            let (l, r) = (&left_levels[depth][4 * i..], &right_levels[depth][4 * i..]);
            assert_eq!(
                node,
                [l[0], l[1], l[2], r[0], r[1], r[2], l[3]],
                "depth {depth} node {i}"
            );
        }
    }
    assert_eq!(d.header["format"], "double");
    assert_eq!(d.header["leftTicks"], tree.left_total());
    assert_eq!(d.header["rightTicks"], tree.right_total());
    assert_eq!(d.header["maxSelf"], max_self);
    assert_eq!(d.names, tree.names);
}

/// Every node of a decoded `single` answer as `(path of names, total, self, x)`, depth by
/// depth; x from the answer's own column when it has one, else worked out from the totals.
fn nodes_of(d: &Decoded) -> Vec<(Vec<String>, i64, i64, i64)> {
    let counts: Vec<usize> = d.header["levels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap() as usize)
        .collect();
    let (total, self_value) = (&d.floats[0], &d.floats[1]);
    let (name, parent) = (&d.ints[0], &d.ints[1]);
    let mut out: Vec<(Vec<String>, i64, i64, i64)> = Vec::new();
    let (mut start, mut up) = (0, 0);
    for (depth, &count) in counts.iter().enumerate() {
        for i in start..start + count {
            let (mut path, up_x) = match depth {
                0 => (Vec::new(), 0),
                _ => {
                    let p = &out[up + parent[i] as usize];
                    (p.0.clone(), p.3)
                }
            };
            let x = match d.floats.get(2) {
                Some(xs) => xs[i] as i64,
                None if depth > 0 && i > start && parent[i] == parent[i - 1] => {
                    out[i - 1].3 + out[i - 1].1
                }
                None => up_x,
            };
            if depth > 0 {
                path.push(d.names[name[i] as usize].clone());
            }
            out.push((path, total[i] as i64, self_value[i] as i64, x));
        }
        up = start;
        start += count;
    }
    out
}

#[test]
fn a_min_share_keeps_the_nodes_that_wide_in_their_places() {
    // CPU time, so the x column is narrow too (multiples of the period).
    let ns: Vec<(&str, i64)> = STACKS.iter().map(|(s, v)| (*s, v * 10_000_000)).collect();
    let tree = Tree::from_stacks(&stacks(&ns));
    let whole = decode(&single(&tree, &typed(), "", 0.0), 2);
    assert!(
        whole.header.get("x").is_none(),
        "no x column without a min share"
    );
    let all = nodes_of(&whole);
    // 8/33 of the whole: `json.Encode` (12) and `𝄞::clef` (11) stay, below them
    // `reflect.Value` (7) goes, and so do `;leaf` (1) and `other;main` (4).
    let share = 8.0 / 33.0;
    let bytes = single(&tree, &typed(), "", share);
    let d = decode(&bytes, 3);
    assert_eq!(d.header["x"], true);
    assert_eq!(d.header["nodes"], tree.nodes.len());
    assert_eq!(d.header["values"], "u32");
    let kept = nodes_of(&d);
    let want: Vec<_> = all
        .iter()
        .filter(|n| n.1 as f64 >= share * 330_000_000.0)
        .cloned()
        .collect();
    // Exactly the nodes that wide, each with its path, total, self and place in the whole.
    assert_eq!(kept, want);
    assert!(kept.len() < all.len() && kept.len() > 3, "{kept:?}");
    // As deep as the whole tree (the last depths empty), and only the names still used.
    assert_eq!(
        d.header["levels"].as_array().unwrap().len(),
        tree.levels().0.len()
    );
    assert_eq!(d.header["levels"].as_array().unwrap().last().unwrap(), 0);
    for gone in ["leaf", "", "reflect.Value", "other"] {
        assert!(
            !d.names.iter().any(|n| n == gone),
            "{gone:?} in {:?}",
            d.names
        );
    }
    assert!(bytes.len() < single(&tree, &typed(), "", 0.0).len());
}

#[test]
fn a_min_share_is_ignored_when_a_value_is_negative() {
    // A diff-base profile's stacks: an ancestor need not be at least as heavy.
    let tree = Tree::from_stacks(&stacks(&[("main;a", 10), ("main;b", -4), ("other", 1)]));
    let d = decode(&single(&tree, &typed(), "", 0.5), 2);
    assert!(d.header.get("x").is_none());
    assert_eq!(levels_of(&d, &d.floats[0], &d.floats[1]), tree.levels().0);
}
