//! Impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-<key>`), as
//! kube-apiserver's `WithImpersonation` filter reads it: what the headers
//! ask to become, each part of which the authenticated caller must be
//! allowed to `impersonate`, and the user the request then runs as.
//!
//! The filter runs after authentication and before authorization, on every
//! request: kubecache applies it to what it answers itself (see
//! [`super::Auth::authorize`]) and to what a certificate caller passes
//! through (kubecache impersonates them upstream). A bearer caller's
//! headers go upstream as they came, for the API server to judge.

use std::collections::BTreeMap;

use axum::http::HeaderMap;

use super::{ResourceAttributes, UserInfo};

/// What every impersonation header's name begins with.
const PREFIX: &str = "impersonate-";
const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

const ANONYMOUS: &str = "system:anonymous";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";

/// What a request asks to act as: its parts in kube-apiserver's order (the
/// user, the groups, the extras, the UID), at least a user among them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonation {
    parts: Vec<Part>,
}

/// One thing impersonated, each authorized on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Impersonation {
    /// What `headers` ask to impersonate: `None` for nothing.
    ///
    /// # Errors
    ///
    /// Groups, extras or a UID without a user, which kube-apiserver refuses
    /// with a plain-text 500: the error it writes (`requested [...] without
    /// impersonating a user`, listing the parts as Go prints them).
    pub fn of(headers: &HeaderMap) -> Result<Option<Impersonation>, String> {
        // Almost no request impersonates: one look at the names (stored
        // lowercase) before four lookups by name.
        if !headers.keys().any(|name| name.as_str().starts_with(PREFIX)) {
            return Ok(None);
        }
        let values = |name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .collect()
        };
        let first = |name: &str| values(name).into_iter().next().filter(|v| !v.is_empty());
        let mut parts = Vec::new();
        let user = first(USER);
        if let Some(user) = &user {
            parts.push(match service_account(user) {
                Some((namespace, name)) => Part::ServiceAccount { namespace, name },
                None => Part::User(user.clone()),
            });
        }
        parts.extend(values(GROUP).into_iter().map(Part::Group));
        let mut extras: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in headers.keys() {
            if let Some(key) = name.as_str().strip_prefix(EXTRA) {
                extras.insert(unescape(key), values(name.as_str()));
            }
        }
        for (key, values) in extras {
            parts.extend(values.into_iter().map(|value| Part::Extra {
                key: key.clone(),
                value,
            }));
        }
        if let Some(uid) = first(UID) {
            parts.push(Part::Uid(uid));
        }
        if parts.is_empty() {
            return Ok(None);
        }
        if user.is_none() {
            let listed: Vec<String> = parts.iter().map(Part::go_format).collect();
            return Err(format!(
                "requested [{}] without impersonating a user",
                listed.join(" ")
            ));
        }
        Ok(Some(Impersonation { parts }))
    }

    /// What the caller must be allowed, in order: verb `impersonate` on
    /// each part.
    pub fn checks(&self) -> impl Iterator<Item = ResourceAttributes<'_>> {
        self.parts.iter().map(Part::attributes)
    }

    /// The user the request runs as: exactly what the headers say, a
    /// service account's groups when no group is given, and
    /// `system:authenticated` (`system:unauthenticated` for
    /// `system:anonymous`) unless the groups say either already.
    pub fn user(&self) -> UserInfo {
        let mut user = UserInfo::default();
        let groups_given = self.parts.iter().any(|p| matches!(p, Part::Group(_)));
        for part in &self.parts {
            match part {
                Part::User(name) => user.username = name.clone(),
                Part::ServiceAccount { namespace, name } => {
                    user.username = format!("system:serviceaccount:{namespace}:{name}");
                    if !groups_given {
                        user.groups = vec![
                            "system:serviceaccounts".into(),
                            format!("system:serviceaccounts:{namespace}"),
                        ];
                    }
                }
                Part::Group(group) => user.groups.push(group.clone()),
                Part::Extra { key, value } => {
                    user.extra
                        .entry(key.clone())
                        .or_default()
                        .push(value.clone());
                }
                Part::Uid(uid) => user.uid = uid.clone(),
            }
        }
        let has = |group: &str| user.groups.iter().any(|g| g == group);
        if user.username == ANONYMOUS {
            if !has(UNAUTHENTICATED) {
                user.groups.push(UNAUTHENTICATED.into());
            }
        } else if !has(AUTHENTICATED) && !has(UNAUTHENTICATED) {
            user.groups.push(AUTHENTICATED.into());
        }
        user
    }
}

impl Part {
    /// `impersonate` of this part, as kube-apiserver asks its authorizer.
    fn attributes(&self) -> ResourceAttributes<'_> {
        const AUTHENTICATION: &str = "authentication.k8s.io";
        let (group, resource, subresource, namespace, name) = match self {
            Part::User(name) => ("", "users", "", "", name),
            Part::ServiceAccount { namespace, name } => {
                ("", "serviceaccounts", "", namespace.as_str(), name)
            }
            Part::Group(name) => ("", "groups", "", "", name),
            Part::Extra { key, value } => (AUTHENTICATION, "userextras", key.as_str(), "", value),
            Part::Uid(uid) => (AUTHENTICATION, "uids", "", "", uid),
        };
        ResourceAttributes {
            verb: "impersonate",
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.as_str().into(),
        }
    }

    /// Go's `%v` of the `ObjectReference` kube-apiserver builds for it
    /// (kind, namespace, name, uid, apiVersion, resourceVersion, fieldPath).
    fn go_format(&self) -> String {
        const V1: &str = "authentication.k8s.io/v1";
        match self {
            Part::User(name) => format!("{{User  {name}    }}"),
            Part::ServiceAccount { namespace, name } => {
                format!("{{ServiceAccount {namespace} {name}    }}")
            }
            Part::Group(name) => format!("{{Group  {name}    }}"),
            Part::Extra { key, value } => format!("{{UserExtra  {value}  {V1}  {key}}}"),
            Part::Uid(uid) => format!("{{UID  {uid}  {V1}  }}"),
        }
    }
}

