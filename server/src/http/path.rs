//! Request paths of the Kubernetes API: discovery documents and resource
//! paths, after an optional `/predicates/{list}` prefix.

use std::sync::Arc;

use kubecache_wire::Status;

use crate::served::Predicates;
use crate::served::{ServedResource, ServedResources};

/// What a Kubernetes API path asks for.
pub enum ApiPath {
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    Resources {
        /// Empty for the core group.
        group: String,
        /// The version.
        version: String,
    },
    /// A collection or one object of a cached resource.
    Resource(ResourcePath),
}

/// A path of a cached resource: its collection (all namespaces or one) or
/// one object.
pub struct ResourcePath {
    /// The resource.
    pub cache: Arc<ServedResource>,
    /// The namespace of a namespaced path.
    pub namespace: Option<String>,
    /// The object's name, for a path of one object.
    pub name: Option<String>,
}

/// Splits off a `/predicates/{list}` prefix: `(predicates, rest of the path)`.
///
/// # Errors
///
/// 400 for an unknown predicate.
pub fn strip_predicates(path: &str) -> Result<(Predicates, &str), Status> {
    let Some(rest) = path.strip_prefix("/predicates/") else {
        return Ok((Predicates::default(), path));
    };
    let (list, rest) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    Ok((Predicates::parse(list)?, rest))
}

/// Parses a path (without the predicates prefix); `None` for a path that
/// names nothing kubecache serves.
pub fn parse(caches: &ServedResources, path: &str) -> Option<ApiPath> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api"] => return Some(ApiPath::CoreVersions),
        ["apis"] => return Some(ApiPath::Groups),
        ["apis", group] => return Some(ApiPath::Group((*group).into())),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let resource = |plural: &str| caches.find(group, version, plural).cloned();
    let path = |cache: Arc<ServedResource>, namespace: Option<&str>, name: Option<&str>| {
        let namespaced = namespace.is_some();
        (namespaced == cache.resource.namespaced || name.is_none() && !namespaced).then(|| {
            ApiPath::Resource(ResourcePath {
                cache,
                namespace: namespace.map(Into::into),
                name: name.map(Into::into),
            })
        })
    };
    match rest {
        [] => Some(ApiPath::Resources {
            group: group.into(),
            version: version.into(),
        }),
        ["namespaces", ns, plural] => path(resource(plural)?, Some(ns), None),
        ["namespaces", ns, plural, name] => path(resource(plural)?, Some(ns), Some(name)),
        [plural] => path(resource(plural)?, None, None),
        [plural, name] => path(resource(plural)?, None, Some(name)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicates_prefix_is_split_off_the_kubernetes_path() {
        let (predicates, rest) =
            strip_predicates("/predicates/generation,labels/api/v1/pods").unwrap();
        assert!(predicates.generation && predicates.labels && !predicates.annotations);
        assert_eq!(rest, "/api/v1/pods");
        let (predicates, rest) = strip_predicates("/api/v1/pods").unwrap();
        assert!(predicates.is_empty());
        assert_eq!(rest, "/api/v1/pods");
        assert_eq!(
            strip_predicates("/predicates/spec/api").unwrap_err().code,
            400
        );
    }
}
