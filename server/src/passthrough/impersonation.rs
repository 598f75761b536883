//! Acting upstream as a client certificate's user (or whom it
//! impersonates): kubecache sends the request with its own credentials and
//! `Impersonate-*` headers, which kube-apiserver's impersonation filter
//! reads back into the user the request runs as. Two things can go wrong,
//! and each gets a 403 that says why:
//!
//! - The filter would read the headers as someone else: it adds
//!   `system:unauthenticated` to an impersonated `system:anonymous` (a
//!   certificate named `system:anonymous` has its O groups only), and a
//!   header value loses the spaces around it. kubecache refuses rather than
//!   act upstream as another identity.
//! - The API server refuses kubecache's own impersonation (an operator
//!   narrowed its grant): its 403 names kubecache as the user who may not;
//!   the caller gets one that names its request and the grant kubecache
//!   lacks.

use axum::body::Body;
use axum::http::header::{HeaderMap, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use kubecache_wire::Status;

use crate::auth::{Impersonation, UserInfo};

/// Largest 403 read for the impersonation it refuses (a `Status` of a few
/// hundred bytes).
const REFUSAL_LIMIT: usize = 64 * 1024;

/// Adds the headers that impersonate `user`.
///
/// # Errors
///
/// A 403 when the API server would read them as another user.
pub(super) fn impersonate(headers: &mut HeaderMap, user: &UserInfo) -> Result<(), Status> {
    // Around a header's value, spaces and tabs are not part of it.
    let value = |text: &str| {
        HeaderValue::from_str(text)
            .ok()
            .filter(|_| text.trim_matches([' ', '\t']) == text)
            .ok_or_else(|| {
                unfaithful(
                    user,
                    &format!("{text:?} cannot be an HTTP header's value as it is"),
                )
            })
    };
    headers.insert("impersonate-user", value(&user.username)?);
    if !user.uid.is_empty() {
        headers.insert("impersonate-uid", value(&user.uid)?);
    }
    for group in &user.groups {
        headers.append("impersonate-group", value(group)?);
    }
    for (key, values) in &user.extra {
        let name = extra_header(key).map_err(|why| unfaithful(user, &why))?;
        for v in values {
            headers.append(name.clone(), value(v)?);
        }
    }
    let read_back = Impersonation::of(headers)
        .ok()
        .flatten()
        .map(|impersonation| impersonation.user())
        .unwrap_or_default();
    if read_back == *user {
        Ok(())
    } else {
        Err(unfaithful(
            user,
            &format!(
                "the API server would take that for {}",
                identity(&read_back)
            ),
        ))
    }
}

/// `Impersonate-Extra-{key}`, the key percent-escaped as client-go escapes
/// it (`round_trippers.go`: what is not a header-name byte, and `%`).
fn extra_header(key: &str) -> Result<HeaderName, String> {
    const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'!')
        .remove(b'#')
        .remove(b'$')
        .remove(b'&')
        .remove(b'\'')
        .remove(b'*')
        .remove(b'+')
        .remove(b'-')
        .remove(b'.')
        .remove(b'^')
        .remove(b'_')
        .remove(b'`')
        .remove(b'|')
        .remove(b'~');
    let escaped = percent_encoding::utf8_percent_encode(key, ESCAPED);
    HeaderName::try_from(format!("impersonate-extra-{escaped}"))
        .map_err(|e| format!("the extra attribute {key:?} cannot be a header's name: {e}"))
}

/// The 403 for a request kubecache cannot send as `user` faithfully.
fn unfaithful(user: &UserInfo, why: &str) -> Status {
    Status::failure(
        403,
        "Forbidden",
        format!(
            "kubecache cannot pass this request through as {}: it passes a client certificate user's requests through by impersonating them, and {why}; send this request to the API server directly",
            identity(user)
        ),
    )
}

/// `User "name" in groups [...]`, and its UID and extras if any.
fn identity(user: &UserInfo) -> String {
    let mut shown = format!("User {:?} in groups {:?}", user.username, user.groups);
    if !user.uid.is_empty() {
        shown = format!("{shown} with UID {:?}", user.uid);
    }
    if !user.extra.is_empty() {
        shown = format!("{shown} with extras {:?}", user.extra);
    }
    shown
}

/// The API server's answer to `method` `path`, sent impersonating `user`:
/// as it came, but a refusal of kubecache's own impersonation (a 403 that
/// says who `cannot impersonate` what), which becomes one that names the
/// caller's request and the grant kubecache lacks.
///
/// # Errors
///
/// That 403; a 500 when the API server's 403 cannot be read.
pub(super) async fn explained(
    response: Response,
    user: &UserInfo,
    method: &Method,
    path: &str,
) -> Result<Response, Status> {
    if response.status() != StatusCode::FORBIDDEN {
        return Ok(response);
    }
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, REFUSAL_LIMIT)
        .await
        .map_err(|e| {
            Status::internal(format!(
                "kubecache could not read the API server's 403: {e}"
            ))
        })?;
    let refused = super::as_json(&parts.headers, &body)
        .and_then(|json| serde_json::from_slice::<Status>(&json).ok())
        .and_then(|status| own_refusal(status, user, method, path));
    match refused {
        Some(status) => Err(status),
        None => Ok(Response::from_parts(parts, Body::from(body))),
    }
}

