//! The HTTP API: the Kubernetes-compatible read API (discovery, list, get,
//! watch), the query API under `/v1`, `/metrics` and the health endpoints.
//!
//! Every error is a Kubernetes `Status` ([`ApiError`]), whatever the route.
//!
//! What kubecache answers from its caches is authorized first (see
//! [`crate::auth`]): resource reads as `get`/`list`/`watch` of the
//! resource, query API lookups as a `list` of what they return, `/metrics`
//! and `/v1/status` as non-resource paths (as kube-rbac-proxy does). The
//! health endpoints are open.

mod discovery;
mod error;
mod list;
mod path;
mod query;
mod table;
mod watch;

use std::sync::Arc;

use axum::extract::{FromRef, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{any, get};
use axum::{Extension, Router};

pub use error::ApiError;
pub(crate) use list::json_response;
use path::ApiPath;

use crate::auth::{Attributes, Auth, Credential};
use crate::metrics::Endpoint;
use crate::served::ServedResources;
use table::Rendering;

/// What the handlers share.
#[derive(Clone)]
struct Shared {
    caches: Arc<ServedResources>,
    auth: Arc<Auth>,
}

impl FromRef<Shared> for Arc<ServedResources> {
    fn from_ref(shared: &Shared) -> Self {
        shared.caches.clone()
    }
}

impl Shared {
    /// Authorizes `request` as `attributes`.
    async fn authorize(&self, request: &Parts, attributes: &Attributes) -> Result<(), ApiError> {
        let credential = Credential::of(&request.extensions, &request.headers);
        Ok(self.auth.authorize(&credential, attributes).await?)
    }
}

/// The router of kubecache's HTTP API over `caches`, authorizing by
/// `auth`. Installs the process's metrics recorder on first use (see
/// [`crate::metrics`]).
pub fn router(caches: Arc<ServedResources>, auth: Auth) -> Router {
    for cache in caches.iter() {
        crate::metrics::register(&cache.name());
    }
    let shared = Shared {
        caches,
        auth: Arc::new(auth),
    };
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
        .with_state(shared)
        // Outermost, so that it sees every answer, errors included.
        .layer(axum::middleware::from_fn(crate::metrics::track))
}

/// The Prometheus text format.
async fn metrics(State(shared): State<Shared>, request: Parts) -> Response {
    let answer = match shared
        .authorize(&request, &Attributes::path("/metrics"))
        .await
    {
        Ok(()) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            crate::metrics::render(&shared.caches, &shared.auth),
        )
            .into_response(),
        Err(error) => error.into_response(),
    };
    (Extension(Endpoint("metrics")), answer).into_response()
}

/// `/v1/…`.
async fn query_api(State(shared): State<Shared>, request: Parts) -> impl IntoResponse {
    let answer = async {
        let method = &request.method;
        if method != Method::GET && method != Method::HEAD {
            return Err(error::read_only(method.as_str()));
        }
        let path = request.uri.path();
        shared
            .authorize(&request, &query::attributes(&shared.caches, path))
            .await?;
        query::serve(
            &shared.caches,
            &shared.auth,
            path,
            request.uri.query().unwrap_or(""),
        )
        .await
    };
    (Extension(Endpoint("query")), answer.await)
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
async fn kubernetes(State(shared): State<Shared>, request: Parts) -> Response {
    let mut route = Endpoint("other");
    let answer = kubernetes_path(&shared, &request, &mut route).await;
    (Extension(route), answer).into_response()
}

async fn kubernetes_path(
    shared: &Shared,
    request: &Parts,
    route: &mut Endpoint,
) -> Result<Response, ApiError> {
    let caches = &*shared.caches;
    let (method, uri) = (&request.method, &request.uri);
    let (predicates, path) = path::strip_predicates(uri.path())?;
    let target = path::parse(caches, path).ok_or_else(error::no_such_path)?;
    if method != Method::GET && method != Method::HEAD {
        return Err(error::read_only(method.as_str()));
    }
    let query = uri.query().unwrap_or("");
    let accept = request
        .headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let rendering = Rendering::negotiate(accept, query)?
        .ok_or_else(|| error::not_acceptable(accept.unwrap_or_default()))?;
    let document = match target {
        ApiPath::CoreVersions => Some(discovery::core_versions(caches)),
        ApiPath::Groups => Some(discovery::groups(caches)),
        ApiPath::Group(group) => discovery::group_document(caches, &group),
        ApiPath::Resources { group, version } => discovery::resources(caches, &group, &version),
        ApiPath::Resource(target) => {
            let watch = kubecache_wire::list_options::is_watch(query);
            *route = Endpoint(match &target.name {
                Some(_) => "get",
                None if watch => "watch",
                None => "list",
            });
            let field_selector = form_urlencoded::parse(query.as_bytes())
                .find(|(key, _)| key == "fieldSelector")
                .map(|(_, value)| value);
            let attributes = Attributes::read(
                &target.cache.resource,
                target.namespace.as_deref(),
                target.name.as_deref(),
                watch,
                field_selector.as_deref(),
            );
            shared.authorize(request, &attributes).await?;
            return list::serve(caches, target, query, rendering, predicates).await;
        }
    };
    *route = Endpoint("discovery");
    document
        .map(|doc| Json(doc).into_response())
        .ok_or_else(error::no_such_path)
}
