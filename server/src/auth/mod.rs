//! Who is asking: the credential of every request, and the user it proves,
//! as kube-apiserver would see them.
//!
//! Requests kubecache answers from its caches are authenticated and
//! authorized here (a `TokenReview` and a `SubjectAccessReview` against the
//! API server). Requests it passes through are not: the API server judges
//! them itself, from the [`Credential`] forwarded on the caller's behalf.

use std::collections::BTreeMap;

use axum::http::{Extensions, HeaderMap, header};

/// A user as the API server knows it (`authentication.k8s.io/v1`
/// `UserInfo`): what a `TokenReview` returns and a `SubjectAccessReview`
/// asks about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UserInfo {
    /// The user's name (`system:serviceaccount:ns:name` for service accounts).
    pub username: String,
    /// The user's UID, if the authenticator gives one.
    pub uid: String,
    /// The groups the user belongs to.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, the service account's pod ...).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The credential a request carries: what proves its user to kubecache, and
/// what pass-through presents to the API server on its behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A client certificate the TLS layer verified against the client CA:
    /// its user, read as kube-apiserver's x509 authenticator reads it (the
    /// subject's common name, its organizations as groups). Forwarded as
    /// impersonation of that user with kubecache's own credentials.
    Certificate(UserInfo),
    /// A bearer token, checked with a `TokenReview`; forwarded as it came.
    Token(String),
    /// None: `system:anonymous` on the API server; forwarded without one.
    Anonymous,
}

/// The user of a verified client certificate, put on the request by the TLS
/// layer.
#[derive(Debug, Clone)]
pub struct PeerCertificate(pub UserInfo);

impl Credential {
    /// The credential of a request. A verified client certificate comes
    /// first, then a bearer token, as in kube-apiserver's authenticator
    /// chain.
    pub fn of(extensions: &Extensions, headers: &HeaderMap) -> Credential {
        if let Some(PeerCertificate(user)) = extensions.get::<PeerCertificate>() {
            return Credential::Certificate(user.clone());
        }
        headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|token| !token.is_empty())
            .map_or(Credential::Anonymous, |token| {
                Credential::Token(token.to_string())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn a_bearer_token_in_any_case_of_the_scheme() {
        let none = Extensions::new();
        assert_eq!(
            Credential::of(&none, &headers("Bearer abc")),
            Credential::Token("abc".into())
        );
        assert_eq!(
            Credential::of(&none, &headers("bearer  abc ")),
            Credential::Token("abc".into())
        );
        assert_eq!(
            Credential::of(&none, &headers("Basic eDp5")),
            Credential::Anonymous
        );
        assert_eq!(
            Credential::of(&none, &headers("Bearer ")),
            Credential::Anonymous
        );
        assert_eq!(
            Credential::of(&none, &HeaderMap::new()),
            Credential::Anonymous
        );
    }

    #[test]
    fn a_verified_certificate_wins_over_a_token() {
        let mut extensions = Extensions::new();
        let user = UserInfo {
            username: "alice".into(),
            ..UserInfo::default()
        };
        extensions.insert(PeerCertificate(user.clone()));
        assert_eq!(
            Credential::of(&extensions, &headers("Bearer abc")),
            Credential::Certificate(user)
        );
    }
}
