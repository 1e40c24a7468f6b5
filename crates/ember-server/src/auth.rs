//! The bearer-token file of `ember server --auth-tokens FILE`.

use crate::ServerError;

/// Reads a token file: one `token tenant` pair per line; blank lines and `#` comments ignored.
pub fn read_tokens(
    path: &std::path::Path,
) -> Result<std::collections::HashMap<String, String>, ServerError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServerError::Io {
        context: format!("reading token file {}", path.display()),
        source,
    })?;
    let mut out = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next(), parts.next()) {
            (Some(token), Some(tenant), None) => {
                out.insert(token.to_string(), tenant.to_string());
            }
            _ => {
                return Err(ServerError::Io {
                    context: format!("{}:{}", path.display(), n + 1),
                    source: std::io::Error::other("expected \"<token> <tenant>\""),
                });
            }
        }
    }
    Ok(out)
}
