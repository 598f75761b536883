//! The filter every request but those under `/sim/` passes first, in kube-apiserver's
//! order: the request is read ([`RequestInfo`]), then, when a policy is
//! enforced, authenticated (no token: `system:anonymous`; an unknown token:
//! 401), impersonation applied, and authorized (403 with kube-apiserver's
//! wording). Handlers find the [`RequestInfo`] and the [`Caller`] in the
//! request's extensions.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::Response;
use kubecache_wire::Status;

use super::request_info::RequestInfo;
use super::{Context, status_response};
use crate::sim::auth::{Attributes, UserInfo, impersonate};
use crate::sim::encoding;

/// Who a request runs as: `None` when no policy is enforced.
#[derive(Debug, Clone)]
pub struct Caller(pub Option<UserInfo>);

impl Context {
    /// Whether the caller may do what `attributes` (whose user is
    /// replaced by the caller's) describe: the checks a handler makes
    /// beyond the request's own, e.g. `create` for an apply that creates.
    pub fn authorize(&self, caller: &Caller, mut attributes: Attributes) -> Result<(), Status> {
        let (Some(policy), Some(user)) = (self.policy(), &caller.0) else {
            return Ok(());
        };
        attributes.user = user.clone();
        let decision = policy.authorize(&attributes);
        if decision.allowed {
            Ok(())
        } else {
            Err(attributes.forbidden(&decision.reason))
        }
    }
}

/// The filter (an axum middleware).
pub async fn guard(State(ctx): State<Arc<Context>>, mut request: Request, next: Next) -> Response {
    if request.uri().path().starts_with("/sim/") {
        return next.run(request).await;
    }
    let wire = encoding::for_status(
        request
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok()),
    );
    let uri = request.uri().to_string();
    let info = match RequestInfo::parse(
        request.method(),
        request.uri().path(),
        request.uri().query().unwrap_or_default(),
    ) {
        Ok(info) => info,
        Err(e) => {
            let status = Status::internal(format!(
                "Internal Server Error: {uri:?}: failed to create RequestInfo: {e}"
            ));
            return status_response(&status, wire);
        }
    };
    let caller = match ctx.policy() {
        None => Caller(None),
        Some(policy) => {
            let user = match bearer_token(request.headers()) {
                None => UserInfo::anonymous(),
                Some(token) => match policy.authenticate(token) {
                    Some(user) => user,
                    None => {
                        let status = Status::failure(401, "Unauthorized", "Unauthorized");
                        return status_response(&status, wire);
                    }
                },
            };
            let user = match impersonate(&policy, &user, request.headers(), &uri) {
                Ok(impersonated) => impersonated.unwrap_or(user),
                Err(status) => return status_response(&status, wire),
            };
            let attributes = info.attributes(user);
            let decision = policy.authorize(&attributes);
            if !decision.allowed {
                return status_response(&attributes.forbidden(&decision.reason), wire);
            }
            Caller(Some(attributes.user))
        }
    };
    request.extensions_mut().insert(info);
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The bearer token of `Authorization`, as kube-apiserver's bearer-token
/// authenticator reads it: scheme `Bearer` in any case, then one space and
/// a non-empty token; anything else is no token at all (anonymous).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_as_kube_apiserver_reads_them() {
        let token = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            bearer_token(&headers).map(str::to_string)
        };
        assert_eq!(token("Bearer abc"), Some("abc".into()));
        assert_eq!(token("bearer abc"), Some("abc".into()));
        assert_eq!(token("Bearer  abc"), None);
        assert_eq!(token("Basic eDp5"), None);
        assert_eq!(token("Bearer"), None);
    }
}
