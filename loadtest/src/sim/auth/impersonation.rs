//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-<key>` headers), read as kube-apiserver's
//! `WithImpersonation` filter reads it (`endpoints/filters/impersonation.go`):
//! `buildImpersonationRequests` turns the headers into Go `ObjectReference`s,
//! one per thing impersonated; each is authorized for the requester as verb
//! `impersonate` on the resource its kind names (`users`, `serviceaccounts`
//! in its namespace, `groups`, `userextras/<key>`, `uids`), and the request
//! then runs as exactly the user the references describe (their groups only,
//! plus `system:authenticated`).
//!
//! Written from that Go code and the `edges` corpus (its `imp-*` cases), not
//! from kubecache's reading of the same filter: the errors are Go's `%v` of
//! the references, made by printing the struct as Go prints one.

use std::collections::BTreeMap;

use http::HeaderMap;
use kubecache_wire::Status;

use super::attributes::{
    ANONYMOUS, AUTHENTICATED, Attributes, ResourceAttributes, UNAUTHENTICATED, UserInfo,
};
use super::policy::Policy;

/// `authenticationv1.ImpersonateUserHeader` and its kin, as the `http`
/// crate names them (lower case).
const IMPERSONATE_USER_HEADER: &str = "impersonate-user";
const IMPERSONATE_GROUP_HEADER: &str = "impersonate-group";
const IMPERSONATE_UID_HEADER: &str = "impersonate-uid";
const IMPERSONATE_USER_EXTRA_HEADER_PREFIX: &str = "impersonate-extra-";

/// `authenticationv1.SchemeGroupVersion.String()`.
const AUTHENTICATION_V1: &str = "authentication.k8s.io/v1";

/// Go's `core/v1.ObjectReference`, its fields in declaration order: what
/// `buildImpersonationRequests` makes of each thing a request asks to
/// impersonate. It sets `Kind` and `Name` always, `Namespace` for a
/// service account, `APIVersion` (`authentication.k8s.io/v1`) for a user
/// extra and a UID, and `FieldPath` to a user extra's key; `UID` and
/// `ResourceVersion` stay empty.
#[derive(Debug, Clone, Default)]
struct ObjectReference {
    kind: &'static str,
    namespace: String,
    name: String,
    uid: String,
    api_version: String,
    resource_version: String,
    field_path: String,
}

impl ObjectReference {
    /// Go's `%v` of the struct: its fields' values in declaration order,
    /// one space between each (empty ones too), inside braces.
    fn go_v(&self) -> String {
        let fields: [&str; 7] = [
            self.kind,
            &self.namespace,
            &self.name,
            &self.uid,
            &self.api_version,
            &self.resource_version,
            &self.field_path,
        ];
        format!("{{{}}}", fields.join(" "))
    }

    /// The group and version of `APIVersion`, as `schema.ParseGroupVersion`
    /// splits it: `group/version`, a bare version in the core group, or
    /// neither when it is empty.
    fn group_version(&self) -> (&str, &str) {
        match self.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", self.api_version.as_str()),
        }
    }
}

