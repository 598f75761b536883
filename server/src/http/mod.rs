//! The HTTP API: the Kubernetes-compatible read API (discovery, list, get,
//! watch), the query API under `/v1`, `/metrics` and the health endpoints.
//!
//! Every error is a Kubernetes `Status` ([`ApiError`]), whatever the route.

mod discovery;
mod error;
mod list;
mod path;
mod query;
mod table;
mod watch;

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};

pub use error::ApiError;
pub(crate) use list::json_response;
use path::ApiPath;

use crate::metrics::Endpoint;
use crate::served::ServedResources;
use table::Rendering;

/// The router of kubecache's HTTP API over `caches`. Installs the
/// process's metrics recorder on first use (see [`crate::metrics`]).
pub fn router(caches: Arc<ServedResources>) -> Router {
    for cache in caches.iter() {
        crate::metrics::register(&cache.name());
    }
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route(
            "/version",
            get(|| async { (Extension(Endpoint("discovery")), Json(discovery::version())) }),
        )
        .route("/v1/{*rest}", any(query_api))
        // Everything else is a Kubernetes API path (or a 404 Status).
        .fallback(kubernetes)
        .with_state(caches)
        // Outermost, so that it sees every answer, errors included.
        .layer(axum::middleware::from_fn(crate::metrics::track))
}

/// The Prometheus text format.
async fn metrics(State(caches): State<Arc<ServedResources>>) -> impl IntoResponse {
    (
        Extension(Endpoint("metrics")),
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::render(&caches),
    )
}

/// `/v1/…`.
async fn query_api(
    State(caches): State<Arc<ServedResources>>,
    method: Method,
    uri: Uri,
) -> impl IntoResponse {
    let answer = if method == Method::GET || method == Method::HEAD {
        query::serve(&caches, uri.path(), uri.query().unwrap_or("")).await
    } else {
        Err(error::read_only(method.as_str()))
    };
    (Extension(Endpoint("query")), answer)
}

/// Alive as long as it answers.
async fn healthz() -> impl IntoResponse {
    (Extension(Endpoint("health")), "ok")
}

/// Alive while every resource's reflector runs. A reflector ends only on a
/// panic outside its steps (a bug: its own step panics are caught) or when
/// aborted; its store then never changes again, so the kubelet had better
/// restart the process. Failing reflectors (403, 404 ...) are alive: they
/// retry, and `/readyz` says why they are not ready.
async fn livez(State(caches): State<Arc<ServedResources>>) -> Response {
    let stopped: Vec<String> = caches
        .iter()
        .filter(|cache| cache.reader.is_closed())
        .map(|cache| format!("[-]reflector {} failed: it stopped\n", cache.name()))
        .collect();
    let (code, body) = if stopped.is_empty() {
        (StatusCode::OK, "ok".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            stopped.concat() + "livez check failed\n",
        )
    };
    (code, Extension(Endpoint("health")), body).into_response()
}

/// Ready when every configured resource has synced; the body says which
/// have not and why, in kube-apiserver's `/readyz` style.
async fn readyz(State(caches): State<Arc<ServedResources>>) -> Response {
    let mut body = String::new();
    let mut ready = true;
    for cache in caches.iter() {
        match cache.reader.readiness() {
            kubecache_reflector::Readiness::Ready => {
                body.push_str(&format!("[+]cache {} ok\n", cache.name()));
            }
            kubecache_reflector::Readiness::NotReady { reason } => {
                ready = false;
                body.push_str(&format!("[-]cache {} failed: {reason}\n", cache.name()));
            }
        }
    }
    let code = if ready {
        body.push_str("readyz check passed\n");
        StatusCode::OK
    } else {
        body.push_str("readyz check failed\n");
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, Extension(Endpoint("health")), body).into_response()
}

/// Discovery and resource paths, with an optional `/predicates/{list}`
/// prefix.
async fn kubernetes(
    State(caches): State<Arc<ServedResources>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let mut route = Endpoint("other");
    let answer = kubernetes_path(&caches, &method, &uri, &headers, &mut route).await;
    (Extension(route), answer).into_response()
}

async fn kubernetes_path(
    caches: &ServedResources,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    route: &mut Endpoint,
) -> Result<Response, ApiError> {
    let (predicates, path) = path::strip_predicates(uri.path())?;
    let target = path::parse(caches, path).ok_or_else(error::no_such_path)?;
    if method != Method::GET && method != Method::HEAD {
        return Err(error::read_only(method.as_str()));
    }
    let query = uri.query().unwrap_or("");
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let rendering = Rendering::negotiate(accept, query)?
        .ok_or_else(|| error::not_acceptable(accept.unwrap_or_default()))?;
    let document = match target {
        ApiPath::CoreVersions => Some(discovery::core_versions(caches)),
        ApiPath::Groups => Some(discovery::groups(caches)),
        ApiPath::Group(group) => discovery::group_document(caches, &group),
        ApiPath::Resources { group, version } => discovery::resources(caches, &group, &version),
        ApiPath::Resource(target) => {
            *route = Endpoint(match &target.name {
                Some(_) => "get",
                None if kubecache_wire::list_options::is_watch(query) => "watch",
                None => "list",
            });
            return list::serve(caches, target, query, rendering, predicates).await;
        }
    };
    *route = Endpoint("discovery");
    document
        .map(|doc| Json(doc).into_response())
        .ok_or_else(error::no_such_path)
}
