//! Discovery documents listing only the cached resources, in the legacy
//! (unaggregated) format that kubectl, client-go and kube-rs fall back to.

use serde_json::{Value, json};

use crate::served::{ServedResource, ServedResources};

/// `GET /version`: kubecache's own version in the shape of the API server's.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": concat!("v1.34.0+kubecache-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": "linux/amd64"
    })
}

/// `GET /api`.
pub fn core_versions(caches: &ServedResources) -> Value {
    let versions: Vec<&str> = dedup(
        caches
            .iter()
            .filter(|c| c.resource.group.is_empty())
            .map(|c| c.resource.version.as_str()),
    );
    json!({"kind": "APIVersions", "versions": versions, "serverAddressByClientCIDRs": []})
}

/// `GET /apis`.
pub fn groups(caches: &ServedResources) -> Value {
    let names = dedup(
        caches
            .iter()
            .filter(|c| !c.resource.group.is_empty())
            .map(|c| c.resource.group.as_str()),
    );
    let groups: Vec<Value> = names.iter().map(|g| group(caches, g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}`, if a cached resource is in that group.
pub fn group_document(caches: &ServedResources, name: &str) -> Option<Value> {
    caches.iter().any(|c| c.resource.group == name).then(|| {
        let mut doc = group(caches, name);
        doc["apiVersion"] = json!("v1");
        doc
    })
}

/// `GET /api/{version}` or `/apis/{group}/{version}`, if a cached resource
/// is in that group version.
pub fn resources(caches: &ServedResources, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = caches
        .iter()
        .filter(|c| c.resource.group == group && c.resource.version == version)
        .map(|c| resource(c))
        .collect();
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources
    }))
}

fn group(caches: &ServedResources, name: &str) -> Value {
    let versions: Vec<Value> = dedup(
        caches
            .iter()
            .filter(|c| c.resource.group == name)
            .map(|c| c.resource.version.as_str()),
    )
    .into_iter()
    .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
    .collect();
    json!({"kind": "APIGroup", "name": name, "versions": versions, "preferredVersion": versions[0]})
}

/// One resource: read verbs only, since kubecache serves reads.
fn resource(cache: &ServedResource) -> Value {
    let r = &cache.resource;
    json!({
        "name": r.plural,
        "singularName": r.kind.to_lowercase(),
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": ["get", "list", "watch"],
    })
}

/// The distinct items, in first-seen order.
fn dedup<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}