/// Go's `%v` of a `[]ObjectReference`: each element's `%v`, one space
/// between, inside brackets.
fn go_v_list(references: &[ObjectReference]) -> String {
    let elements: Vec<String> = references.iter().map(ObjectReference::go_v).collect();
    format!("[{}]", elements.join(" "))
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
/// it has none. `WithImpersonation`'s loop: each reference is authorized in
/// turn (the first refused is the 403) and adds its part of the user.
pub fn impersonate(
    policy: &Policy,
    requester: &UserInfo,
    headers: &HeaderMap,
) -> Result<Option<UserInfo>, Refusal> {
    let impersonation_requests = build_impersonation_requests(headers).map_err(Refusal::Invalid)?;
    if impersonation_requests.is_empty() {
        return Ok(None);
    }
    let groups_specified = !header_values(headers, IMPERSONATE_GROUP_HEADER).is_empty();
    let mut username = String::new();
    let mut groups: Vec<String> = Vec::new();
    let mut user_extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut uid = String::new();
    for reference in &impersonation_requests {
        let (api_group, api_version) = reference.group_version();
        let mut acting_as = ResourceAttributes {
            group: api_group.to_string(),
            version: api_version.to_string(),
            namespace: reference.namespace.clone(),
            name: reference.name.clone(),
            ..ResourceAttributes::default()
        };
        match reference.kind {
            "ServiceAccount" => {
                acting_as.resource = "serviceaccounts".into();
                // `serviceaccount.MakeUsername`, `MakeGroupNames`.
                username = format!(
                    "system:serviceaccount:{}:{}",
                    reference.namespace, reference.name
                );
                if !groups_specified {
                    groups = vec![
                        "system:serviceaccounts".to_string(),
                        format!("system:serviceaccounts:{}", reference.namespace),
                    ];
                }
            }
            "User" => {
                acting_as.resource = "users".into();
                username = reference.name.clone();
            }
            "Group" => {
                acting_as.resource = "groups".into();
                groups.push(reference.name.clone());
            }
            "UserExtra" => {
                acting_as.resource = "userextras".into();
                acting_as.subresource = reference.field_path.clone();
                let values = user_extra.entry(reference.field_path.clone()).or_default();
                values.push(reference.name.clone());
            }
            "UID" => {
                acting_as.resource = "uids".into();
                uid = reference.name.clone();
            }
            kind => unreachable!("buildImpersonationRequests makes no {kind} reference"),
        }
        let check = Attributes {
            user: requester.clone(),
            verb: "impersonate".into(),
            resource: Some(acting_as),
            path: String::new(),
        };
        let decision = policy.authorize(&check);
        if !decision.allowed {
            let status = check.forbidden(&decision.reason);
            return Err(Refusal::Forbidden(Box::new(status)));
        }
    }
    // `system:authenticated` joins unless either it or
    // `system:unauthenticated` is there; for `system:anonymous`,
    // `system:unauthenticated` joins unless it is there.
    let (joins, unless) = if username == ANONYMOUS {
        (UNAUTHENTICATED, &[UNAUTHENTICATED][..])
    } else {
        (AUTHENTICATED, &[AUTHENTICATED, UNAUTHENTICATED][..])
    };
    if !groups.iter().any(|group| unless.contains(&group.as_str())) {
        groups.push(joins.to_string());
    }
    Ok(Some(UserInfo {
        username,
        uid,
        groups,
        extra: user_extra,
    }))
}

/// `buildImpersonationRequests`: a reference for the user (the first
/// `Impersonate-User`, a service account when it names one), one per
/// group, one per value of each extra (the keys unescaped; Go ranges over
/// its header map in an order of its own, the sim takes the keys sorted),
/// one for the UID (the first `Impersonate-Uid`). Groups, extras or a UID
/// without a user are refused with Go's error, the references in `%v`.
fn build_impersonation_requests(headers: &HeaderMap) -> Result<Vec<ObjectReference>, String> {
    let mut impersonation_requests = Vec::new();

    let requested_user = header_get(headers, IMPERSONATE_USER_HEADER);
    let has_user = !requested_user.is_empty();
    if has_user {
        let reference = match split_username(&requested_user) {
            Some((namespace, name)) => ObjectReference {
                kind: "ServiceAccount",
                namespace,
                name,
                ..ObjectReference::default()
            },
            None => ObjectReference {
                kind: "User",
                name: requested_user,
                ..ObjectReference::default()
            },
        };
        impersonation_requests.push(reference);
    }

    let mut has_groups = false;
    for group in header_values(headers, IMPERSONATE_GROUP_HEADER) {
        has_groups = true;
        impersonation_requests.push(ObjectReference {
            kind: "Group",
            name: group,
            ..ObjectReference::default()
        });
    }

    // By unescaped key; of two headers whose keys unescape alike, the
    // later's values.
    let mut extra_headers = BTreeMap::new();
    for header_name in headers.keys() {
        let Some(encoded) = header_name
            .as_str()
            .strip_prefix(IMPERSONATE_USER_EXTRA_HEADER_PREFIX)
        else {
            continue;
        };
        let values = header_values(headers, header_name.as_str());
        extra_headers.insert(unescape_extra_key(encoded), values);
    }
    let has_user_extra = !extra_headers.is_empty();
    for (extra_key, values) in extra_headers {
        for value in values {
            impersonation_requests.push(ObjectReference {
                kind: "UserExtra",
                api_version: AUTHENTICATION_V1.to_string(),
                name: value,
                field_path: extra_key.clone(),
                ..ObjectReference::default()
            });
        }
    }

    let requested_uid = header_get(headers, IMPERSONATE_UID_HEADER);
    let has_uid = !requested_uid.is_empty();
    if has_uid {
        impersonation_requests.push(ObjectReference {
            kind: "UID",
            name: requested_uid,
            api_version: AUTHENTICATION_V1.to_string(),
            ..ObjectReference::default()
        });
    }

    if (has_groups || has_user_extra || has_uid) && !has_user {
        return Err(format!(
            "requested {} without impersonating a user",
            go_v_list(&impersonation_requests)
        ));
    }
    Ok(impersonation_requests)
}

/// Go's `http.Header` values of `name`, in order: strings of the bytes as
/// they came.
fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    let mut values = Vec::new();
    for value in headers.get_all(name) {
        values.push(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    values
}

/// Go's `Header.Get`: the first value, empty when there is none.
fn header_get(headers: &HeaderMap, name: &str) -> String {
    header_values(headers, name)
        .into_iter()
        .next()
        .unwrap_or_default()
}

/// `system:serviceaccount:{namespace}:{name}`, split, when the namespace
/// is a DNS label and the name a DNS subdomain (`serviceaccount.SplitUsername`).
pub(super) fn split_username(user: &str) -> Option<(String, String)> {
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
fn unescape_extra_key(key: &str) -> String {
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
    use http::{HeaderName, HeaderValue};

    use super::*;
    use crate::sim::auth::{Rule, Subject};

    /// Headers as a request's head writes them: a `Name: value` a line.
    fn headers(head: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        for line in head.lines().map(str::trim).filter(|line| !line.is_empty()) {
            let (name, value) = line.split_once(':').expect("Name: value");
            map.append(
                HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
                HeaderValue::from_str(value.trim()).expect("a header value"),
            );
        }
        map
    }

    const PROXY: &str = "proxy";

    fn requester() -> UserInfo {
        UserInfo {
            username: PROXY.into(),
            groups: vec![AUTHENTICATED.into()],
            ..UserInfo::default()
        }
    }

    /// `proxy` may impersonate `resources` (in both groups impersonation
    /// uses), nothing else.
    fn policy(resources: &[&str]) -> Policy {
        let role = Rule::resources(&["impersonate"], &["", "authentication.k8s.io"], resources);
        Policy::new()
            .cluster_role("impersonator", vec![role])
            .cluster_binding("proxy", "impersonator", vec![Subject::User(PROXY.into())])
    }

    fn run_as(policy: &Policy, head: &str) -> Result<Option<UserInfo>, Refusal> {
        impersonate(policy, &requester(), &headers(head))
    }

    #[test]
    fn an_object_reference_prints_as_go_prints_the_struct() {
        let every_field = ObjectReference {
            kind: "Kind",
            namespace: "ns".into(),
            name: "name".into(),
            uid: "uid".into(),
            api_version: "g/v".into(),
            resource_version: "7".into(),
            field_path: "path".into(),
        };
        assert_eq!(every_field.go_v(), "{Kind ns name uid g/v 7 path}");
        let user = ObjectReference {
            kind: "User",
            name: "alice".into(),
            ..ObjectReference::default()
        };
        assert_eq!(user.go_v(), "{User  alice    }");
        assert_eq!(
            go_v_list(&[user, every_field]),
            "[{User  alice    } {Kind ns name uid g/v 7 path}]"
        );
        assert_eq!(go_v_list(&[]), "[]");
    }

    #[test]
    fn references_without_a_user_are_the_recorded_500s() {
        let invalid = |head: &str| match run_as(&policy(&["*"]), head) {
            Err(Refusal::Invalid(error)) => error,
            other => panic!("not refused as invalid: {other:?}"),
        };
        // edges/bodies/imp-admin-group-only-list.txt, -uid-only-ssr.txt,
        // -extra-only-ssr.txt.
        assert_eq!(
            invalid("Impersonate-Group: team-x"),
            "requested [{Group  team-x    }] without impersonating a user"
        );
        assert_eq!(
            invalid("Impersonate-Uid: uid-x"),
            "requested [{UID  uid-x  authentication.k8s.io/v1  }] without impersonating a user"
        );
        assert_eq!(
            invalid("Impersonate-Extra-Scopes: view"),
            "requested [{UserExtra  view  authentication.k8s.io/v1  scopes}] without impersonating a user"
        );
        assert_eq!(
            invalid("Impersonate-Uid: u\nImpersonate-Group: g"),
            "requested [{Group  g    } {UID  u  authentication.k8s.io/v1  }] without impersonating a user"
        );
    }

    #[test]
    fn the_request_runs_as_exactly_the_impersonated_user() {
        let p = policy(&["users", "groups", "userextras/scopes", "uids"]);
        let user = run_as(
            &p,
            "Impersonate-User: alice
             Impersonate-Group: devs
             Impersonate-Group: ops
             Impersonate-Extra-Scopes: view
             Impersonate-Uid: u-1",
        );
        let user = user.unwrap().unwrap();
        assert_eq!(
            (user.username.as_str(), user.uid.as_str()),
            ("alice", "u-1")
        );
        assert_eq!(user.groups, ["devs", "ops", AUTHENTICATED]);
        assert_eq!(user.extra["scopes"], ["view"]);
        assert_eq!(run_as(&p, ""), Ok(None));
        assert_eq!(run_as(&p, "Impersonate-User:"), Ok(None));
        let anonymous = run_as(&p, "Impersonate-User: system:anonymous");
        assert_eq!(anonymous.unwrap().unwrap().groups, [UNAUTHENTICATED]);
        let unauthenticated = run_as(
            &p,
            "Impersonate-User: bob\nImpersonate-Group: system:unauthenticated",
        );
        assert_eq!(unauthenticated.unwrap().unwrap().groups, [UNAUTHENTICATED]);
    }

    #[test]
    fn each_impersonation_needs_its_own_permission() {
        let p = policy(&["users"]);
        let forbidden = |head: &str| match run_as(&p, head) {
            Err(Refusal::Forbidden(status)) if status.code == 403 => status.message,
            other => panic!("not a 403: {other:?}"),
        };
        assert_eq!(
            forbidden("Impersonate-User: alice\nImpersonate-Group: admins"),
            r#"groups "admins" is forbidden: User "proxy" cannot impersonate resource "groups" in API group "" at the cluster scope"#
        );
        assert_eq!(
            forbidden("Impersonate-User: alice\nImpersonate-Uid: u-1"),
            r#"uids.authentication.k8s.io "u-1" is forbidden: User "proxy" cannot impersonate resource "uids" in API group "authentication.k8s.io" at the cluster scope"#
        );
        assert_eq!(
            forbidden("Impersonate-User: alice\nImpersonate-Extra-Scopes: view"),
            r#"userextras.authentication.k8s.io "view" is forbidden: User "proxy" cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster scope"#
        );
        assert_eq!(
            forbidden("Impersonate-User: system:serviceaccount:ns:bot"),
            r#"serviceaccounts "bot" is forbidden: User "proxy" cannot impersonate resource "serviceaccounts" in API group "" in the namespace "ns""#
        );
    }

    #[test]
    fn only_valid_service_account_names_are_service_accounts() {
        assert_eq!(
            split_username("system:serviceaccount:team-a:ns.reader-1"),
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
            assert_eq!(split_username(user), None, "{user}");
        }
    }

    #[test]
    fn a_service_account_gets_its_groups_and_extra_keys_are_unescaped() {
        let p = Policy::new()
            .cluster_role("all", vec![Rule::resources(&["*"], &["*"], &["*"])])
            .cluster_binding("proxy", "all", vec![Subject::User(PROXY.into())]);
        let user = run_as(
            &p,
            "Impersonate-User: system:serviceaccount:ns:bot
             Impersonate-Extra-example.com%2fteam: a",
        );
        let user = user.unwrap().unwrap();
        assert_eq!(user.username, "system:serviceaccount:ns:bot");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                AUTHENTICATED
            ]
        );
        assert_eq!(user.extra["example.com/team"], ["a"]);
        let with_group = run_as(
            &p,
            "Impersonate-User: system:serviceaccount:ns:bot\nImpersonate-Group: g",
        );
        assert_eq!(with_group.unwrap().unwrap().groups, ["g", AUTHENTICATED]);
    }
}
