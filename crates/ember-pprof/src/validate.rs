//! Structural validation: every cross-reference inside a decoded profile
//! (ids, string indices, value counts) is checked before anyone uses it.

use crate::error::PprofError;
use crate::ids::IdIndex;
use crate::proto::Profile;

/// Checks every cross-reference of `profile`.
///
/// Rules (stricter than profile.proto's comments, matching what Go's
/// `profile.Parse` enforces plus string-index bounds):
/// - `string_table[0]` exists and is `""`; every string index is in bounds.
/// - mapping, function and location ids are nonzero and unique per table
///   (zero is reserved, as in Go: `found function with reserved ID=0`).
/// - `location.mapping_id` is 0 (unknown) or an existing mapping;
///   `line.function_id` is 0 (unknown) or an existing function.
/// - `sample.location_id` entries are existing locations (0 is not allowed).
/// - every sample has exactly one value per sample type.
///
/// The first violation is returned, naming the field path and index.
pub fn validate(profile: &Profile) -> Result<(), PprofError> {
    let nstr = profile.string_table.len();
    match profile.string_table.first() {
        None => {
            return Err(PprofError::malformed(
                "string_table",
                "empty; string_table[0] must be \"\"",
            ));
        }
        Some(s) if !s.is_empty() => {
            return Err(PprofError::malformed(
                "string_table[0]",
                format!("must be \"\", found {s:?}"),
            ));
        }
        Some(_) => {}
    }
    let check_str = |field: &dyn Fn() -> String, idx: i64| -> Result<(), PprofError> {
        if idx < 0 || idx as u64 >= nstr as u64 {
            Err(PprofError::malformed(
                field(),
                format!("string index {idx} out of range (string table has {nstr} entries)"),
            ))
        } else {
            Ok(())
        }
    };

    for (i, vt) in profile.sample_type.iter().enumerate() {
        check_str(&|| format!("sample_type[{i}].type"), vt.r#type)?;
        check_str(&|| format!("sample_type[{i}].unit"), vt.unit)?;
    }
    if let Some(pt) = &profile.period_type {
        check_str(&|| "period_type.type".to_string(), pt.r#type)?;
        check_str(&|| "period_type.unit".to_string(), pt.unit)?;
    }
    check_str(&|| "drop_frames".to_string(), profile.drop_frames)?;
    check_str(&|| "keep_frames".to_string(), profile.keep_frames)?;
    check_str(
        &|| "default_sample_type".to_string(),
        profile.default_sample_type,
    )?;
    check_str(&|| "doc_url".to_string(), profile.doc_url)?;
    for (i, &c) in profile.comment.iter().enumerate() {
        check_str(&|| format!("comment[{i}]"), c)?;
    }

    let id_error = |table: &str, (pos, id, dup): (usize, u64, bool)| {
        if dup {
            PprofError::malformed(
                format!("{table}[{pos}].id"),
                format!("duplicate {table} id {id}"),
            )
        } else {
            PprofError::malformed(
                format!("{table}[{pos}].id"),
                format!("found {table} with reserved ID=0"),
            )
        }
    };

    for (i, m) in profile.mapping.iter().enumerate() {
        check_str(&|| format!("mapping[{i}].filename"), m.filename)?;
        check_str(&|| format!("mapping[{i}].build_id"), m.build_id)?;
    }
    let mappings =
        IdIndex::build(profile.mapping.iter().map(|m| m.id)).map_err(|e| id_error("mapping", e))?;

    for (i, f) in profile.function.iter().enumerate() {
        check_str(&|| format!("function[{i}].name"), f.name)?;
        check_str(&|| format!("function[{i}].system_name"), f.system_name)?;
        check_str(&|| format!("function[{i}].filename"), f.filename)?;
    }
    let functions = IdIndex::build(profile.function.iter().map(|f| f.id))
        .map_err(|e| id_error("function", e))?;

    for (i, loc) in profile.location.iter().enumerate() {
        if loc.mapping_id != 0 && mappings.get(loc.mapping_id).is_none() {
            return Err(PprofError::malformed(
                format!("location[{i}].mapping_id"),
                format!("mapping id {} does not exist", loc.mapping_id),
            ));
        }
        for (j, line) in loc.line.iter().enumerate() {
            if line.function_id != 0 && functions.get(line.function_id).is_none() {
                return Err(PprofError::malformed(
                    format!("location[{i}].line[{j}].function_id"),
                    format!("function id {} does not exist", line.function_id),
                ));
            }
        }
    }
    let locations = IdIndex::build(profile.location.iter().map(|l| l.id))
        .map_err(|e| id_error("location", e))?;

    let ntypes = profile.sample_type.len();
    for (i, s) in profile.sample.iter().enumerate() {
        if s.value.len() != ntypes {
            return Err(PprofError::malformed(
                format!("sample[{i}].value"),
                format!(
                    "has {} values but the profile has {ntypes} sample types",
                    s.value.len()
                ),
            ));
        }
        for (j, &id) in s.location_id.iter().enumerate() {
            if locations.get(id).is_none() {
                return Err(PprofError::malformed(
                    format!("sample[{i}].location_id[{j}]"),
                    format!("location id {id} does not exist"),
                ));
            }
        }
        for (j, l) in s.label.iter().enumerate() {
            check_str(&|| format!("sample[{i}].label[{j}].key"), l.key)?;
            check_str(&|| format!("sample[{i}].label[{j}].str"), l.str)?;
            check_str(&|| format!("sample[{i}].label[{j}].num_unit"), l.num_unit)?;
        }
    }
    Ok(())
}
