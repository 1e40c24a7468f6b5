//! Secrets in the configuration: what the admin endpoint shows in their place, and how a
//! configuration sent back with those placeholders keeps the running secrets.
//!
//! A secret is the string value of a field whose name says it holds one (`bearer_token`,
//! `password`, `secret_access_key`, ...; but not `bearer_token_file`, a path) and the
//! credentials inside a URL (`https://user:PASSWORD@host`). Fields are found by name on the
//! serialized configuration rather than listed by hand, so a secret added to a section later
//! (including the sections `ember-export` owns) is hidden without anyone remembering to.
//!
//! `GET /api/v1/config` shows each secret as [`REDACTED`]. `ember agent describe > f.yaml`,
//! an edit elsewhere in the file, then `ember agent apply -f f.yaml` must not replace the
//! exporter's token by the placeholder: [`Config::restore_secrets`] puts the running value
//! back wherever the new configuration holds exactly what the redacted view showed, and
//! refuses a placeholder that stands for no running secret.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Config, ConfigError, ConfigErrors};

/// What the admin endpoint shows instead of a secret.
pub const REDACTED: &str = "***redacted***";

/// Whether a field of this name holds a secret.
fn secret_field(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    // A file that holds a secret is a path, and seeing it helps the operator.
    if name.ends_with("_file") || name.ends_with("_path") {
        return false;
    }
    [
        "token",
        "password",
        "passwd",
        "secret",
        "credential",
        "private_key",
    ]
    .iter()
    .any(|word| name.contains(word))
        || name == "api_key"
        || name.ends_with("_api_key")
        || name.ends_with("access_key")
}

/// `text` with the credentials of a URL's authority hidden (`user:pw@` → `user:REDACTED@`,
/// `token@` → `REDACTED@`); `None` when it holds none.
fn redact_url(text: &str) -> Option<String> {
    let scheme_end = text.find("://")? + 3;
    let rest = &text[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    let userinfo = &rest[..at];
    let shown = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None => REDACTED.to_string(),
    };
    Some(format!("{}{shown}{}", &text[..scheme_end], &rest[at..]))
}

/// How a string at a field named `key` is shown: itself, or with its secret hidden.
fn redact_string(key: &str, text: &str) -> Option<String> {
    if secret_field(key) {
        // An empty value hides nothing, and showing it says "no secret set".
        return (!text.is_empty()).then(|| REDACTED.to_string());
    }
    redact_url(text)
}

/// Walks every string of `value` (with its dotted path and field name) and replaces those
/// `f` returns a new text for.
fn walk(
    value: &mut Value,
    path: &str,
    key: &str,
    f: &mut dyn FnMut(&str, &str, &str) -> Option<String>,
) {
    match value {
        Value::String(s) => {
            if let Some(new) = f(path, key, s) {
                *s = new;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                walk(item, &format!("{path}[{i}]"), key, f);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(v, &p, k, f);
            }
        }
        _ => {}
    }
}

/// Every secret of `config` by path, as it is (`path` → value).
fn secrets(config: &Config) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut value = to_value(config);
    walk(&mut value, "", "", &mut |path, key, text| {
        if redact_string(key, text).is_some() {
            out.insert(path.to_string(), text.to_string());
        }
        None
    });
    out
}

fn to_value(config: &Config) -> Value {
    // Serializing plain data to a `Value` cannot fail (no maps with non-string keys).
    serde_json::to_value(config).unwrap_or(Value::Null)
}

impl Config {
    /// This configuration with every secret replaced by [`REDACTED`]: what the admin
    /// endpoint returns and diffs.
    pub fn redacted(&self) -> Config {
        let mut value = to_value(self);
        walk(&mut value, "", "", &mut |_, key, text| {
            redact_string(key, text)
        });
        // Only strings changed, into strings: the value still has the schema's shape.
        serde_json::from_value(value).unwrap_or_else(|e| {
            tracing::error!(error = %e, "redacting the configuration failed; showing defaults");
            Config::default()
        })
    }

