//! The filter every request but those under `/sim/` passes first, in
//! kube-apiserver's order: the request is read ([`RequestInfo`]), then,
//! when a policy is enforced, authenticated (no bearer token:
//! `system:anonymous`; an unknown one: 401), impersonation applied, and
//! authorized (403 with kube-apiserver's wording). A request kube-apiserver
//! cannot read, or whose impersonation headers name no user, gets its
//! plain-text 500. Handlers find the [`RequestInfo`] and the [`Caller`] in
//! the request's extensions.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use kubecache_wire::Status;

use super::request_info::RequestInfo;
use super::{Context, error_response, plain_text};
use crate::sim::auth::{Attributes, Policy, Refusal, UserInfo, impersonate};

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

/// The `Warning` kube-apiserver adds when `Authorization` has a space too
/// many between `Bearer` and the token (and ignores the header).
const EXTRA_SPACE: &str = "299 - \"the provided Authorization header contains extra space before the bearer token, and is ignored\"";

/// The filter (an axum middleware).
pub async fn guard(State(ctx): State<Arc<Context>>, request: Request, next: Next) -> Response {
    if request.uri().path().starts_with("/sim/") {
        return next.run(request).await;
    }
    if super::discovery::is_discovery(request.uri().path()) {
        ctx.counters.discovery();
    }
    let policy = ctx.policy();
    let bearer = policy.as_ref().map(|_| bearer_token(request.headers()));
    let mut response = admit(policy.as_deref(), bearer.clone(), request, next).await;
    if bearer == Some(Bearer::ExtraSpace) {
        response
            .headers_mut()
            .append(header::WARNING, HeaderValue::from_static(EXTRA_SPACE));
    }
    response
}

/// The request read, authenticated (as `bearer` says), impersonated and
/// authorized, then served; or the answer that refuses it.
async fn admit(
    policy: Option<&Policy>,
    bearer: Option<Bearer>,
    mut request: Request,
    next: Next,
) -> Response {
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let refuse = |status: &Status| error_response(status, accept.as_deref());
    let uri = request.uri().to_string();
    let info = match RequestInfo::parse(
        request.method(),
        request.uri().path(),
        request.uri().query().unwrap_or_default(),
    ) {
        Ok(info) => info,
        Err(e) => return internal_error(&uri, &format!("failed to create RequestInfo: {e}")),
    };
    let caller = match (policy, bearer) {
        (Some(policy), Some(bearer)) => {
            let user = match bearer {
                Bearer::Token(token) => match policy.authenticate(&token) {
                    Some(user) => user,
                    None => {
                        return refuse(&Status::unauthorized());
                    }
                },
                Bearer::None | Bearer::ExtraSpace => UserInfo::anonymous(),
            };
            let user = match impersonate(policy, &user, request.headers()) {
                Ok(impersonated) => impersonated.unwrap_or(user),
                Err(Refusal::Forbidden(status)) => return refuse(&status),
                Err(Refusal::Invalid(error)) => return internal_error(&uri, &error),
            };
            let attributes = info.attributes(user);
            let decision = policy.authorize(&attributes);
            if !decision.allowed {
                return refuse(&attributes.forbidden(&decision.reason));
            }
            Caller(Some(attributes.user))
        }
        _ => Caller(None),
    };
    request.extensions_mut().insert(info);
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// kube-apiserver's `responsewriters.InternalError`: a plain-text 500 (Go's
/// `http.Error`) naming the request URI, with `&`, `<` and `>` escaped as
/// in HTML.
fn internal_error(uri: &str, error: &str) -> Response {
    let text = format!("Internal Server Error: {uri:?}: {error}")
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    plain_text(StatusCode::INTERNAL_SERVER_ERROR, &text)
}

/// What `Authorization` holds for the bearer-token authenticator.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Bearer {
    /// A token to authenticate (which may not).
    Token(String),
    /// No bearer token: anonymous.
    None,
    /// `Bearer  token`: no token, with a [`EXTRA_SPACE`] warning.
    ExtraSpace,
}

/// The bearer token of `Authorization`, as kube-apiserver's bearer-token
/// authenticator (`request/bearertoken`) reads it: the first header,
/// trimmed of white space, split in at most three at spaces; scheme `bearer`
/// in any case, then a non-empty token (an empty one followed by a third
/// part is a space too many). The header's bytes are read as Go's strings
/// hold them: a token that is not UTF-8 is a token (that fails), not none.
fn bearer_token(headers: &HeaderMap) -> Bearer {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Bearer::None;
    };
    let value = String::from_utf8_lossy(value.as_bytes());
    let parts: Vec<&str> = value.trim().splitn(3, ' ').collect();
    match parts.as_slice() {
        [scheme, token, ..] if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() => {
            Bearer::Token(token.to_string())
        }
        [scheme, "", _] if scheme.eq_ignore_ascii_case("bearer") => Bearer::ExtraSpace,
        _ => Bearer::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_as_kube_apiserver_reads_them() {
        let token = |values: &[&[u8]]| {
            let mut headers = HeaderMap::new();
            for value in values {
                let value = HeaderValue::from_bytes(value).unwrap();
                headers.append(header::AUTHORIZATION, value);
            }
            bearer_token(&headers)
        };
        let t = |s: &str| Bearer::Token(s.into());
        assert_eq!(token(&[b"Bearer abc"]), t("abc"));
        assert_eq!(token(&[b"bearer abc"]), t("abc"));
        assert_eq!(token(&[b"BEARER abc "]), t("abc"));
        assert_eq!(token(&[b"Bearer abc extra"]), t("abc"));
        assert_eq!(token(&[b"Bearer abc,Bearer def"]), t("abc,Bearer"));
        assert_eq!(token(&[b"Bearer  abc"]), Bearer::ExtraSpace);
        assert_eq!(token(&[b"Bearer\tabc"]), Bearer::None);
        assert_eq!(token(&[b"Bearer "]), Bearer::None);
        assert_eq!(token(&[b"Basic eDp5"]), Bearer::None);
        assert_eq!(token(&[b"Bearer"]), Bearer::None);
        assert_eq!(token(&[]), Bearer::None);
        assert_eq!(token(&[b"Bearer a", b"Bearer b"]), t("a"));
        assert_eq!(token(&[b"Bearer t\xc3\xb6ken"]), t("t\u{f6}ken"));
    }
}
