//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-<key>` headers), as kube-apiserver's
//! `WithImpersonation` filter does it: each thing impersonated is authorized
//! for the requester as verb `impersonate` on `users` (or `serviceaccounts`
//! in its namespace), `groups`, `userextras/<key>` or `uids`, and the
//! request then runs as exactly the user the headers describe (their groups
//! only, plus `system:authenticated`).

use std::collections::BTreeMap;

use http::HeaderMap;
use kubecache_wire::Status;

use super::attributes::{
    ANONYMOUS, AUTHENTICATED, Attributes, ResourceAttributes, UNAUTHENTICATED, UserInfo,
};
use super::policy::Policy;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA: &str = "impersonate-extra-";

/// One thing a request asks to impersonate.
enum Request {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Request {
    /// What the requester must be allowed to `impersonate` for it.
    fn resource(&self) -> ResourceAttributes {
        let (group, resource, subresource, namespace, name) = match self {
            Request::User(name) => ("", "users", "", "", name),
            Request::ServiceAccount { namespace, name } => {
                ("", "serviceaccounts", "", namespace.as_str(), name)
            }
            Request::Group(name) => ("", "groups", "", "", name),
            Request::Extra { key, value } => (
                "authentication.k8s.io",
                "userextras",
                key.as_str(),
                "",
                value,
            ),
            Request::Uid(uid) => ("authentication.k8s.io", "uids", "", "", uid),
        };
        ResourceAttributes {
            namespace: namespace.into(),
            group: group.into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.clone(),
        }
    }

    /// Go's `%v` of the `ObjectReference` kube-apiserver builds for it.
    fn go_format(&self) -> String {
        const V1: &str = "authentication.k8s.io/v1";
        match self {
            Request::User(name) => format!("{{User  {name}    }}"),
            Request::ServiceAccount { namespace, name } => {
                format!("{{ServiceAccount {namespace} {name}    }}")
            }
            Request::Group(name) => format!("{{Group  {name}    }}"),
            Request::Extra { key, value } => format!("{{UserExtra  {value}  {V1}  {key}}}"),
            Request::Uid(uid) => format!("{{UID  {uid}  {V1}  }}"),
        }
    }
}

/// Why a request may not run as the user its headers describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The requester may not impersonate something asked for: the 403.
    Forbidden(Box<Status>),
    /// Groups, extras or a UID without a user: the error kube-apiserver
    /// answers with its plain-text 500.
    Invalid(String),
}

/// The user a request runs as after its impersonation headers: `None` when
/// it has none.
pub fn impersonate(
    policy: &Policy,
    requester: &UserInfo,
    headers: &HeaderMap,
) -> Result<Option<UserInfo>, Refusal> {
    let requests = requests(headers);
    if requests.is_empty() {
        return Ok(None);
    }
    if !requests
        .iter()
        .any(|r| matches!(r, Request::User(_) | Request::ServiceAccount { .. }))
    {
        let listed: Vec<String> = requests.iter().map(Request::go_format).collect();
        return Err(Refusal::Invalid(format!(
            "requested [{}] without impersonating a user",
            listed.join(" ")
        )));
    }
    let mut user = UserInfo::default();
    let mut groups_given = false;
    for request in &requests {
        let check = Attributes {
            user: requester.clone(),
            verb: "impersonate".into(),
            resource: Some(request.resource()),
            path: String::new(),
        };
        let decision = policy.authorize(&check);
        if !decision.allowed {
            return Err(Refusal::Forbidden(Box::new(
                check.forbidden(&decision.reason),
            )));
        }
        match request {
            Request::User(name) => user.username = name.clone(),
            Request::ServiceAccount { namespace, name } => {
                user.username = format!("system:serviceaccount:{namespace}:{name}");
            }
            Request::Group(group) => {
                groups_given = true;
                user.groups.push(group.clone());
            }
            Request::Extra { key, value } => {
                user.extra
                    .entry(key.clone())
                    .or_default()
                    .push(value.clone());
            }
            Request::Uid(uid) => user.uid = uid.clone(),
        }
    }
    if let Some(Request::ServiceAccount { namespace, .. }) = requests.first()
        && !groups_given
    {
        user.groups = vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
        ];
    }
    let implied = if user.username == ANONYMOUS {
        UNAUTHENTICATED
    } else {
        AUTHENTICATED
    };
    let has_either = user
        .groups
        .iter()
        .any(|g| g == implied || (implied == AUTHENTICATED && g == UNAUTHENTICATED));
    if !has_either {
        user.groups.push(implied.into());
    }
    Ok(Some(user))
}

/// What the headers ask for, in kube-apiserver's order: the user (the
/// first header), the groups, the extras (one request per value; by key,
/// where Go takes them in a map's random order), the UID (the first
/// header). Values are Go's strings of the header's bytes.
fn requests(headers: &HeaderMap) -> Vec<Request> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    };
    let mut requests = Vec::new();
    if let Some(user) = values(USER).into_iter().next().filter(|u| !u.is_empty()) {
        requests.push(match service_account(&user) {
            Some((namespace, name)) => Request::ServiceAccount { namespace, name },
            None => Request::User(user),
        });
    }
    requests.extend(values(GROUP).into_iter().map(Request::Group));
    let mut extras: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in headers.keys() {
        if let Some(key) = name.as_str().strip_prefix(EXTRA) {
            extras.insert(unescape(key), values(name.as_str()));
        }
    }
    for (key, values) in extras {
        requests.extend(values.into_iter().map(|value| Request::Extra {
            key: key.clone(),
            value,
        }));
    }
    if let Some(uid) = values(UID).into_iter().next().filter(|u| !u.is_empty()) {
        requests.push(Request::Uid(uid));
    }
    requests
}

