//! Discovery documents (`/version`, `/api`, `/apis`, group and version
//! documents), in the legacy (unaggregated) format that kubectl, client-go
//! and kube-rs all fall back to.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Context;
use crate::sim::resources::{RESOURCES, Resource};

/// Whether `path` is one of the discovery documents (counted, see
/// [`crate::sim::Sim::discovery_requests`]).
pub fn is_discovery(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(
        segments.as_slice(),
        ["version"] | ["api"] | ["api", _] | ["apis"] | ["apis", _] | ["apis", _, _]
    )
}

/// `GET /version`: the configured Kubernetes version (the sim's objects
/// are written with the schema's own types, 1.36, whatever it says).
pub async fn version(State(ctx): State<Arc<Context>>) -> Json<Value> {
    let version = ctx.serve.kube_version;
    Json(json!({
        "major": "1",
        "minor": version.minor().to_string(),
        "gitVersion": format!("v{version}.0-kubecache-sim"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    }))
}

/// `GET /api`.
pub async fn api_versions() -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]
    }))
}

/// `GET /apis`.
pub async fn api_groups() -> Json<Value> {
    let groups: Vec<Value> = groups().iter().map(|(g, v)| group_document(g, v)).collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

/// `/api/v1`, `/apis/{group}` and `/apis/{group}/{version}`, if `path` is one.
pub fn group_documents(path: &str) -> Option<Response> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let doc = match segments.as_slice() {
        ["api", "v1"] => resource_list("", "v1"),
        ["apis", group] => {
            let (g, v) = groups().into_iter().find(|(g, _)| g == group)?;
            let mut doc = group_document(&g, &v);
            doc["apiVersion"] = json!("v1");
            doc
        }
        ["apis", group, version] if groups().iter().any(|(g, v)| g == group && v == version) => {
            resource_list(group, version)
        }
        _ => return None,
    };
    Some(Json(doc).into_response())
}

/// The review APIs (`selfsubjectreviews`, `tokenreviews`,
/// `subjectaccessreviews`): group, version, plural, kind. They are created,
/// never stored.
const REVIEWS: &[(&str, &str, &str, &str)] = &[
    (
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
    ),
    ("authentication.k8s.io", "v1", "tokenreviews", "TokenReview"),
    (
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
    ),
];

/// The non-core groups and their one version.
pub fn groups() -> Vec<(String, String)> {
    let mut groups: Vec<(String, String)> = Vec::new();
    let served = RESOURCES.iter().map(|r| (r.group, r.version));
    for (group, version) in served
        .filter(|(g, _)| !g.is_empty())
        .chain(REVIEWS.iter().map(|(g, v, _, _)| (*g, *v)))
    {
        if !groups.iter().any(|(g, _)| g == group) {
            groups.push((group.into(), version.into()));
        }
    }
    groups
}

fn group_document(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"kind": "APIGroup", "name": group, "versions": [gv], "preferredVersion": gv})
}

fn resource_list(group: &str, version: &str) -> Value {
    let mut resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .flat_map(resource_documents)
        .collect();
    resources.extend(
        REVIEWS
            .iter()
            .filter(|(g, v, _, _)| *g == group && *v == version)
            .map(|(_, _, plural, kind)| {
                json!({
                    "name": plural,
                    "singularName": plural.trim_end_matches('s'),
                    "namespaced": false,
                    "kind": kind,
                    "verbs": ["create"],
                })
            }),
    );
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

/// A resource's entry, then one per subresource (`pods/log`), in the
/// real documents' shape.
fn resource_documents(r: &Resource) -> Vec<Value> {
    let mut documents = vec![json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs,
        "shortNames": r.short_names,
        "storageVersionHash": "sim",
    })];
    for sub in r.subresources {
        let mut document = json!({
            "name": format!("{}/{}", r.plural, sub.name),
            "singularName": "",
            "namespaced": r.namespaced,
        });
        if let Some((group, version)) = sub.group_version {
            document["group"] = json!(group);
            document["version"] = json!(version);
        }
        document["kind"] = json!(sub.kind);
        document["verbs"] = json!(sub.verbs);
        documents.push(document);
    }
    documents
}
