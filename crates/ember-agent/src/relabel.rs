//! Prometheus-style relabelling (`replace`, `keep`, `drop`, `labelmap`, `labeldrop`,
//! `labelkeep`) over a label set, with the regexes compiled once per configuration.

use std::collections::BTreeMap;

use regex::Regex;

use crate::config::{RelabelAction, RelabelConfig};

/// A label set, sorted by name.
pub type Labels = BTreeMap<String, String>;

/// One compiled rule.
#[derive(Debug, Clone)]
pub struct Rule {
    config: RelabelConfig,
    regex: Regex,
}

/// Compiles rules (validated configurations always compile; a bad regex is an error naming it).
pub fn compile(rules: &[RelabelConfig]) -> Result<Vec<Rule>, regex::Error> {
    rules
        .iter()
        .map(|r| {
            Ok(Rule {
                regex: Regex::new(&format!("^(?:{})$", r.regex))?,
                config: r.clone(),
            })
        })
        .collect()
}

/// Applies rules in order; `None` when a `keep`/`drop` rule discards the label set.
pub fn apply(rules: &[Rule], mut labels: Labels) -> Option<Labels> {
    for rule in rules {
        let c = &rule.config;
        match c.action {
            RelabelAction::Replace => {
                let value = source_value(c, &labels);
                if let Some(caps) = rule.regex.captures(&value) {
                    let mut target = String::new();
                    caps.expand(c.target_label.as_deref().unwrap_or(""), &mut target);
                    let mut replaced = String::new();
                    caps.expand(&c.replacement, &mut replaced);
                    if target.is_empty() {
                        continue;
                    }
                    if replaced.is_empty() {
                        labels.remove(&target);
                    } else {
                        labels.insert(target, replaced);
                    }
                }
            }
            RelabelAction::Keep => {
                if !rule.regex.is_match(&source_value(c, &labels)) {
                    return None;
                }
            }
            RelabelAction::Drop => {
                if rule.regex.is_match(&source_value(c, &labels)) {
                    return None;
                }
            }
            RelabelAction::Labelmap => {
                let mut added = Vec::new();
                for (name, value) in &labels {
                    if let Some(caps) = rule.regex.captures(name) {
                        let mut new_name = String::new();
                        caps.expand(&c.replacement, &mut new_name);
                        if !new_name.is_empty() {
                            added.push((new_name, value.clone()));
                        }
                    }
                }
                labels.extend(added);
            }
            RelabelAction::Labeldrop => labels.retain(|name, _| !rule.regex.is_match(name)),
            RelabelAction::Labelkeep => labels.retain(|name, _| rule.regex.is_match(name)),
        }
    }
    Some(labels)
}

fn source_value(c: &RelabelConfig, labels: &Labels) -> String {
    c.source_labels
        .iter()
        .map(|name| labels.get(name).map(String::as_str).unwrap_or(""))
        .collect::<Vec<_>>()
        .join(&c.separator)
}

/// Removes the `__`-prefixed labels (meta labels are inputs to relabelling only), keeping
/// `__name__`.
pub fn drop_meta(labels: &mut Labels) {
    labels.retain(|name, _| !name.starts_with("__") || name == "__name__");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(yaml: &str) -> Vec<Rule> {
        let configs: Vec<RelabelConfig> = serde_norway::from_str(yaml).unwrap();
        compile(&configs).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_action() {
        let input = labels(&[
            ("__meta_process_comm", "postgres"),
            ("__meta_process_pid", "42"),
            ("__meta_process_exe", "/usr/lib/postgresql/16/bin/postgres"),
        ]);
        let r = rules(
            "- source_labels: [__meta_process_comm, __meta_process_pid]\n  regex: '(.*);(\\d+)'\n  target_label: instance\n  replacement: '$1-$2'\n",
        );
        assert_eq!(apply(&r, input.clone()).unwrap()["instance"], "postgres-42");
        // Not matching: unchanged.
        let r =
            rules("- source_labels: [__meta_process_comm]\n  regex: nginx\n  target_label: x\n");
        assert_eq!(apply(&r, input.clone()).unwrap(), input);
        // Anchored: "postgre" alone does not match "postgres".
        let r = rules("- source_labels: [__meta_process_comm]\n  regex: postgre\n  action: keep\n");
        assert!(apply(&r, input.clone()).is_none());
        let r =
            rules("- source_labels: [__meta_process_comm]\n  regex: 'post.*'\n  action: keep\n");
        assert!(apply(&r, input.clone()).is_some());
        let r =
            rules("- source_labels: [__meta_process_comm]\n  regex: 'post.*'\n  action: drop\n");
        assert!(apply(&r, input.clone()).is_none());
        let r =
            rules("- regex: '__meta_process_(.+)'\n  replacement: 'proc_$1'\n  action: labelmap\n");
        let out = apply(&r, input.clone()).unwrap();
        assert_eq!(out["proc_comm"], "postgres");
        assert_eq!(out["proc_pid"], "42");
        assert_eq!(out.len(), 6);
        let r = rules("- regex: '.*_pid'\n  action: labeldrop\n");
        assert!(
            !apply(&r, input.clone())
                .unwrap()
                .contains_key("__meta_process_pid")
        );
        let r = rules("- regex: '.*_pid'\n  action: labelkeep\n");
        assert_eq!(apply(&r, input.clone()).unwrap().len(), 1);
        // Empty replacement deletes the target label.
        let r = rules(
            "- source_labels: [nope]\n  regex: ''\n  target_label: __meta_process_pid\n  replacement: ''\n",
        );
        assert!(
            !apply(&r, input.clone())
                .unwrap()
                .contains_key("__meta_process_pid")
        );
        let mut out = apply(&[], input).unwrap();
        out.insert("__name__".into(), "process_cpu".into());
        drop_meta(&mut out);
        assert_eq!(out, labels(&[("__name__", "process_cpu")]));
    }
}
