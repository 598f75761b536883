//! What strategic merge patch and server-side apply need of a kind's
//! schema: how each list merges. Built-in kinds declare it in their Go
//! types (`patchStrategy:"merge"` with a `patchMergeKey`, or
//! `listType=map` with `listMapKeys`); the table below holds those of the
//! fields of the kinds the simulator serves. Every other list, and every
//! list of a custom resource, is atomic: it is replaced whole.

use crate::sim::resources::Resource;

/// How a list merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMerge {
    /// Replaced whole.
    Atomic,
    /// A list of objects merged item by item on this key.
    Keyed(&'static str),
    /// A list of scalars merged as a set (`metadata.finalizers`).
    Set,
}

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

/// The list fields of an object's metadata, common to every kind.
const METADATA: &[(&[&str], ListMerge)] = &[
    (&["metadata", "ownerReferences"], ListMerge::Keyed("uid")),
    (&["metadata", "finalizers"], ListMerge::Set),
];

/// Pod lists with a merge key (`k8s.io/api/core/v1/types.go`), paths
/// below `spec` where `*` is any container list.
const POD: &[(&[&str], ListMerge)] = &[
    (&["spec", "*"], ListMerge::Keyed("name")),
    (&["spec", "*", "ports"], ListMerge::Keyed("containerPort")),
    (&["spec", "*", "env"], ListMerge::Keyed("name")),
    (
        &["spec", "*", "volumeMounts"],
        ListMerge::Keyed("mountPath"),
    ),
    (
        &["spec", "*", "volumeDevices"],
        ListMerge::Keyed("devicePath"),
    ),
    (
        &["spec", "*", "resizePolicy"],
        ListMerge::Keyed("resourceName"),
    ),
    (&["spec", "volumes"], ListMerge::Keyed("name")),
    (&["spec", "imagePullSecrets"], ListMerge::Keyed("name")),
    (&["spec", "hostAliases"], ListMerge::Keyed("ip")),
    (&["spec", "resourceClaims"], ListMerge::Keyed("name")),
    (&["spec", "schedulingGates"], ListMerge::Keyed("name")),
    (&["status", "conditions"], ListMerge::Keyed("type")),
    (&["status", "podIPs"], ListMerge::Keyed("ip")),
    (&["status", "hostIPs"], ListMerge::Keyed("ip")),
];

const NAMESPACE: &[(&[&str], ListMerge)] = &[(&["status", "conditions"], ListMerge::Keyed("type"))];

/// A ServiceAccount's one list with a merge key; RBAC's lists (rules,
/// subjects) have none.
const SERVICE_ACCOUNT: &[(&[&str], ListMerge)] = &[(&["secrets"], ListMerge::Keyed("name"))];

/// The list strategies of one kind.
#[derive(Debug, Clone, Copy)]
pub struct Schema {
    lists: &'static [(&'static [&'static str], ListMerge)],
}

impl Schema {
    /// The schema of a served resource's kind.
    pub fn of(resource: &Resource) -> Schema {
        let lists = match resource.kind {
            "Pod" => POD,
            "Namespace" => NAMESPACE,
            "ServiceAccount" => SERVICE_ACCOUNT,
            _ => &[],
        };
        Schema { lists }
    }

    /// How the list at `path` (field names from the object's root, list
    /// items left out) merges.
    pub fn list(&self, path: &[String]) -> ListMerge {
        METADATA
            .iter()
            .chain(self.lists)
            .find(|(pattern, _)| {
                pattern.len() == path.len()
                    && pattern.iter().zip(path).all(|(p, f)| {
                        *p == f || (*p == "*" && CONTAINER_LISTS.contains(&f.as_str()))
                    })
            })
            .map_or(ListMerge::Atomic, |(_, merge)| *merge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::resources::{RESOURCES, ids};

    fn path(p: &str) -> Vec<String> {
        p.split('.').map(String::from).collect()
    }

    #[test]
    fn pod_lists_merge_on_their_keys_and_the_others_are_atomic() {
        let pods = Schema::of(&RESOURCES[ids::PODS]);
        assert_eq!(
            pods.list(&path("spec.initContainers")),
            ListMerge::Keyed("name")
        );
        assert_eq!(
            pods.list(&path("spec.containers.ports")),
            ListMerge::Keyed("containerPort")
        );
        assert_eq!(pods.list(&path("spec.containers.args")), ListMerge::Atomic);
        assert_eq!(pods.list(&path("spec.tolerations")), ListMerge::Atomic);
        assert_eq!(pods.list(&path("metadata.finalizers")), ListMerge::Set);
        let widgets = Schema::of(&RESOURCES[ids::WIDGETS]);
        assert_eq!(widgets.list(&path("spec.containers")), ListMerge::Atomic);
    }
}
