//! Who asks to do what, as kube-apiserver's authorizers see a request
//! (`authorizer.Attributes`), and the 403 that refuses it.

use std::collections::BTreeMap;

use kubecache_wire::{Status, StatusDetails};

/// The user every request without credentials runs as.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group of every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of the anonymous user.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";

/// A user as authentication establishes it (`authentication.k8s.io/v1`
/// `UserInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// The name, e.g. `alice` or `system:serviceaccount:ns:name`.
    pub username: String,
    /// The UID, if the authenticator knows one.
    pub uid: String,
    /// The groups, `system:authenticated` included for authenticated users.
    pub groups: Vec<String>,
    /// Extra attributes, e.g. the pod a service-account token is bound to.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// `system:anonymous` in `system:unauthenticated`: a request without
    /// credentials.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            username: ANONYMOUS.into(),
            groups: vec![UNAUTHENTICATED.into()],
            ..UserInfo::default()
        }
    }
}

/// The object of a resource request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourceAttributes {
    /// The namespace, empty for cluster-scoped requests.
    pub namespace: String,
    /// The API group, empty for core.
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource, e.g. `status` or `log`.
    pub subresource: String,
    /// The object's name, empty for collections.
    pub name: String,
}

/// One request to authorize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, ... for resources; the lowercased
    /// HTTP method for other paths.
    pub verb: String,
    /// What is asked for, for resource requests.
    pub resource: Option<ResourceAttributes>,
    /// The URL path (what non-resource rules match).
    pub path: String,
}

impl Attributes {
    /// The 403 refusing this request, worded as kube-apiserver words it
    /// (`responsewriters.Forbidden` wrapped in `apierrors.NewForbidden`):
    /// `pods "p" is forbidden: User "u" cannot get resource "pods" in API
    /// group "" in the namespace "ns"`, or `forbidden: User "u" cannot get
    /// path "/x"`; a non-empty authorizer `reason` follows after `: `.
    pub fn forbidden(&self, reason: &str) -> Status {
        let user = &self.user.username;
        let verb = &self.verb;
        let (mut detail, details) = match &self.resource {
            None => (
                format!("User {user:?} cannot {verb} path {:?}", self.path),
                StatusDetails::default(),
            ),
            Some(r) => {
                let mut resource = r.resource.clone();
                if !r.subresource.is_empty() {
                    resource = format!("{resource}/{}", r.subresource);
                }
                let scope = if r.namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace {:?}", r.namespace)
                };
                let detail = format!(
                    "User {user:?} cannot {verb} resource {resource:?} in API group {:?} {scope}",
                    r.group
                );
                let details = StatusDetails {
                    name: r.name.clone(),
                    group: r.group.clone(),
                    kind: r.resource.clone(),
                    ..StatusDetails::default()
                };
                (detail, details)
            }
        };
        if !reason.is_empty() {
            detail = format!("{detail}: {reason}");
        }
        let qualified = match (details.group.as_str(), details.kind.as_str()) {
            ("", resource) => resource.to_string(),
            (group, resource) => format!("{resource}.{group}"),
        };
        let message = match (qualified.as_str(), details.name.as_str()) {
            ("", _) => format!("forbidden: {detail}"),
            (qualified, "") => format!("{qualified} is forbidden: {detail}"),
            (qualified, name) => format!("{qualified} {name:?} is forbidden: {detail}"),
        };
        let mut status = Status::failure(403, "Forbidden", message);
        status.details = Some(details);
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(verb: &str, resource: Option<ResourceAttributes>) -> Attributes {
        Attributes {
            user: UserInfo {
                username: "alice".into(),
                ..UserInfo::default()
            },
            verb: verb.into(),
            resource,
            path: "/healthz/etcd".into(),
        }
    }

    #[test]
    fn denials_are_worded_as_kube_apiserver_words_them() {
        let pod_log = ResourceAttributes {
            namespace: "ns".into(),
            version: "v1".into(),
            resource: "pods".into(),
            subresource: "log".into(),
            name: "p".into(),
            ..ResourceAttributes::default()
        };
        let status = request("get", Some(pod_log)).forbidden("");
        assert_eq!(
            status.message,
            r#"pods "p" is forbidden: User "alice" cannot get resource "pods/log" in API group "" in the namespace "ns""#
        );
        let details = status.details.unwrap();
        assert_eq!(
            (details.name.as_str(), details.kind.as_str()),
            ("p", "pods")
        );

        let widgets = ResourceAttributes {
            group: "example.com".into(),
            resource: "widgets".into(),
            ..ResourceAttributes::default()
        };
        assert_eq!(
            request("list", Some(widgets))
                .forbidden("RBAC: role.rbac.authorization.k8s.io \"r\" not found")
                .message,
            r#"widgets.example.com is forbidden: User "alice" cannot list resource "widgets" in API group "example.com" at the cluster scope: RBAC: role.rbac.authorization.k8s.io "r" not found"#
        );

        let status = request("get", None).forbidden("");
        assert_eq!(
            status.message,
            r#"forbidden: User "alice" cannot get path "/healthz/etcd""#
        );
        assert_eq!(status.details, Some(StatusDetails::default()));
    }
}