/// `system:serviceaccount:{namespace}:{name}`, split as kube-apiserver's
/// `serviceaccount.SplitUsername` splits it.
pub(super) fn service_account(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':'))
        .then(|| (namespace.to_string(), name.to_string()))
}

/// An extra's key from its header name: lower case (as Go canonicalizes
/// it) and percent-decoded; an invalid escape leaves it as it came.
fn unescape(key: &str) -> String {
    percent_encoding::percent_decode_str(key)
        .decode_utf8()
        .map_or_else(|_| key.to_string(), |decoded| decoded.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    fn of(pairs: &[(&str, &str)]) -> Result<Option<Impersonation>, String> {
        Impersonation::of(&headers(pairs))
    }

    #[test]
    fn no_header_or_an_empty_user_is_no_impersonation() {
        assert_eq!(of(&[]), Ok(None));
        assert_eq!(of(&[("Impersonate-User", "")]), Ok(None));
    }

    #[test]
    fn parts_without_a_user_are_the_api_server_s_500() {
        // Recorded: imp-admin-group-only-list, imp-admin-uid-only-ssr,
        // imp-admin-extra-only-ssr.
        assert_eq!(
            of(&[("Impersonate-Group", "team-x")]),
            Err("requested [{Group  team-x    }] without impersonating a user".into())
        );
        assert_eq!(
            of(&[("Impersonate-Uid", "uid-x")]),
            Err(
                "requested [{UID  uid-x  authentication.k8s.io/v1  }] without impersonating a user"
                    .into()
            )
        );
        assert_eq!(
            of(&[("Impersonate-Extra-scopes", "view")]),
            Err("requested [{UserExtra  view  authentication.k8s.io/v1  scopes}] without impersonating a user".into())
        );
    }

    #[test]
    fn the_user_is_exactly_what_the_headers_say_with_the_implied_group() {
        let user = |pairs: &[(&str, &str)]| of(pairs).unwrap().unwrap().user();
        let alice = user(&[("Impersonate-User", "alice"), ("Impersonate-User", "eve")]);
        assert_eq!(alice.username, "alice", "the first user counts");
        assert_eq!(alice.groups, ["system:authenticated"]);
        let full = user(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "team-x"),
            ("Impersonate-Group", "team-y"),
            ("Impersonate-Uid", "uid-1"),
            ("Impersonate-Extra-scopes", "view"),
            ("Impersonate-Extra-scopes", "edit"),
            ("Impersonate-Extra-example.com%2Fteam", "payments"),
        ]);
        assert_eq!(full.groups, ["team-x", "team-y", "system:authenticated"]);
        assert_eq!(full.uid, "uid-1");
        assert_eq!(full.extra["scopes"], ["view", "edit"]);
        assert_eq!(full.extra["example.com/team"], ["payments"]);
        let sa = user(&[("Impersonate-User", "system:serviceaccount:team-a:ns-reader")]);
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:team-a",
                "system:authenticated"
            ]
        );
        let anonymous = user(&[("Impersonate-User", "system:anonymous")]);
        assert_eq!(anonymous.groups, ["system:unauthenticated"]);
        let unauthenticated = user(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "system:unauthenticated"),
        ]);
        assert_eq!(unauthenticated.groups, ["system:unauthenticated"]);
    }

    #[test]
    fn each_part_is_checked_as_impersonate_in_order() {
        let impersonation = of(&[
            ("Impersonate-Uid", "uid-1"),
            ("Impersonate-Extra-scopes", "view"),
            ("Impersonate-Group", "team-x"),
            ("Impersonate-User", "system:serviceaccount:team-a:ns-reader"),
        ])
        .unwrap()
        .unwrap();
        let checks: Vec<_> = impersonation
            .checks()
            .map(|c| {
                (
                    c.verb,
                    c.group,
                    c.resource,
                    c.subresource,
                    c.namespace,
                    c.name,
                )
            })
            .collect();
        let s = |v: &'static str| std::borrow::Cow::Borrowed(v);
        assert_eq!(
            checks,
            [
                (
                    "impersonate",
                    s(""),
                    s("serviceaccounts"),
                    s(""),
                    s("team-a"),
                    s("ns-reader")
                ),
                ("impersonate", s(""), s("groups"), s(""), s(""), s("team-x")),
                (
                    "impersonate",
                    s("authentication.k8s.io"),
                    s("userextras"),
                    s("scopes"),
                    s(""),
                    s("view")
                ),
                (
                    "impersonate",
                    s("authentication.k8s.io"),
                    s("uids"),
                    s(""),
                    s(""),
                    s("uid-1")
                ),
            ]
        );
    }
}
