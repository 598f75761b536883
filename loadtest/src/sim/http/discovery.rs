//! Discovery documents (`/version`, `/api`, `/apis`, group and version
//! documents), in the legacy (unaggregated) format that kubectl, client-go
//! and kube-rs all fall back to, and `/api` and `/apis` aggregated
//! (`apidiscovery.k8s.io/v2`, which kubectl and client-go ask for first;
//! v2beta1 is gone from a v1.34 API server and later).

use std::sync::{Arc, LazyLock};

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use kubecache_wire::media::JSON;
use serde_json::{Value, json};

use super::Context;
use super::document::Document;
use crate::sim::resources::{RESOURCES, Resource};

/// Whether `path` is one of the discovery or OpenAPI documents (counted,
/// see [`crate::sim::Sim::discovery_requests`]).
pub fn is_discovery(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(
        segments.as_slice(),
        ["version"]
            | ["api"]
            | ["api", _]
            | ["apis"]
            | ["apis", _]
            | ["apis", _, _]
            | ["openapi", "v2"]
            | ["openapi", "v3", ..]
    )
}

/// The Kubernetes version of the sim's schemas (k8s-openapi's types, which
/// its objects are written with): its OpenAPI documents' `info.version`.
pub const SCHEMA_GIT_VERSION: &str = "v1.36.0-kubecache-sim";

/// `GET /version`: the configured Kubernetes version, indented, as
/// kube-apiserver writes it (the sim's objects are written with the
/// schema's own types, 1.36, whatever it says); its route produces JSON
/// only, so go-restful refuses YAML (or `text/html`) with a 406.
pub async fn version(State(ctx): State<Arc<Context>>, request: HeaderMap) -> Response {
    let accept = request.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    if let Some(status) = super::restful_not_acceptable(accept, &[JSON]) {
        return super::error_response(&status, accept);
    }
    let version = ctx.serve.kube_version;
    let version = json!({
        "major": "1",
        "minor": version.minor().to_string(),
        "gitVersion": format!("v{version}.0-kubecache-sim"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    });
    json_response(serde_json::to_vec_pretty(&version).expect("JSON serializes"))
}

/// A legacy discovery document as kube-apiserver writes it: compact, one
/// trailing newline (Go's `json.Encoder`).
fn legacy(document: &Value) -> Response {
    let mut body = serde_json::to_vec(document).expect("JSON serializes");
    body.push(b'\n');
    json_response(body)
}

fn json_response(body: Vec<u8>) -> Response {
    let mut response = Response::new(axum::body::Body::from(body));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    response
}

/// `GET /api`.
pub async fn api_versions(request: HeaderMap) -> Response {
    if wants_aggregated(&request) {
        return aggregated(&AGGREGATED_API, &request);
    }
    legacy(&json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]
    }))
}

/// `GET /apis`.
pub async fn api_groups(request: HeaderMap) -> Response {
    if wants_aggregated(&request) {
        return aggregated(&AGGREGATED_APIS, &request);
    }
    let groups: Vec<Value> = groups().iter().map(|(g, v)| group_document(g, v)).collect();
    legacy(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

/// The media type of aggregated discovery v2.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the first form `Accept` lists that the sim serves is
/// aggregated discovery v2 (the others: plain JSON, or anything).
fn wants_aggregated(request: &HeaderMap) -> bool {
    let Some(accept) = request.get(header::ACCEPT) else {
        return false;
    };
    for clause in String::from_utf8_lossy(accept.as_bytes()).split(',') {
        let mut parts = clause.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        let mut parameters: Vec<&str> = parts.filter(|p| !p.starts_with("q=")).collect();
        parameters.sort_unstable();
        match (media, parameters.as_slice()) {
            ("application/json", ["as=APIGroupDiscoveryList", "g=apidiscovery.k8s.io", "v=v2"]) => {
                return true;
            }
            ("application/json" | "application/*" | "*/*", []) => return false,
            _ => {}
        }
    }
    false
}

/// An aggregated document, with its `ETag` (304 for a matching
/// `If-None-Match`) and `Cache-Control: public`, as kube-apiserver's.
fn aggregated(document: &Document, request: &HeaderMap) -> Response {
    let mut response = document.response(request, AGGREGATED);
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("public"),
    );
    response
}

/// `/api` aggregated: the core group, unnamed.
static AGGREGATED_API: LazyLock<Document> = LazyLock::new(|| {
    aggregated_list(vec![json!({
        "metadata": {"creationTimestamp": null},
        "versions": [aggregated_version("", "v1")],
    })])
});

/// `/apis` aggregated: every other group.
static AGGREGATED_APIS: LazyLock<Document> = LazyLock::new(|| {
    let groups = groups()
        .iter()
        .map(|(group, version)| {
            json!({
                "metadata": {"name": group, "creationTimestamp": null},
                "versions": [aggregated_version(group, version)],
            })
        })
        .collect();
    aggregated_list(groups)
});

fn aggregated_list(items: Vec<Value>) -> Document {
    Document::new(&json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    }))
}

/// A group-version's resources in aggregated form.
fn aggregated_version(group: &str, version: &str) -> Value {
    let mut resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .map(aggregated_resource)
        .collect();
    resources.extend(
        REVIEWS
            .iter()
            .filter(|(g, v, _, _)| *g == group && *v == version)
            .map(|(_, _, plural, kind)| {
                json!({
                    "resource": plural,
                    "responseKind": {"group": "", "version": "", "kind": kind},
                    "scope": "Cluster",
                    "singularResource": plural.trim_end_matches('s'),
                    "verbs": ["create"],
                })
            }),
    );
    json!({"version": version, "resources": resources, "freshness": "Current"})
}

/// A resource with its subresources in aggregated form (a kind of the
/// resource's own group-version has them empty).
fn aggregated_resource(r: &Resource) -> Value {
    let subresources: Vec<Value> = r
        .subresources
        .iter()
        .map(|sub| {
            let (group, version) = sub.group_version.unwrap_or(("", ""));
            json!({
                "subresource": sub.name,
                "responseKind": {"group": group, "version": version, "kind": sub.kind},
                "verbs": sub.verbs,
            })
        })
        .collect();
    let mut resource = json!({
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        resource["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        resource["categories"] = json!(r.categories);
    }
    if !subresources.is_empty() {
        resource["subresources"] = json!(subresources);
    }
    resource
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
    Some(legacy(&doc))
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
    // The core group's list has no `apiVersion` (kube-apiserver's own).
    let mut list = json!({"kind": "APIResourceList"});
    if !group.is_empty() {
        list["apiVersion"] = json!("v1");
    }
    list["groupVersion"] = json!(group_version);
    list["resources"] = json!(resources);
    list
}

/// A resource's entry, then one per subresource (`pods/log`), in the
/// real documents' shape.
fn resource_documents(r: &Resource) -> Vec<Value> {
    let mut resource = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        resource["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        resource["categories"] = json!(r.categories);
    }
    resource["storageVersionHash"] = json!(r.storage_version_hash());
    let mut documents = vec![resource];
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