/// `status`, the impersonation filter's 403 to kubecache (`KIND "NAME" is
/// forbidden: User "KUBECACHE" cannot impersonate resource ...`), as the
/// caller's: what it asked, as whom, and the grant kubecache lacks.
fn own_refusal(status: Status, user: &UserInfo, method: &Method, path: &str) -> Option<Status> {
    let (before, grant) = status.message.split_once(" cannot impersonate ")?;
    let (forbidden, _kubecache) = before.rsplit_once(": User ")?;
    let mut refusal = Status::failure(
        403,
        "Forbidden",
        format!(
            "{forbidden}: kubecache cannot pass {method} {path} through as {}: it passes a client certificate user's requests through by impersonating them, and its own service account may not impersonate {grant}; grant it that (see the client-certificates component of kubecache's deploy)",
            identity(user)
        ),
    );
    refusal.details = status.details;
    Some(refusal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passthrough::tests::values;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }

    /// The impersonation headers of `user`, or the refusal's message.
    fn impersonated(user: &UserInfo) -> Result<HeaderMap, String> {
        let mut headers = HeaderMap::new();
        impersonate(&mut headers, user)
            .map(|()| headers)
            .map_err(|status| {
                assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
                status.message
            })
    }

    #[test]
    fn the_names_the_api_server_treats_specially_go_as_they_are() {
        // Recorded: cert-masters-ssr, cert-ns-reader-sa-ssr (groups given,
        // so no service account groups are added), cert-bmp-o-masters-ssr.
        for (name, groups) in [
            (
                "cert-admin",
                &["system:masters", "system:authenticated"][..],
            ),
            (
                "system:serviceaccount:team-a:ns-reader",
                &["system:authenticated"],
            ),
            ("system:kube-scheduler", &["system:authenticated"]),
            ("system:node:n1", &["system:nodes", "system:authenticated"]),
            ("system:anonymous", &["system:unauthenticated"]),
            ("alice", &["system:unauthenticated"]),
        ] {
            let headers = impersonated(&user(name, groups)).unwrap();
            assert_eq!(values(&headers, "impersonate-user"), [name]);
            assert_eq!(values(&headers, "impersonate-group"), groups);
        }
    }

    #[test]
    fn a_certificate_named_system_anonymous_is_refused_not_made_unauthenticated() {
        // Recorded: cert-cn-anonymous-ssr (system:anonymous, no group) and
        // imp-admin-as-anonymous-ssr (impersonated, it gains
        // system:unauthenticated).
        for groups in [&[][..], &["team-a"]] {
            let message = impersonated(&user("system:anonymous", groups)).unwrap_err();
            assert!(
                message.starts_with(&format!(
                    "kubecache cannot pass this request through as User \"system:anonymous\" in groups {groups:?}"
                )),
                "{message}"
            );
            assert!(message.contains("\"system:unauthenticated\"]"), "{message}");
        }
    }

    #[test]
    fn what_a_header_cannot_carry_as_it_is_is_refused() {
        for refused in [
            user("bad\nname", &["system:authenticated"]),
            user(" alice", &["system:authenticated"]),
            user("alice", &["team-a\t", "system:authenticated"]),
            UserInfo {
                extra: [("Scopes".to_string(), vec!["view".to_string()])].into(),
                ..user("alice", &["system:authenticated"])
            },
        ] {
            let message = impersonated(&refused).unwrap_err();
            assert!(message.contains("kubecache cannot pass"), "{message}");
        }
    }

    #[test]
    fn the_api_server_s_refusal_of_kubecache_names_the_caller_and_the_grant() {
        // Recorded: imp-sa-as-alice-uid-ssr, as the impersonator would
        // have been refused kubecache's own impersonation.
        let recorded: Status = serde_json::from_slice(&kubecache_testkit::golden::read(
            "edges/bodies/imp-sa-as-alice-uid-ssr.json",
        ))
        .unwrap();
        let alice = UserInfo {
            uid: "uid-impersonated-1".into(),
            ..user("alice", &["system:authenticated"])
        };
        let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
        let status = own_refusal(recorded.clone(), &alice, &Method::POST, path).unwrap();
        assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
        assert_eq!(status.details, recorded.details);
        assert_eq!(
            status.message,
            "uids.authentication.k8s.io \"uid-impersonated-1\" is forbidden: kubecache cannot pass POST /apis/authentication.k8s.io/v1/selfsubjectreviews through as User \"alice\" in groups [\"system:authenticated\"] with UID \"uid-impersonated-1\": it passes a client certificate user's requests through by impersonating them, and its own service account may not impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope; grant it that (see the client-certificates component of kubecache's deploy)"
        );
        // A 403 of the request itself is the caller's own.
        let own: Status = serde_json::from_slice(&kubecache_testkit::golden::read(
            "edges/bodies/cert-ns-reader-sa-list.json",
        ))
        .unwrap();
        assert_eq!(own_refusal(own, &alice, &Method::GET, "/api/v1/pods"), None);
    }
}
