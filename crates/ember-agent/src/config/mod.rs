//! The agent's configuration: the schema (every field has a default, see
//! [`DEFAULT_CONFIG_YAML`] for the documented reference), YAML/JSON parsing, semantic
//! validation with field paths, a line diff used by `ember agent apply`, and the redaction of
//! secrets the admin endpoint applies to what it shows.
//!
//! The schema lives in `schema`, durations in `duration`, the semantic checks in `validate`
//! (and in `depends`: a setting whose switch is off is an error naming both),
//! the line diff in `diff` and secrets in `redact`; everything public is re-exported here.

use std::fmt;

mod depends;
mod diff;
mod duration;
mod redact;
mod schema;
#[cfg(test)]
mod tests;
mod validate;

pub use diff::diff_lines;
pub use duration::Dur;
pub use redact::REDACTED;
pub use schema::*;

/// The documented default configuration, printed by `ember agent --print-default-config`.
/// A test checks that it parses to exactly [`Config::default`].
pub const DEFAULT_CONFIG_YAML: &str = include_str!("default-config.yaml");

/// A configuration problem: the field path (`scrape_configs[0].scrape_interval`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfigError {
    /// Dotted path of the offending field (`""` for the whole document).
    pub path: String,
    /// What is wrong and what is expected.
    pub reason: String,
}

impl ConfigError {
    fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Every problem found in a configuration, one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Parses YAML (or JSON) text and validates it.
pub fn parse(text: &str) -> Result<Config, ConfigErrors> {
    let config = parse_unchecked(text)?;
    config.validate()?;
    Ok(config)
}

/// Parses YAML (or JSON) text without the semantic checks, for a caller that completes the
/// configuration before validating it (`ember up` sets the exporter's URL and the admin
/// address itself, so a file for it may leave `exporters.server` out).
pub fn parse_unchecked(text: &str) -> Result<Config, ConfigErrors> {
    let config: Config = if text.trim().is_empty() {
        Config::default()
    } else {
        serde_norway::from_str(text).map_err(|e| {
            let message = e.to_string();
            // serde_norway prefixes the field path ("a.b[0].c: ..."); keep it as the path.
            let (path, reason) = match message.split_once(": ") {
                Some((p, r)) if !p.contains(' ') => (p.to_string(), r.to_string()),
                _ => (String::new(), message),
            };
            ConfigErrors(vec![ConfigError::new(path, reason)])
        })?
    };
    Ok(config)
}

/// Reads and parses a configuration file.
pub fn load(path: &std::path::Path) -> Result<Config, ConfigErrors> {
    let config = load_unchecked(path)?;
    config.validate()?;
    Ok(config)
}

/// Reads and parses a configuration file without the semantic checks (see
/// [`parse_unchecked`]).
pub fn load_unchecked(path: &std::path::Path) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigErrors(vec![ConfigError::new(
            "",
            format!("reading {}: {e}", path.display()),
        )])
    })?;
    parse_unchecked(&text)
}

/// Whether the YAML (or JSON) `text` gives the field at `path` (`["profiling", "enabled"]`)
/// itself rather than leaving it to its default: `ember up` treats a file that turns host
/// profiling on explicitly as asking for it.
pub fn sets(text: &str, path: &[&str]) -> bool {
    let Ok(mut value) = serde_norway::from_str::<serde_norway::Value>(text) else {
        return false;
    };
    for key in path {
        match value.get(*key) {
            Some(v) => value = v.clone(),
            None => return false,
        }
    }
    true
}
