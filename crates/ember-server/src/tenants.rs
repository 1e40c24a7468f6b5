//! Who a request is for: the tenant named by its bearer token (with `--auth-tokens`) or by
//! `X-Scope-OrgID` (`anonymous` without one), and the `allowed_tenants` check every data
//! route goes through.

use axum::http::{HeaderMap, StatusCode};

use crate::{ApiError, AppState, header};

/// Tenant of a request. With bearer-token auth enabled, the token's tenant (401 without a
/// known token); otherwise `X-Scope-OrgID`, or `anonymous`. With `allowed_tenants` set, 403
/// for any tenant not in it (whether it came from a token or the header).
pub(crate) fn tenant(s: &AppState, headers: &HeaderMap) -> Result<String, ApiError> {
    let tenant = tenant_of(s, headers)?;
    match &s.limits.allowed_tenants {
        Some(allowed) if !allowed.contains(&tenant) => Err(ApiError {
            retry_after_secs: None,
            status: StatusCode::FORBIDDEN,
            code: "permission_denied",
            reason: "tenant_not_allowed",
            message: format!(
                "tenant {tenant:?} is not in this server's allowed_tenants (a request without \
                 X-Scope-OrgID is tenant \"anonymous\")"
            ),
        }),
        _ => Ok(tenant),
    }
}

/// [`tenant`] before the `allowed_tenants` check.
fn tenant_of(s: &AppState, headers: &HeaderMap) -> Result<String, ApiError> {
    if let Some(tokens) = &s.tokens {
        let token = header(headers, "authorization")
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        return match token.and_then(|t| tokens.get(t)) {
            Some(tenant) => Ok(tenant.clone()),
            None => Err(ApiError {
                retry_after_secs: None,
                status: StatusCode::UNAUTHORIZED,
                code: "unauthenticated",
                reason: "unauthenticated",
                message: "missing or unknown bearer token (Authorization: Bearer <token>)".into(),
            }),
        };
    }
    let Some(v) = headers.get("x-scope-orgid") else {
        return Ok("anonymous".into());
    };
    let v = v
        .to_str()
        .map_err(|_| ApiError::bad_request("bad_tenant", "X-Scope-OrgID is not valid text"))?
        .trim();
    if v.is_empty() || v.len() > 150 || v.contains('/') || v.contains("..") {
        return Err(ApiError::bad_request(
            "bad_tenant",
            "X-Scope-OrgID must be 1-150 characters without '/' or '..'",
        ));
    }
    Ok(v.to_string())
}
