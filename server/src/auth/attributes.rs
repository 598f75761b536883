//! What a request asks to do, in the terms of a `SubjectAccessReview`, and
//! the 403 kube-apiserver answers when it may not.
//!
//! Attributes borrow what they are read from: a request's are compared with
//! the answers kept for others in place, and are copied (see
//! [`Attributes::into_owned`]) only to be kept.

use std::borrow::Cow;

use kubecache_reflector::upstream::ApiResource;
use kubecache_wire::{FieldSelector, Status, StatusDetails};

use super::UserInfo;

/// The attributes a request is authorized on (kube-apiserver's
/// `authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attributes<'a> {
    /// A request on a resource.
    Resource(ResourceAttributes<'a>),
    /// A request on any other path (`/metrics`, `/v1/status`).
    NonResource {
        /// `get`, `post` ...
        verb: &'static str,
        /// The request's path.
        path: Cow<'a, str>,
    },
}

/// A request on a resource: `verb` on `group/version` `resource`
/// (`/subresource`), in `namespace` (empty: cluster-wide), of `name`
/// (empty: any).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceAttributes<'a> {
    /// `get`, `list` or `watch` for what kubecache answers itself.
    pub verb: &'static str,
    /// API group, empty for core.
    pub group: Cow<'a, str>,
    /// API version.
    pub version: Cow<'a, str>,
    /// Plural resource name.
    pub resource: Cow<'a, str>,
    /// Subresource, if any.
    pub subresource: Cow<'a, str>,
    /// Namespace; empty for cluster-wide requests and cluster-scoped resources.
    pub namespace: Cow<'a, str>,
    /// Object name; empty for collections.
    pub name: Cow<'a, str>,
}

impl ResourceAttributes<'_> {
    /// Its own copy.
    pub fn into_owned(self) -> ResourceAttributes<'static> {
        let own = |s: Cow<'_, str>| Cow::Owned(s.into_owned());
        ResourceAttributes {
            verb: self.verb,
            group: own(self.group),
            version: own(self.version),
            resource: own(self.resource),
            subresource: own(self.subresource),
            namespace: own(self.namespace),
            name: own(self.name),
        }
    }
}