/// `system:serviceaccount:{namespace}:{name}`, split, when the namespace
/// is a DNS label and the name a DNS subdomain (`serviceaccount.SplitUsername`).
fn service_account(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    let label = |s: &str| {
        let alphanumeric =
            |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        alphanumeric(s.chars().next())
            && alphanumeric(s.chars().last())
            && s.chars().all(|c| c == '-' || alphanumeric(Some(c)))
    };
    (namespace.len() <= 63 && label(namespace) && name.len() <= 253 && name.split('.').all(label))
        .then(|| (namespace.to_string(), name.to_string()))
}

/// Percent-decoding of an extra's key (header names cannot carry every
/// character), as Go's `url.PathUnescape`; an invalid escape leaves the key
/// as it came.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(byte) = hex else {
                return key.to_string();
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::auth::{Rule, Subject};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    fn requester() -> UserInfo {
        UserInfo {
            username: "proxy".into(),
            groups: vec![AUTHENTICATED.into()],
            ..UserInfo::default()
        }
    }

    fn policy(resources: &[&str]) -> Policy {
        Policy::new()
            .cluster_role(
                "impersonator",
                vec![Rule::resources(
                    &["impersonate"],
                    &["", "authentication.k8s.io"],
                    resources,
                )],
            )
            .cluster_binding("proxy", "impersonator", vec![Subject::User("proxy".into())])
    }

    #[test]
    fn the_request_runs_as_exactly_the_impersonated_user() {
        let p = policy(&["users", "groups", "userextras/scopes", "uids"]);
        let h = headers(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Scopes", "view"),
            ("Impersonate-Uid", "u-1"),
        ]);
        let user = impersonate(&p, &requester(), &h).unwrap().unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(user.groups, ["devs", "ops", AUTHENTICATED]);
        assert_eq!(user.extra["scopes"], ["view"]);
        assert_eq!(user.uid, "u-1");
        assert_eq!(impersonate(&p, &requester(), &HeaderMap::new()), Ok(None));
    }

    /// The 403's message, for a refused impersonation.
    fn forbidden(p: &Policy, h: &HeaderMap) -> String {
        match impersonate(p, &requester(), h) {
            Err(Refusal::Forbidden(status)) => {
                assert_eq!(status.code, 403);
                status.message
            }
            other => panic!("not a 403: {other:?}"),
        }
    }

    #[test]
    fn each_impersonation_needs_its_own_permission() {
        let p = policy(&["users"]);
        let h = headers(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "admins"),
        ]);
        assert_eq!(
            forbidden(&p, &h),
            r#"groups "admins" is forbidden: User "proxy" cannot impersonate resource "groups" in API group "" at the cluster scope"#
        );
        let h = headers(&[("Impersonate-User", "alice"), ("Impersonate-Uid", "u-1")]);
        assert_eq!(
            forbidden(&p, &h),
            r#"uids.authentication.k8s.io "u-1" is forbidden: User "proxy" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope"#
        );
        let h = headers(&[("Impersonate-User", "system:serviceaccount:ns:bot")]);
        assert_eq!(
            forbidden(&p, &h),
            r#"serviceaccounts "bot" is forbidden: User "proxy" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns""#
        );
    }

    #[test]
    fn groups_without_a_user_are_invalid() {
        let p = policy(&["*"]);
        let h = headers(&[("Impersonate-Group", "devs")]);
        assert_eq!(
            impersonate(&p, &requester(), &h),
            Err(Refusal::Invalid(
                "requested [{Group  devs    }] without impersonating a user".into()
            ))
        );
    }

    #[test]
    fn only_valid_service_account_names_are_service_accounts() {
        assert_eq!(
            service_account("system:serviceaccount:team-a:ns.reader-1"),
            Some(("team-a".into(), "ns.reader-1".into()))
        );
        for user in [
            "system:serviceaccount:Team:bot",
            "system:serviceaccount:ns:bot:x",
            "system:serviceaccount:ns:-bot",
            "system:serviceaccount:ns.x:bot",
            "system:serviceaccount::bot",
            "system:serviceaccount:ns:",
        ] {
            assert_eq!(service_account(user), None, "{user}");
        }
    }

    #[test]
    fn a_service_account_gets_its_groups_and_extra_keys_are_unescaped() {
        let p = Policy::new()
            .cluster_role("all", vec![Rule::resources(&["*"], &["*"], &["*"])])
            .cluster_binding("proxy", "all", vec![Subject::User("proxy".into())]);
        let h = headers(&[
            ("Impersonate-User", "system:serviceaccount:ns:bot"),
            ("Impersonate-Extra-example.com%2fteam", "a"),
        ]);
        let user = impersonate(&p, &requester(), &h).unwrap().unwrap();
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                AUTHENTICATED
            ]
        );
        assert_eq!(user.extra["example.com/team"], ["a"]);
    }
}
