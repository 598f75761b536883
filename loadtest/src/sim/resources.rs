//! The resources the simulated API server serves, with what discovery,
//! field selectors and the encodings need to know about each.

/// Index of a resource in [`RESOURCES`].
pub type ResourceId = usize;

/// One served resource (a group/version/plural) and its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// API group, empty for core.
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Plural resource name used in URLs.
    pub plural: &'static str,
    /// Singular name, as discovery reports it.
    pub singular: &'static str,
    /// Kind of one object.
    pub kind: &'static str,
    /// Kind of the list.
    pub list_kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Built-in kinds have a protobuf encoding; custom resources do not.
    pub builtin: bool,
    /// Whether `metadata.generation` is kept (bumped on spec changes only).
    pub has_generation: bool,
    /// Short names for kubectl.
    pub short_names: &'static [&'static str],
    /// Categories it belongs to (`all`: `kubectl get all` lists it).
    pub categories: &'static [&'static str],
    /// Field selector labels beyond `metadata.name` and `metadata.namespace`.
    pub extra_fields: &'static [&'static str],
    /// The verbs discovery lists (`deletecollection` among them where a
    /// collection can be deleted).
    pub verbs: &'static [&'static str],
    /// Subresources, as discovery lists them.
    pub subresources: &'static [Subresource],
    /// Whether a DELETE answers with the deleted object (`ReturnDeletedObject`
    /// of its registry: pods, namespaces) rather than a Success Status.
    pub returns_deleted_object: bool,
}

/// A subresource of a resource, e.g. `pods/log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    /// The name after the object's, e.g. `log`.
    pub name: &'static str,
    /// The kind it takes or answers.
    pub kind: &'static str,
    /// The verbs discovery lists.
    pub verbs: &'static [&'static str],
    /// Group and version of its kind when not the resource's (`Eviction`
    /// is `policy/v1`).
    pub group_version: Option<(&'static str, &'static str)>,
}

impl Subresource {
    const fn new(name: &'static str, kind: &'static str, verbs: &'static [&'static str]) -> Self {
        Subresource {
            name,
            kind,
            verbs,
            group_version: None,
        }
    }
}

/// `status`, with the verbs of every status subresource.
const fn status(kind: &'static str) -> Subresource {
    Subresource::new("status", kind, &["get", "patch", "update"])
}

const WRITABLE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl Resource {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> &'static str {
        match self.group {
            "" => self.version,
            _ => API_VERSIONS
                .iter()
                .find(|(g, v, _)| *g == self.group && *v == self.version)
                .map(|(_, _, av)| *av)
                .expect("every group/version has its apiVersion listed"),
        }
    }

    /// Whether the subresource is served.
    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s.name == name)
    }

    /// Discovery's `storageVersionHash`: the first 8 bytes of the SHA-256
    /// of `group/version/Kind`, in base64 (kube-apiserver's).
    pub fn storage_version_hash(&self) -> String {
        use base64::Engine;
        let id = format!("{}/{}/{}", self.group, self.version, self.kind);
        let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
        base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
    }

    /// Field selector labels this resource supports.
    pub fn supported_fields(&self) -> Vec<&'static str> {
        let mut fields = vec!["metadata.name", "metadata.namespace"];
        fields.extend_from_slice(self.extra_fields);
        fields
    }

    /// The JSON path of a field selector label, e.g. `spec.nodeName` -> `["spec", "nodeName"]`.
    pub fn field_path(label: &str) -> impl Iterator<Item = &str> {
        label.split('.')
    }
}

/// `apiVersion` strings of the groups served (avoids allocating them at run time).
const API_VERSIONS: &[(&str, &str, &str)] = &[
    ("example.com", "v1", "example.com/v1"),
    (RBAC, "v1", "rbac.authorization.k8s.io/v1"),
];

/// The RBAC API group.
const RBAC: &str = "rbac.authorization.k8s.io";

/// An RBAC resource (no short names, categories or subresources), as
/// kube-apiserver v1.28 lists it in discovery.
const fn rbac(
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group: RBAC,
        version: "v1",
        plural,
        singular,
        kind,
        list_kind,
        namespaced,
        builtin: true,
        has_generation: false,
        short_names: &[],
        categories: &[],
        extra_fields: &[],
        verbs: WRITABLE,
        subresources: &[],
        returns_deleted_object: false,
    }
}

