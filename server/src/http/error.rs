//! The HTTP API's own errors, worded as kube-apiserver words them.

use kubecache_wire::Status;

use crate::error::ApiError;

/// 404 for a path the server does not serve, worded as kube-apiserver words it.
pub fn no_such_path() -> ApiError {
    let mut status = Status::failure(
        404,
        "NotFound",
        "the server could not find the requested resource",
    );
    status.details = Some(Default::default());
    ApiError::from(status)
}

/// 405 for a method a path does not serve (a POST to `/healthz`), worded
/// as kube-apiserver words it.
pub fn method_not_allowed(method: &str) -> ApiError {
    ApiError::from(Status::failure(
        405,
        "MethodNotAllowed",
        format!(
            "the server does not allow this method on the requested resource: {method} is not served"
        ),
    ))
}

/// [`method_not_allowed`] of a request's method, as a router's fallback.
pub async fn method_not_allowed_fallback(method: axum::http::Method) -> ApiError {
    method_not_allowed(method.as_str())
}

/// 405 for a write to the query API, which only reads.
pub fn read_only(method: &str) -> ApiError {
    ApiError::from(Status::failure(
        405,
        "MethodNotAllowed",
        format!(
            "the server does not allow this method on the requested resource: the query API (/v1) is read-only, {method} is not served"
        ),
    ))
}

/// 503 until the resource has synced.
pub fn not_ready(resource: &str, why: &str) -> ApiError {
    ApiError::from(Status::service_unavailable(format!(
        "kubecache has not synced {resource} yet: {why}"
    )))
}
