//! The HTTP API: the Kubernetes-compatible read API (discovery, list, get,
//! watch) and the health endpoints.
//!
//! Every error is a Kubernetes `Status` ([`ApiError`]), whatever the route.

mod discovery;
mod error;
mod list;
mod path;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;

pub use error::ApiError;
use path::ApiPath;

use crate::Caches;

/// The router of kubecache's HTTP API over `caches`.
pub fn router(caches: Arc<Caches>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(healthz))
        .route("/readyz", get(readyz))
        .route("/version", get(|| async { Json(discovery::version()) }))
        // Everything else is a Kubernetes API path (or a 404 Status).
        .fallback(kubernetes)
        .with_state(caches)
}

/// Alive as long as it answers.
async fn healthz() -> &'static str {
    "ok"
}

/// Ready when every configured resource has synced; the body says which
/// have not and why, in kube-apiserver's `/readyz` style.
async fn readyz(State(caches): State<Arc<Caches>>) -> Response {
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
    if ready {
        body.push_str("readyz check passed\n");
        (StatusCode::OK, body).into_response()
    } else {
        body.push_str("readyz check failed\n");
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

/// Discovery and resource paths, with an optional `/predicates/{list}`
/// prefix.
async fn kubernetes(
    State(caches): State<Arc<Caches>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (predicates, path) = path::strip_predicates(uri.path())?;
    let target = path::parse(&caches, path).ok_or_else(error::no_such_path)?;
    if method != Method::GET && method != Method::HEAD {
        return Err(error::read_only(method.as_str()));
    }
    check_accept(&headers)?;
    let document = match target {
        ApiPath::CoreVersions => Some(discovery::core_versions(&caches)),
        ApiPath::Groups => Some(discovery::groups(&caches)),
        ApiPath::Group(group) => discovery::group_document(&caches, &group),
        ApiPath::Resources { group, version } => discovery::resources(&caches, &group, &version),
        ApiPath::Resource(target) => {
            return list::serve(
                &caches,
                target,
                uri.query().unwrap_or(""),
                &headers,
                predicates,
            )
            .await;
        }
    };
    document
        .map(|doc| Json(doc).into_response())
        .ok_or_else(error::no_such_path)
}

/// Refuses a request that accepts no JSON (e.g. protobuf only).
fn check_accept(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let json = accept.split(',').any(|range| {
        let media = range.split(';').next().unwrap_or("").trim();
        matches!(media, "" | "*/*" | "application/*" | "application/json")
    });
    if json {
        Ok(())
    } else {
        Err(error::not_acceptable(accept))
    }
}