/// Every resource the simulator serves, in discovery order.
pub const RESOURCES: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        list_kind: "NamespaceList",
        namespaced: false,
        builtin: true,
        has_generation: false,
        short_names: &["ns"],
        categories: &[],
        extra_fields: &["status.phase"],
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &[status("Namespace")],
        returns_deleted_object: true,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        list_kind: "PodList",
        namespaced: true,
        builtin: true,
        has_generation: true,
        short_names: &["po"],
        categories: &["all"],
        extra_fields: &["spec.nodeName", "status.phase"],
        verbs: WRITABLE,
        subresources: &[
            Subresource::new("attach", "PodAttachOptions", &["create", "get"]),
            Subresource {
                name: "eviction",
                kind: "Eviction",
                verbs: &["create"],
                group_version: Some(("policy", "v1")),
            },
            Subresource::new("exec", "PodExecOptions", &["create", "get"]),
            Subresource::new("log", "Pod", &["get"]),
            Subresource::new("portforward", "PodPortForwardOptions", &["create", "get"]),
            Subresource::new(
                "proxy",
                "PodProxyOptions",
                &["create", "delete", "get", "patch", "update"],
            ),
            status("Pod"),
        ],
        returns_deleted_object: true,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        list_kind: "ConfigMapList",
        namespaced: true,
        builtin: true,
        has_generation: false,
        short_names: &["cm"],
        categories: &[],
        extra_fields: &[],
        verbs: WRITABLE,
        subresources: &[],
        returns_deleted_object: false,
    },
    Resource {
        group: "example.com",
        version: "v1",
        plural: "widgets",
        singular: "widget",
        kind: "Widget",
        list_kind: "WidgetList",
        namespaced: true,
        builtin: false,
        has_generation: true,
        short_names: &["wd"],
        categories: &[],
        extra_fields: &[],
        verbs: &[
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ],
        subresources: &[status("Widget")],
        returns_deleted_object: false,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        list_kind: "ServiceAccountList",
        namespaced: true,
        builtin: true,
        has_generation: false,
        short_names: &["sa"],
        categories: &[],
        extra_fields: &[],
        verbs: WRITABLE,
        // Not `token`: the sim issues no tokens (TokenRequest).
        subresources: &[],
        returns_deleted_object: true,
    },
    // In the order of the real server's group document.
    rbac(
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        "ClusterRoleBindingList",
        false,
    ),
    rbac(
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        "ClusterRoleList",
        false,
    ),
    rbac(
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        "RoleBindingList",
        true,
    ),
    rbac("roles", "role", "Role", "RoleList", true),
];

/// Ids of the resources, by name, for callers of the in-process API.
pub mod ids {
    use super::ResourceId;
    /// `namespaces`
    pub const NAMESPACES: ResourceId = 0;
    /// `pods`
    pub const PODS: ResourceId = 1;
    /// `configmaps`
    pub const CONFIGMAPS: ResourceId = 2;
    /// `widgets.example.com`
    pub const WIDGETS: ResourceId = 3;
    /// `serviceaccounts`
    pub const SERVICEACCOUNTS: ResourceId = 4;
    /// `clusterrolebindings.rbac.authorization.k8s.io`
    pub const CLUSTERROLEBINDINGS: ResourceId = 5;
    /// `clusterroles.rbac.authorization.k8s.io`
    pub const CLUSTERROLES: ResourceId = 6;
    /// `rolebindings.rbac.authorization.k8s.io`
    pub const ROLEBINDINGS: ResourceId = 7;
    /// `roles.rbac.authorization.k8s.io`
    pub const ROLES: ResourceId = 8;
}

/// The resource served at `group`/`version`/`plural`, if any.
pub fn find(group: &str, version: &str, plural: &str) -> Option<ResourceId> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The resource with this plural name (core first), e.g. `pods` or `widgets`.
pub fn by_plural(plural: &str) -> Option<ResourceId> {
    RESOURCES.iter().position(|r| r.plural == plural)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_point_at_their_resources() {
        assert_eq!(RESOURCES[ids::PODS].plural, "pods");
        assert_eq!(RESOURCES[ids::NAMESPACES].plural, "namespaces");
        assert_eq!(RESOURCES[ids::CONFIGMAPS].plural, "configmaps");
        assert_eq!(RESOURCES[ids::WIDGETS].plural, "widgets");
        assert_eq!(RESOURCES[ids::WIDGETS].api_version(), "example.com/v1");
        assert_eq!(find("example.com", "v1", "widgets"), Some(ids::WIDGETS));
        assert_eq!(RESOURCES[ids::SERVICEACCOUNTS].plural, "serviceaccounts");
        for (id, plural) in [
            (ids::CLUSTERROLEBINDINGS, "clusterrolebindings"),
            (ids::CLUSTERROLES, "clusterroles"),
            (ids::ROLEBINDINGS, "rolebindings"),
            (ids::ROLES, "roles"),
        ] {
            assert_eq!(find(RBAC, "v1", plural), Some(id));
            assert_eq!(RESOURCES[id].api_version(), "rbac.authorization.k8s.io/v1");
        }
    }
}