    /// Puts the secrets of `running` back where this (new) configuration holds exactly what
    /// [`Config::redacted`] shows for them, so that a configuration read from the admin
    /// endpoint, edited and sent back keeps the running secrets. A placeholder left anywhere
    /// else (no running secret there, or a URL whose other parts changed) is an error naming
    /// the field: storing it would send "***redacted***" as a token.
    pub fn restore_secrets(&mut self, running: &Config) -> Result<(), ConfigErrors> {
        let running = secrets(running);
        let mut value = to_value(self);
        let mut errors = Vec::new();
        walk(&mut value, "", "", &mut |path, key, text| {
            if !text.contains(REDACTED) {
                return None;
            }
            match running.get(path) {
                Some(old) if redact_string(key, old).as_deref() == Some(text) => Some(old.clone()),
                _ => {
                    errors.push(ConfigError::new(
                        path,
                        format!(
                            "holds the placeholder {REDACTED:?} that the admin endpoint shows instead of a secret, but the running configuration has no secret here that it stands for: write the secret itself"
                        ),
                    ));
                    None
                }
            }
        });
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        *self = serde_json::from_value(value)
            .map_err(|e| ConfigErrors(vec![ConfigError::new("", e.to_string())]))?;
        Ok(())
    }

    /// Paths of the secrets that differ between `self` and `other` (set, removed or
    /// changed): the redacted diff cannot show them, so `apply` lists them by name.
    pub fn changed_secrets(&self, other: &Config) -> Vec<String> {
        let (a, b) = (secrets(self), secrets(other));
        let mut paths: Vec<String> = a
            .keys()
            .chain(b.keys())
            .filter(|p| a.get(*p) != b.get(*p))
            .cloned()
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_names_and_urls() {
        for name in [
            "bearer_token",
            "password",
            "secret_access_key",
            "api_key",
            "access_key",
        ] {
            assert!(secret_field(name), "{name}");
        }
        for name in [
            "bearer_token_file",
            "url",
            "tenant_id",
            "listen",
            "key_path",
        ] {
            assert!(!secret_field(name), "{name}");
        }
        assert_eq!(
            redact_url("https://bob:hunter2@example.com:8443/x?a=b@c").as_deref(),
            Some("https://bob:***redacted***@example.com:8443/x?a=b@c")
        );
        assert_eq!(
            redact_url("http://tok@h/").as_deref(),
            Some("http://***redacted***@h/")
        );
        assert_eq!(redact_url("http://h:1/p@q"), None);
        assert_eq!(redact_url("127.0.0.1:6060"), None);
    }

    fn with_secrets() -> Config {
        let mut c = Config::default();
        let server = c.exporters.server.as_mut().unwrap();
        server.bearer_token = Some("s3cr3t".into());
        server.url = "https://ember:pw@example.com".into();
        c
    }

    #[test]
    fn redaction_round_trip_keeps_secrets() {
        let running = with_secrets();
        let shown = running.redacted();
        let text = shown.to_yaml();
        assert!(!text.contains("s3cr3t") && !text.contains(":pw@"), "{text}");
        assert!(text.contains(REDACTED));
        // Sent back with an unrelated edit: the secrets are those of the running config.
        let mut edited = shown.clone();
        edited.profiling.cpu.sample_rate_hz = 99;
        edited.restore_secrets(&running).unwrap();
        let server = edited.exporters.server.as_ref().unwrap();
        assert_eq!(server.bearer_token.as_deref(), Some("s3cr3t"));
        assert_eq!(server.url, "https://ember:pw@example.com");
        assert_eq!(edited.profiling.cpu.sample_rate_hz, 99);
        assert!(running.changed_secrets(&edited).is_empty());
        // A new secret is taken as given, and named as changed.
        let mut new = running.clone();
        new.exporters.server.as_mut().unwrap().bearer_token = Some("other".into());
        new.restore_secrets(&running).unwrap();
        assert_eq!(
            running.changed_secrets(&new),
            vec!["exporters.server.bearer_token".to_string()]
        );
    }

    #[test]
    fn placeholder_without_a_running_secret_is_refused() {
        let mut new = Config::default();
        new.exporters.server.as_mut().unwrap().bearer_token = Some(REDACTED.into());
        let e = new.restore_secrets(&Config::default()).unwrap_err();
        assert_eq!(e.0[0].path, "exporters.server.bearer_token");
        // The URL's host changed: its redacted password stands for nothing.
        let running = with_secrets();
        let mut moved = running.redacted();
        moved.exporters.server.as_mut().unwrap().url =
            "https://ember:***redacted***@evil.example".into();
        let e = moved.restore_secrets(&running).unwrap_err();
        assert_eq!(e.0[0].path, "exporters.server.url");
    }
}
