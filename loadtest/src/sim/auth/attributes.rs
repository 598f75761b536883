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
    /// The 403 refusing this request, built as kube-apiserver's
    /// `responsewriters.Forbidden` builds it: [`Attributes::forbidden_message`],
    /// then `: ` and the authorizer's `reason` when it gave one, as the error
    /// of `apierrors.NewForbidden` for the request's group, resource and name
    /// ([`new_forbidden`]). E.g. `pods "p" is forbidden: User "u" cannot get
    /// resource "pods" in API group "" in the namespace "ns"`, or
    /// `forbidden: User "u" cannot get path "/x"`.
    pub fn forbidden(&self, reason: &str) -> Status {
        let msg = self.forbidden_message();
        let err_msg = match reason {
            "" => msg,
            reason => format!("{msg}: {reason}"),
        };
        // A non-resource request has no group, resource or name: `gr` is
        // empty.
        let none = ResourceAttributes::default();
        let attributes = self.resource.as_ref().unwrap_or(&none);
        let gr = GroupResource {
            group: &attributes.group,
            resource: &attributes.resource,
        };
        new_forbidden(&gr, &attributes.name, &err_msg)
    }

    /// kube-apiserver's `forbiddenMessage` (`endpoints/handlers/
    /// responsewriters/errors.go`): one `Sprintf` per kind of request, Go's
    /// `%q` (written here as Rust's `{:?}`) around the user, the resource
    /// (`resource/subresource` when there is a subresource), the group, the
    /// namespace and the path.
    fn forbidden_message(&self) -> String {
        let username = self.user.username.as_str();
        let Some(attributes) = &self.resource else {
            return format!(
                "User {username:?} cannot {} path {:?}",
                self.verb, self.path
            );
        };
        let resource = match attributes.subresource.as_str() {
            "" => attributes.resource.clone(),
            subresource => [attributes.resource.as_str(), subresource].join("/"),
        };
        let (verb, group, ns) = (&self.verb, &attributes.group, &attributes.namespace);
        if !ns.is_empty() {
            return format!(
                "User {username:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {ns:?}"
            );
        }
        format!(
            "User {username:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
        )
    }
}

/// Go's `schema.GroupResource`.
struct GroupResource<'a> {
    group: &'a str,
    resource: &'a str,
}

impl GroupResource<'_> {
    /// `Empty()`: neither a group nor a resource.
    fn is_empty(&self) -> bool {
        self.group.is_empty() && self.resource.is_empty()
    }

    /// `String()`: `resource.group`, the resource alone in the core group.
    fn string(&self) -> String {
        if self.group.is_empty() {
            return self.resource.to_string();
        }
        [self.resource, self.group].join(".")
    }
}

/// `apierrors.NewForbidden(qualifiedResource, name, err)`: its message
/// (`forbidden: err` for no resource, `gr is forbidden: err`, or
/// `gr "name" is forbidden: err`) and details (the group, the resource as
/// `kind`, the name), code 403, reason `Forbidden`.
fn new_forbidden(qualified_resource: &GroupResource<'_>, name: &str, err: &str) -> Status {
    let message = if qualified_resource.is_empty() {
        format!("forbidden: {err}")
    } else if name.is_empty() {
        format!("{} is forbidden: {err}", qualified_resource.string())
    } else {
        format!(
            "{} {name:?} is forbidden: {err}",
            qualified_resource.string()
        )
    };
    let mut status = Status::failure(403, "Forbidden", message);
    status.details = Some(StatusDetails {
        group: qualified_resource.group.to_string(),
        kind: qualified_resource.resource.to_string(),
        name: name.to_string(),
        ..StatusDetails::default()
    });
    status
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
