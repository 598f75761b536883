//! Who is asking: the identity of every request, as kube-apiserver would
//! see it, and the credential that pass-through forwards on its behalf.
//!
//! The TLS layer puts a [`PeerCertificate`] on requests whose client
//! certificate it verified; authentication turns that or a bearer token
//! into a [`Caller`], an extension on every request past it.

use std::collections::BTreeMap;

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

/// The credential a request proved its identity with: what pass-through
/// presents to the API server for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A bearer token, forwarded as it came.
    Token(String),
    /// A client certificate kubecache verified: forwarded as impersonation
    /// of the certificate's user with kubecache's own credentials.
    Certificate,
    /// No credential (only with `--auth=none`): forwarded without one.
    Anonymous,
}

/// The caller of a request, once authenticated.
#[derive(Debug, Clone)]
pub struct Caller {
    /// Who the caller is; `None` with `--auth=none`, where nobody is asked.
    pub user: Option<UserInfo>,
    /// How pass-through presents the caller upstream.
    pub credential: Credential,
}

/// The user named by a client certificate the TLS layer verified against
/// the client CA: the subject's common name is the username, its
/// organizations the groups, as kube-apiserver's x509 authenticator reads it.
#[derive(Debug, Clone)]
pub struct PeerCertificate(pub UserInfo);
