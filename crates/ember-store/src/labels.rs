//! Series labels: how an ingested profile's labels become one label set per sample type
//! (the profile type id `name:type:unit:period_type:period_unit` and the `__type__`,
//! `__unit__`, `__period_*__` labels), with defaults for a missing `__name__` or
//! `service_name`. Used by ingest, replay and flush alike, so a profile lands in the same
//! series however it arrives.

use ember_pprof::ProfileView;

use crate::{Labels, NAME_LABEL, PROFILE_TYPE_LABEL, SERVICE_LABEL, TYPE_LABEL};

/// The profile name used when the client sent none: derived from the first sample type.
pub fn default_profile_name(sample_type: &str) -> &'static str {
    match sample_type {
        "cpu" | "samples" | "wall" => "process_cpu",
        t if t.starts_with("alloc_")
            || t.starts_with("inuse_")
            || t == "space"
            || t == "objects" =>
        {
            "memory"
        }
        "contentions" | "delay" => "mutex",
        "goroutine" | "goroutines" => "goroutine",
        _ => "process_cpu",
    }
}

/// Sorts and de-duplicates labels (last value of a repeated name wins).
pub fn normalize_labels(mut labels: Labels) -> Labels {
    labels.reverse();
    labels.sort_by(|a, b| a.0.cmp(&b.0));
    labels.dedup_by(|a, b| a.0 == b.0);
    labels
}

/// The series label sets (one per sample type) that `base` labels plus `profile` produce.
pub fn series_labels(base: &[(String, String)], profile: &ProfileView<'_>) -> Vec<Labels> {
    let s = |i: i64| profile.string(i).into_owned();
    let mut base: Labels = base
        .iter()
        .filter(|(n, _)| n != "__delta__" && !n.is_empty())
        .cloned()
        .collect();
    let first_type = profile
        .sample_type
        .first()
        .map(|t| s(t.r#type))
        .unwrap_or_default();
    if !base.iter().any(|(n, v)| n == NAME_LABEL && !v.is_empty()) {
        base.push((NAME_LABEL.into(), default_profile_name(&first_type).into()));
    }
    if !base
        .iter()
        .any(|(n, v)| n == SERVICE_LABEL && !v.is_empty())
    {
        base.push((SERVICE_LABEL.into(), "unknown_service".into()));
    }
    let base = normalize_labels(base);
    let name = base
        .iter()
        .find(|(n, _)| n == NAME_LABEL)
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let (pt, pu) = profile
        .period_type
        .map(|p| (s(p.r#type), s(p.unit)))
        .unwrap_or_default();
    profile
        .sample_type
        .iter()
        .map(|st| {
            let (t, u) = (s(st.r#type), s(st.unit));
            let mut l = base.clone();
            l.push((
                PROFILE_TYPE_LABEL.into(),
                format!("{name}:{t}:{u}:{pt}:{pu}"),
            ));
            l.push(("__period_type__".into(), pt.clone()));
            l.push(("__period_unit__".into(), pu.clone()));
            l.push((TYPE_LABEL.into(), t));
            l.push(("__unit__".into(), u));
            normalize_labels(l)
        })
        .collect()
}
