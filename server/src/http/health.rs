//! The health endpoints, open to anyone (as kube-apiserver's are): served
//! with the API and, alone, on the health listener (see
//! [`crate::transport`]).

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::cacher::Caches;
use crate::metrics::Endpoint;

/// `/healthz`, `/livez` and `/readyz` over `caches`; a method they do not
/// serve is a 405 `Status`.
pub(super) fn routes(caches: Arc<Caches>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .method_not_allowed_fallback(super::error::method_not_allowed_fallback)
        .with_state(caches)
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
async fn livez(State(caches): State<Arc<Caches>>) -> Response {
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
/// have not and why, in kube-apiserver's `/readyz` style. A store restored
/// from a state file is ready at once (it serves the state as saved; reads
/// that need freshness wait); its line says so until it has caught up.
async fn readyz(State(caches): State<Arc<Caches>>) -> Response {
    let mut body = String::new();
    let mut ready = true;
    for cache in caches.iter() {
        match cache.reader.readiness() {
            kubecache_reflector::Readiness::Ready => {
                let restored = match cache.status.borrow().restored {
                    Some(r) if !r.caught_up => format!(
                        " (restored from the state file at resourceVersion {}, catching up)",
                        r.resource_version
                    ),
                    _ => String::new(),
                };
                body.push_str(&format!("[+]cache {} ok{restored}\n", cache.name()));
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