impl<'a> Attributes<'a> {
    /// A read of `resource`: `get` of `name`, or `list`/`watch` of the
    /// collection (in `namespace`, or across all) with the field selector
    /// `fields` it is served with.
    ///
    /// As kube-apiserver does, a collection request whose field selector
    /// requires `metadata.name=X` is authorized as a request on `X`, so
    /// that RBAC rules restricted to `resourceNames` allow a client to
    /// list and watch the one object they name.
    pub fn read(
        resource: &'a ApiResource,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
        watch: bool,
        fields: Option<&'a FieldSelector>,
    ) -> Attributes<'a> {
        let (verb, name) = match name {
            Some(name) => ("get", name),
            None => {
                let named = fields.and_then(|fields| {
                    fields
                        .equalities()
                        .find(|(field, _)| *field == "metadata.name")
                        .map(|(_, value)| value)
                });
                (
                    if watch { "watch" } else { "list" },
                    named.unwrap_or_default(),
                )
            }
        };
        // `/api/v1/namespaces/{name}` is, to kube-apiserver's request info,
        // in the namespace it names.
        let namespace = match namespace {
            None if resource.group.is_empty() && resource.plural == "namespaces" => name,
            namespace => namespace.unwrap_or_default(),
        };
        Attributes::Resource(ResourceAttributes {
            verb,
            group: resource.group.as_str().into(),
            version: resource.version.as_str().into(),
            resource: resource.plural.as_str().into(),
            subresource: Cow::Borrowed(""),
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// `get` of a path that names no resource.
    pub fn path(path: &'a str) -> Attributes<'a> {
        Attributes::NonResource {
            verb: "get",
            path: path.into(),
        }
    }

    /// Its own copy, to be kept.
    pub fn into_owned(self) -> Attributes<'static> {
        match self {
            Attributes::Resource(r) => Attributes::Resource(r.into_owned()),
            Attributes::NonResource { verb, path } => Attributes::NonResource {
                verb,
                path: Cow::Owned(path.into_owned()),
            },
        }
    }

    /// The 403 kube-apiserver answers when `user` may not do this, with the
    /// authorizer's `reason` appended when it gave one.
    pub fn forbidden(&self, user: &UserInfo, reason: &str) -> Status {
        let username = &user.username;
        let (what, details) = match self {
            Attributes::NonResource { verb, path } => (
                format!("forbidden: User {username:?} cannot {verb} path {path:?}"),
                StatusDetails::default(),
            ),
            Attributes::Resource(r) => {
                let mut resource = r.resource.to_string();
                if !r.subresource.is_empty() {
                    resource = format!("{resource}/{}", r.subresource);
                }
                let scope = if r.namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace {:?}", r.namespace)
                };
                let cannot = format!(
                    "User {username:?} cannot {} resource {resource:?} in API group {:?} {scope}",
                    r.verb, r.group
                );
                let qualified = if r.group.is_empty() {
                    r.resource.to_string()
                } else {
                    format!("{}.{}", r.resource, r.group)
                };
                let message = if r.name.is_empty() {
                    format!("{qualified} is forbidden: {cannot}")
                } else {
                    format!("{qualified} {:?} is forbidden: {cannot}", r.name)
                };
                let details = StatusDetails {
                    name: r.name.to_string(),
                    group: r.group.to_string(),
                    kind: r.resource.to_string(),
                    ..StatusDetails::default()
                };
                (message, details)
            }
        };
        let message = if reason.is_empty() {
            what
        } else {
            format!("{what}: {reason}")
        };
        let mut status = Status::failure(403, "Forbidden", message);
        status.details = Some(details);
        status
    }

    /// The namespace of a request in one (RBAC's RoleBindings grant only
    /// there); `None` for cluster-wide requests and other paths.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Attributes::Resource(r) if !r.namespace.is_empty() => Some(&r.namespace),
            _ => None,
        }
    }

    /// For logs: `verb resource` in `namespace`, or `verb path`.
    pub fn describe(&self) -> String {
        match self {
            Attributes::NonResource { verb, path } => format!("{verb} {path}"),
            Attributes::Resource(r) => {
                let mut what = format!("{} {}", r.verb, r.resource);
                if !r.group.is_empty() {
                    what = format!("{what}.{}", r.group);
                }
                if !r.name.is_empty() {
                    what = format!("{what}/{}", r.name);
                }
                if !r.namespace.is_empty() {
                    what = format!("{what} in namespace {}", r.namespace);
                }
                what
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserInfo {
        UserInfo {
            username: name.into(),
            ..UserInfo::default()
        }
    }

    fn widgets() -> ApiResource {
        ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            plural: "widgets".into(),
            kind: "Widget".into(),
            namespaced: true,
        }
    }

    #[test]
    fn forbidden_is_worded_as_kube_apiserver_words_it() {
        // APISERVER-PROTOCOL.md: the anonymous list of all pods.
        let (pods, widgets) = (ApiResource::pods(), widgets());
        let list = Attributes::read(&pods, None, None, false, None);
        let status = list.forbidden(&user("system:anonymous"), "");
        assert_eq!(
            status.message,
            r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope"#
        );
        assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
        assert_eq!(status.details.unwrap().kind, "pods");

        let get = Attributes::read(&widgets, Some("ns"), Some("w"), false, None);
        let status = get.forbidden(&user("u"), "no RBAC policy matched");
        assert_eq!(
            status.message,
            r#"widgets.example.com "w" is forbidden: User "u" cannot get resource "widgets" in API group "example.com" in the namespace "ns": no RBAC policy matched"#
        );
        let details = status.details.unwrap();
        assert_eq!(
            (details.name.as_str(), details.group.as_str()),
            ("w", "example.com")
        );

        let metrics = Attributes::path("/metrics").forbidden(&user("u"), "");
        assert_eq!(
            metrics.message,
            r#"forbidden: User "u" cannot get path "/metrics""#
        );
    }

    #[test]
    fn a_collection_read_of_one_name_is_authorized_on_that_name() {
        let pods = ApiResource::pods();
        let (named, on_node) = (
            FieldSelector::parse("metadata.name=web-0").unwrap(),
            FieldSelector::parse("spec.nodeName=n1").unwrap(),
        );
        let watch = Attributes::read(&pods, Some("ns"), None, true, Some(&named));
        let Attributes::Resource(r) = watch else {
            panic!("a resource request")
        };
        assert_eq!((r.verb, &*r.name), ("watch", "web-0"));
        let Attributes::Resource(r) = Attributes::read(&pods, None, None, false, Some(&on_node))
        else {
            panic!("a resource request")
        };
        assert_eq!((r.verb, &*r.name), ("list", ""));
    }
}
